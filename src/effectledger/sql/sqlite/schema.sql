-- effectledger SQLite schema: the current complete schema (equal to the replayed migrations).
-- Every key starts with the tenant, so every read and write is tenant-scoped by construction.
-- Hash columns are DIGEST BLOB: a hash's 32 bytes, or 33 for a version 2 hash, read back as its
-- hex string by the store (effectledger.store.hashes, migration 15).

CREATE TABLE operations (
    tenant_id            TEXT    NOT NULL,
    operation_id         TEXT    NOT NULL,
    requester_id         TEXT    NOT NULL,
    revision             TEXT    NOT NULL,
    action               TEXT    NOT NULL,
    contract_version     TEXT    NOT NULL,
    command_json         TEXT    NOT NULL,
    fingerprint          DIGEST BLOB NOT NULL,
    admission_reference  TEXT    NOT NULL,
    destination_account  TEXT    NOT NULL,
    destination_endpoint TEXT    NOT NULL,
    idempotency_key      TEXT    NOT NULL,
    state                TEXT    NOT NULL CHECK (state IN ('READY', 'IN_PROGRESS', 'SUCCEEDED',
                             'REJECTED', 'RETRY_PENDING', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                             'RELEASED')),
    version              INTEGER NOT NULL CHECK (version >= 1),
    active_attempt_id    TEXT,
    provider_reference   TEXT,
    inconclusive_lookups INTEGER NOT NULL DEFAULT 0,
    retries_authorized   INTEGER NOT NULL DEFAULT 0,
    review_owner         TEXT,
    review_deadline_us   INTEGER,
    created_us           INTEGER NOT NULL,
    updated_us           INTEGER NOT NULL,
    last_event_hash      DIGEST BLOB NOT NULL,
    proposal_id          TEXT,
    approval_id          TEXT,
    pool                 TEXT,
    units                INTEGER NOT NULL DEFAULT 0 CHECK (units >= 0),
    event_sequence       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE TABLE attempts (
    tenant_id            TEXT    NOT NULL,
    operation_id         TEXT    NOT NULL,
    attempt_id           TEXT    NOT NULL,
    executor_id          TEXT    NOT NULL,
    destination_account  TEXT    NOT NULL,
    destination_endpoint TEXT    NOT NULL,
    idempotency_key      TEXT    NOT NULL,
    prepared_us          INTEGER NOT NULL,
    recover_after_us     INTEGER NOT NULL,
    observation          TEXT CHECK (observation IN ('Accepted', 'PermanentRejection',
                             'RetryableRejection', 'Unknown')),
    provider_reference   TEXT,
    evidence_reference   TEXT,
    PRIMARY KEY (tenant_id, operation_id, attempt_id),
    FOREIGN KEY (tenant_id, operation_id) REFERENCES operations (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE TABLE audit_events (
    event_id           TEXT    NOT NULL PRIMARY KEY,
    tenant_id          TEXT    NOT NULL,
    operation_id       TEXT    NOT NULL,
    attempt_id         TEXT,
    sequence           INTEGER NOT NULL CHECK (sequence >= 1),
    actor              TEXT    NOT NULL,
    event_type         TEXT    NOT NULL,
    recorded_us        INTEGER NOT NULL,
    evidence_reference TEXT,
    details_json       TEXT    NOT NULL,
    observation_id     TEXT,
    prev_hash          DIGEST BLOB NOT NULL,
    event_hash         DIGEST BLOB NOT NULL,
    trail_tag          TEXT,
    UNIQUE (tenant_id, operation_id, sequence),
    -- An operation's trail starts before the operation row exists (its proposal and approval
    -- events), so events reference the operation by id only; attempts are enforced:
    -- the database itself rejects an event that names one operation and another's attempt.
    FOREIGN KEY (tenant_id, operation_id, attempt_id)
        REFERENCES attempts (tenant_id, operation_id, attempt_id)
);

CREATE UNIQUE INDEX audit_events_observation
    ON audit_events (tenant_id, operation_id, observation_id)
    WHERE observation_id IS NOT NULL;

-- The audit trail is append-only: corrections are new events.
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only');
END;

CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only');
END;

CREATE TABLE proposals (
    tenant_id        TEXT    NOT NULL,
    proposal_id      TEXT    NOT NULL,
    operation_id     TEXT    NOT NULL,
    proposer_id      TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    contract_version TEXT    NOT NULL,
    target           TEXT    NOT NULL,
    resource_version TEXT    NOT NULL,
    arguments_json   TEXT    NOT NULL,
    units            INTEGER NOT NULL CHECK (units >= 0),
    pool             TEXT    NOT NULL,
    destination_account  TEXT NOT NULL,
    destination_endpoint TEXT NOT NULL,
    policy_version   TEXT    NOT NULL,
    expires_us       INTEGER NOT NULL,
    correlation_json TEXT    NOT NULL,
    digest           DIGEST BLOB NOT NULL,
    created_us       INTEGER NOT NULL,
    stated_reason TEXT,
    PRIMARY KEY (tenant_id, proposal_id),
    UNIQUE (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE TRIGGER proposals_no_update BEFORE UPDATE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are immutable');
END;

CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are immutable');
END;

CREATE INDEX proposals_by_expiry ON proposals (tenant_id, expires_us, proposal_id);

CREATE INDEX proposals_by_age ON proposals (tenant_id, created_us, proposal_id);

CREATE TABLE approvals (
    tenant_id      TEXT    NOT NULL,
    approval_id    TEXT    NOT NULL,
    proposal_id    TEXT    NOT NULL,
    digest         DIGEST BLOB NOT NULL,
    decision       TEXT    NOT NULL CHECK (decision IN ('granted', 'denied')),
    kind           TEXT    NOT NULL CHECK (kind IN ('approval', 'preauthorization')),
    approver_id    TEXT    NOT NULL,
    policy_version TEXT    NOT NULL,
    reason         TEXT,
    decided_us     INTEGER NOT NULL,
    expires_us     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, proposal_id)
) WITHOUT ROWID;

-- Only pre-authorizations are counted by kind (their budget): the index holds nothing else.
CREATE INDEX approvals_by_kind ON approvals (tenant_id, kind, decided_us)
    WHERE kind = 'preauthorization';

CREATE INDEX approvals_by_proposal ON approvals (tenant_id, proposal_id, decided_us);

CREATE TRIGGER approvals_no_update BEFORE UPDATE ON approvals
BEGIN
    SELECT RAISE(ABORT, 'approvals are immutable');
END;

CREATE TRIGGER approvals_no_delete BEFORE DELETE ON approvals
BEGIN
    SELECT RAISE(ABORT, 'approvals are immutable');
END;

-- A decision is written after its ApprovalGranted / ApprovalDenied / PreauthorizationApplied
-- event, in the same transaction; a row inserted any other way has no such event and is refused.
CREATE TRIGGER approvals_insert_needs_event BEFORE INSERT ON approvals
WHEN NOT EXISTS (
    SELECT 1 FROM audit_events AS e
    JOIN proposals AS p ON p.tenant_id = e.tenant_id AND p.operation_id = e.operation_id
    WHERE p.tenant_id = NEW.tenant_id AND p.proposal_id = NEW.proposal_id
      AND e.evidence_reference = 'approval/' || NEW.approval_id
      AND e.event_type IN ('ApprovalGranted', 'ApprovalDenied', 'PreauthorizationApplied')
)
BEGIN
    SELECT RAISE(ABORT, 'an approval needs the audit event that records it');
END;

-- Single use is a primary key: an approval can be consumed by one operation, once.
CREATE TABLE approval_consumptions (
    tenant_id    TEXT    NOT NULL,
    approval_id  TEXT    NOT NULL,
    operation_id TEXT    NOT NULL,
    consumed_us  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, approval_id) REFERENCES approvals (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, operation_id) REFERENCES operations (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE TRIGGER approval_consumptions_no_update BEFORE UPDATE ON approval_consumptions
BEGIN
    SELECT RAISE(ABORT, 'approval consumption is permanent');
END;

CREATE TRIGGER approval_consumptions_no_delete BEFORE DELETE ON approval_consumptions
BEGIN
    SELECT RAISE(ABORT, 'approval consumption is permanent');
END;

CREATE TABLE capacity_limits (
    tenant_id   TEXT    NOT NULL,
    pool        TEXT    NOT NULL,
    limit_units INTEGER NOT NULL CHECK (limit_units >= 0),
    updated_us  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, pool)
) WITHOUT ROWID;

-- Running capacity totals per pool, moved by triggers in the transaction that moves the units
-- (migration 14): admission reads them instead of summing the pool's history.
CREATE TABLE capacity_totals (
    tenant_id TEXT    NOT NULL,
    pool      TEXT    NOT NULL,
    shard     INTEGER NOT NULL CHECK (shard >= 0),
    held      INTEGER NOT NULL DEFAULT 0,
    committed INTEGER NOT NULL DEFAULT 0,
    freed     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, pool, shard)
) WITHOUT ROWID;

CREATE TRIGGER operations_capacity_admitted AFTER INSERT ON operations
WHEN NEW.pool IS NOT NULL AND NEW.units > 0
BEGIN
    INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
    VALUES (
        NEW.tenant_id, NEW.pool, 0,
        CASE WHEN NEW.state IN ('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                                'RETRY_PENDING') THEN NEW.units ELSE 0 END,
        CASE WHEN NEW.state = 'SUCCEEDED' THEN NEW.units ELSE 0 END,
        CASE WHEN NEW.state IN ('REJECTED', 'RELEASED') THEN NEW.units ELSE 0 END
    )
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = held + excluded.held,
        committed = committed + excluded.committed,
        freed = freed + excluded.freed;
END;

-- Only a change of category (held, committed, freed) touches the pool's row.
CREATE TRIGGER operations_capacity_moved AFTER UPDATE OF state ON operations
WHEN NEW.pool IS NOT NULL AND NEW.units > 0
    AND (OLD.state = 'SUCCEEDED') + 2 * (OLD.state IN ('REJECTED', 'RELEASED'))
        != (NEW.state = 'SUCCEEDED') + 2 * (NEW.state IN ('REJECTED', 'RELEASED'))
BEGIN
    INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
    VALUES (
        NEW.tenant_id, NEW.pool, 0,
        NEW.units * ((NEW.state NOT IN ('SUCCEEDED', 'REJECTED', 'RELEASED'))
                     - (OLD.state NOT IN ('SUCCEEDED', 'REJECTED', 'RELEASED'))),
        NEW.units * ((NEW.state = 'SUCCEEDED') - (OLD.state = 'SUCCEEDED')),
        NEW.units * ((NEW.state IN ('REJECTED', 'RELEASED'))
                     - (OLD.state IN ('REJECTED', 'RELEASED')))
    )
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = held + excluded.held,
        committed = committed + excluded.committed,
        freed = freed + excluded.freed;
END;

CREATE TRIGGER operations_capacity_fixed BEFORE UPDATE OF pool, units ON operations
WHEN NEW.pool IS NOT OLD.pool OR NEW.units != OLD.units
BEGIN
    SELECT RAISE(ABORT, 'an operation''s pool and units are fixed at admission');
END;

CREATE INDEX operations_by_reference
    ON operations (tenant_id, destination_account, destination_endpoint, provider_reference);

-- The hot path only gains one row per event in log_pending (written by a trigger, no per-tenant
-- lock); the sealer assigns log positions in batches and signs a checkpoint per batch.

-- Events committed but not yet given a log position, in commit order (pending_id). Kept lean:
-- every audit event writes one row here. (event_id is unique through audit_events' key.)
CREATE TABLE log_pending (
    pending_id  INTEGER PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    recorded_us INTEGER NOT NULL
);

CREATE INDEX log_pending_by_tenant ON log_pending (tenant_id, pending_id);

CREATE TRIGGER audit_events_log_pending AFTER INSERT ON audit_events
BEGIN
    INSERT INTO log_pending (tenant_id, event_id, recorded_us)
    VALUES (NEW.tenant_id, NEW.event_id, NEW.recorded_us);
END;

-- The per-tenant Merkle log: leaf `position` of tenant's log is event `event_id`.
CREATE TABLE log_entries (
    tenant_id TEXT    NOT NULL,
    position  INTEGER NOT NULL CHECK (position >= 0),
    event_id  TEXT    NOT NULL UNIQUE REFERENCES audit_events (event_id),
    leaf_hash DIGEST BLOB NOT NULL CHECK (length(leaf_hash) = 32
                               OR typeof(leaf_hash) = 'text' AND length(leaf_hash) = 64),
    sealed_us INTEGER NOT NULL,
    operation_id TEXT,
    sequence INTEGER CHECK (sequence >= 1),
    PRIMARY KEY (tenant_id, position)
) WITHOUT ROWID;

-- The trail position each entry sealed (operation_id, sequence; migration 16, empty for an entry
-- whose event was gone when the migration filled them in). A claim reads its operation's sealed
-- positions; the sealer looks one up before sealing it.
CREATE UNIQUE INDEX log_entries_by_position ON log_entries (tenant_id, operation_id, sequence);

-- One row per tenant log: its size, root, right edge (frontier) and latest checkpoint. The sealer
-- holds this row for the whole seal transaction, so two sealers never assign the same position.
CREATE TABLE log_heads (
    tenant_id      TEXT    NOT NULL PRIMARY KEY,
    size           INTEGER NOT NULL CHECK (size >= 0),
    root_hash      TEXT    NOT NULL CHECK (length(root_hash) = 64),
    frontier       TEXT    NOT NULL,
    checkpoint_seq INTEGER NOT NULL CHECK (checkpoint_seq >= 0),
    updated_us     INTEGER NOT NULL
) WITHOUT ROWID;

-- Every signed checkpoint ever issued, with the consistency proof from the one before it.
CREATE TABLE log_checkpoints (
    tenant_id         TEXT    NOT NULL,
    seq               INTEGER NOT NULL CHECK (seq >= 1),
    size              INTEGER NOT NULL CHECK (size >= 0),
    root_hash         TEXT    NOT NULL CHECK (length(root_hash) = 64),
    previous_size     INTEGER NOT NULL CHECK (previous_size >= 0 AND previous_size <= size),
    consistency_proof TEXT    NOT NULL,
    note              TEXT    NOT NULL,
    signed_us         INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, seq)
) WITHOUT ROWID;

-- Durable cursors of exporters: what each has durably written, so a restart resumes exactly.
CREATE TABLE export_cursors (
    exporter_id    TEXT    NOT NULL,
    tenant_id      TEXT    NOT NULL,
    position       INTEGER NOT NULL CHECK (position >= 0),
    checkpoint_seq INTEGER NOT NULL CHECK (checkpoint_seq >= 0),
    file_offset    INTEGER NOT NULL CHECK (file_offset >= 0),
    updated_us     INTEGER NOT NULL,
    PRIMARY KEY (exporter_id, tenant_id)
) WITHOUT ROWID;

-- The log and its checkpoints are append-only, like the audit trail they cover.
CREATE TRIGGER log_entries_no_update BEFORE UPDATE ON log_entries
BEGIN
    SELECT RAISE(ABORT, 'log_entries is append-only');
END;

CREATE TRIGGER log_entries_no_delete BEFORE DELETE ON log_entries
BEGIN
    SELECT RAISE(ABORT, 'log_entries is append-only');
END;

CREATE TRIGGER log_checkpoints_no_update BEFORE UPDATE ON log_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'log_checkpoints is append-only');
END;

CREATE TRIGGER log_checkpoints_no_delete BEFORE DELETE ON log_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'log_checkpoints is append-only');
END;

-- Events written before this migration wait for the sealer like new ones (one operation's
-- events stay in sequence order).
INSERT INTO log_pending (tenant_id, event_id, recorded_us)
SELECT tenant_id, event_id, recorded_us FROM audit_events
ORDER BY tenant_id, operation_id, sequence;

-- Executors pull the READY operations of their destination, oldest first; recovery starts from
-- the unresolved operations. Neither walks the history of resolved operations.

CREATE INDEX operations_ready
    ON operations (destination_account, destination_endpoint, created_us, tenant_id, operation_id)
    WHERE state = 'READY';

CREATE INDEX operations_unresolved
    ON operations (tenant_id, operation_id)
    WHERE state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN');

CREATE INDEX operations_in_review
    ON operations (tenant_id, review_deadline_us, operation_id)
    WHERE state = 'MANUAL_REVIEW';

CREATE TABLE evidence_blobs (
    tenant_id  TEXT    NOT NULL,
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    media_type TEXT    NOT NULL,
    size_bytes INTEGER NOT NULL CHECK (size_bytes BETWEEN 0 AND 65536),
    content    BLOB    NOT NULL CHECK (length(content) = size_bytes),
    stored_us  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, sha256)
) WITHOUT ROWID;

-- Evidence is append-only: a stored answer is never edited or removed.
CREATE TRIGGER evidence_blobs_no_update BEFORE UPDATE ON evidence_blobs
BEGIN
    SELECT RAISE(ABORT, 'evidence_blobs is append-only');
END;

CREATE TRIGGER evidence_blobs_no_delete BEFORE DELETE ON evidence_blobs
BEGIN
    SELECT RAISE(ABORT, 'evidence_blobs is append-only');
END;

-- API keys for the HTTP API: found by key_id, checked against the SHA-256 of the secret token
-- (never stored); identity fixed, revocable once.

CREATE TABLE api_keys (
    key_id      TEXT    NOT NULL PRIMARY KEY,
    secret_hash TEXT    NOT NULL,
    tenant_id   TEXT    NOT NULL,
    actor_id    TEXT    NOT NULL,
    roles_json  TEXT    NOT NULL,
    created_us  INTEGER NOT NULL,
    revoked_us  INTEGER
) WITHOUT ROWID;

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_us);

CREATE TRIGGER api_keys_identity_fixed BEFORE UPDATE ON api_keys
WHEN NEW.key_id IS NOT OLD.key_id OR NEW.secret_hash IS NOT OLD.secret_hash
  OR NEW.tenant_id IS NOT OLD.tenant_id OR NEW.actor_id IS NOT OLD.actor_id
  OR NEW.roles_json IS NOT OLD.roles_json OR NEW.created_us IS NOT OLD.created_us
  OR OLD.revoked_us IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'an API key can only be revoked, once');
END;

-- Witness cosignatures of checkpoints (migration 13).
-- The sealer submits each checkpoint it signs to the witnesses it is configured with; each
-- cosignature line a witness returns is verified with that witness's key and stored here, keyed
-- by the checkpoint and the witness's verifier key. Size and root repeat the checkpoint's, so a
-- cosignature never attaches to another checkpoint stored under the same number.

CREATE TABLE checkpoint_cosignatures (
    tenant_id   TEXT    NOT NULL,
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    witness_key TEXT    NOT NULL,
    size        INTEGER NOT NULL CHECK (size >= 0),
    root_hash   TEXT    NOT NULL CHECK (length(root_hash) = 64),
    cosignature TEXT    NOT NULL,
    cosigned_us INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, seq, witness_key)
) WITHOUT ROWID;

-- The sealer finds the latest checkpoint each witness cosigned.
CREATE INDEX checkpoint_cosignatures_by_witness
    ON checkpoint_cosignatures (tenant_id, witness_key, seq);

CREATE TRIGGER checkpoint_cosignatures_no_update BEFORE UPDATE ON checkpoint_cosignatures
BEGIN
    SELECT RAISE(ABORT, 'checkpoint_cosignatures is append-only');
END;

CREATE TRIGGER checkpoint_cosignatures_no_delete BEFORE DELETE ON checkpoint_cosignatures
BEGIN
    SELECT RAISE(ABORT, 'checkpoint_cosignatures is append-only');
END;

-- The W3C trace context an operation was admitted in, kept while tracing records (migration 17):
-- later spans for the operation link to it. Not evidence; identifiers only.
CREATE TABLE operation_traces (
    tenant_id    TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    traceparent  TEXT NOT NULL CHECK (length(traceparent) = 55),
    PRIMARY KEY (tenant_id, operation_id)
) WITHOUT ROWID;
