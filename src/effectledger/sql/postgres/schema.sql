-- effectledger PostgreSQL schema: the current complete schema (equal to the replayed migrations).
-- The same tables, keys and constraints as the SQLite schema. Times are microseconds since the
-- Unix epoch in BIGINT columns; every key starts with the tenant. Hash columns are BYTEA: a
-- hash's 32 bytes, or 33 for a version 2 hash (effectledger.store.hashes, migration 15).

CREATE TABLE operations (
    tenant_id            TEXT    NOT NULL,
    operation_id         TEXT    NOT NULL,
    requester_id         TEXT    NOT NULL,
    revision             TEXT    NOT NULL,
    action               TEXT    NOT NULL,
    contract_version     TEXT    NOT NULL,
    command_json         TEXT    NOT NULL,
    fingerprint          BYTEA   NOT NULL,
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
    review_deadline_us   BIGINT,
    created_us           BIGINT  NOT NULL,
    updated_us           BIGINT  NOT NULL,
    last_event_hash      BYTEA   NOT NULL,
    proposal_id          TEXT,
    approval_id          TEXT,
    pool                 TEXT,
    units                BIGINT  NOT NULL DEFAULT 0 CHECK (units >= 0),
    event_sequence       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, operation_id)
);

CREATE TABLE attempts (
    tenant_id            TEXT    NOT NULL,
    operation_id         TEXT    NOT NULL,
    attempt_id           TEXT    NOT NULL,
    executor_id          TEXT    NOT NULL,
    destination_account  TEXT    NOT NULL,
    destination_endpoint TEXT    NOT NULL,
    idempotency_key      TEXT    NOT NULL,
    prepared_us          BIGINT  NOT NULL,
    recover_after_us     BIGINT  NOT NULL,
    observation          TEXT CHECK (observation IN ('Accepted', 'PermanentRejection',
                             'RetryableRejection', 'Unknown')),
    provider_reference   TEXT,
    evidence_reference   TEXT,
    PRIMARY KEY (tenant_id, operation_id, attempt_id),
    FOREIGN KEY (tenant_id, operation_id) REFERENCES operations (tenant_id, operation_id)
);

CREATE INDEX attempts_due ON attempts (recover_after_us);

CREATE TABLE audit_events (
    event_id           TEXT    NOT NULL PRIMARY KEY,
    tenant_id          TEXT    NOT NULL,
    operation_id       TEXT    NOT NULL,
    attempt_id         TEXT,
    sequence           INTEGER NOT NULL CHECK (sequence >= 1),
    actor              TEXT    NOT NULL,
    event_type         TEXT    NOT NULL,
    recorded_us        BIGINT  NOT NULL,
    evidence_reference TEXT,
    details_json       TEXT    NOT NULL,
    observation_id     TEXT,
    prev_hash          BYTEA   NOT NULL,
    event_hash         BYTEA   NOT NULL,
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

-- The audit trail is append-only: corrections are new events. SQLSTATE 23000 makes the store
-- report a refused change as a constraint violation, as SQLite's RAISE(ABORT) does.
CREATE FUNCTION audit_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

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
    units            BIGINT  NOT NULL CHECK (units >= 0),
    pool             TEXT    NOT NULL,
    destination_account  TEXT NOT NULL,
    destination_endpoint TEXT NOT NULL,
    policy_version   TEXT    NOT NULL,
    expires_us       BIGINT  NOT NULL,
    correlation_json TEXT    NOT NULL,
    digest           BYTEA   NOT NULL,
    created_us       BIGINT  NOT NULL,
    stated_reason TEXT,
    PRIMARY KEY (tenant_id, proposal_id),
    UNIQUE (tenant_id, operation_id)
);

-- Proposals, approvals and consumptions never change once written. SQLSTATE 23000 makes the
-- store report a refused change as a constraint violation, as SQLite's RAISE(ABORT) does.
CREATE FUNCTION authority_rows_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER proposals_no_update BEFORE UPDATE ON proposals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER proposals_no_truncate BEFORE TRUNCATE ON proposals
    FOR EACH STATEMENT EXECUTE FUNCTION authority_rows_immutable();

CREATE INDEX proposals_by_expiry ON proposals (tenant_id, expires_us, proposal_id);

CREATE INDEX proposals_by_age ON proposals (tenant_id, created_us, proposal_id);

CREATE TABLE approvals (
    tenant_id      TEXT    NOT NULL,
    approval_id    TEXT    NOT NULL,
    proposal_id    TEXT    NOT NULL,
    digest         BYTEA   NOT NULL,
    decision       TEXT    NOT NULL CHECK (decision IN ('granted', 'denied')),
    kind           TEXT    NOT NULL CHECK (kind IN ('approval', 'preauthorization')),
    approver_id    TEXT    NOT NULL,
    policy_version TEXT    NOT NULL,
    reason         TEXT,
    decided_us     BIGINT  NOT NULL,
    expires_us     BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, proposal_id)
);

-- Only pre-authorizations are counted by kind (their budget): the index holds nothing else.
CREATE INDEX approvals_by_kind ON approvals (tenant_id, kind, decided_us)
    WHERE kind = 'preauthorization';

CREATE INDEX approvals_by_proposal ON approvals (tenant_id, proposal_id, decided_us);

CREATE TRIGGER approvals_no_update BEFORE UPDATE ON approvals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approvals_no_delete BEFORE DELETE ON approvals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approvals_no_truncate BEFORE TRUNCATE ON approvals
    FOR EACH STATEMENT EXECUTE FUNCTION authority_rows_immutable();

-- A decision is written after its ApprovalGranted / ApprovalDenied / PreauthorizationApplied
-- event, in the same transaction; a row inserted any other way has no such event and is refused.
CREATE FUNCTION approvals_insert_needs_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM audit_events AS e
        JOIN proposals AS p ON p.tenant_id = e.tenant_id AND p.operation_id = e.operation_id
        WHERE p.tenant_id = NEW.tenant_id AND p.proposal_id = NEW.proposal_id
          AND e.evidence_reference = 'approval/' || NEW.approval_id
          AND e.event_type IN ('ApprovalGranted', 'ApprovalDenied', 'PreauthorizationApplied')
    ) THEN
        RAISE EXCEPTION 'an approval needs the audit event that records it'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER approvals_insert_needs_event BEFORE INSERT ON approvals
    FOR EACH ROW EXECUTE FUNCTION approvals_insert_needs_event();

-- Single use is a primary key: an approval can be consumed by one operation, once.
CREATE TABLE approval_consumptions (
    tenant_id    TEXT    NOT NULL,
    approval_id  TEXT    NOT NULL,
    operation_id TEXT    NOT NULL,
    consumed_us  BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, approval_id) REFERENCES approvals (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, operation_id) REFERENCES operations (tenant_id, operation_id)
);

CREATE TRIGGER approval_consumptions_no_update BEFORE UPDATE ON approval_consumptions
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approval_consumptions_no_delete BEFORE DELETE ON approval_consumptions
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approval_consumptions_no_truncate BEFORE TRUNCATE ON approval_consumptions
    FOR EACH STATEMENT EXECUTE FUNCTION authority_rows_immutable();

CREATE TABLE capacity_limits (
    tenant_id   TEXT    NOT NULL,
    pool        TEXT    NOT NULL,
    limit_units BIGINT  NOT NULL CHECK (limit_units >= 0),
    updated_us  BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, pool)
);

-- Running capacity totals per pool, moved by triggers in the transaction that moves the units
-- (migration 14): admission reads them instead of summing the pool's history.
CREATE TABLE capacity_totals (
    tenant_id TEXT    NOT NULL,
    pool      TEXT    NOT NULL,
    shard     INTEGER NOT NULL CHECK (shard >= 0),
    held      BIGINT  NOT NULL DEFAULT 0,
    committed BIGINT  NOT NULL DEFAULT 0,
    freed     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, pool, shard)
);

-- Each pool's totals are spread over 8 rows, chosen by the server process that moves the units:
-- transactions on different connections rarely wait for one another's row, and a read sums the
-- pool's rows (benchmarks/capacity_pool.py measured one row per pool at half the throughput of
-- separate pools under 8 processes; docs/scaling.md).
CREATE FUNCTION effectledger_capacity_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held_delta      BIGINT := 0;
    committed_delta BIGINT := 0;
    freed_delta     BIGINT := 0;
BEGIN
    IF NEW.state = 'SUCCEEDED' THEN
        committed_delta := NEW.units;
    ELSIF NEW.state IN ('REJECTED', 'RELEASED') THEN
        freed_delta := NEW.units;
    ELSE
        held_delta := NEW.units;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.state = 'SUCCEEDED' THEN
            committed_delta := committed_delta - OLD.units;
        ELSIF OLD.state IN ('REJECTED', 'RELEASED') THEN
            freed_delta := freed_delta - OLD.units;
        ELSE
            held_delta := held_delta - OLD.units;
        END IF;
    END IF;
    IF held_delta = 0 AND committed_delta = 0 AND freed_delta = 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO capacity_totals AS t (tenant_id, pool, shard, held, committed, freed)
    VALUES (NEW.tenant_id, NEW.pool, pg_backend_pid() % 8, held_delta, committed_delta,
            freed_delta)
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = t.held + EXCLUDED.held,
        committed = t.committed + EXCLUDED.committed,
        freed = t.freed + EXCLUDED.freed;
    RETURN NULL;
END;
$$;

CREATE TRIGGER operations_capacity_admitted AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.pool IS NOT NULL AND NEW.units > 0)
    EXECUTE FUNCTION effectledger_capacity_moved();

CREATE TRIGGER operations_capacity_moved AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (NEW.pool IS NOT NULL AND NEW.units > 0 AND OLD.state <> NEW.state)
    EXECUTE FUNCTION effectledger_capacity_moved();

CREATE FUNCTION effectledger_capacity_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an operation''s pool and units are fixed at admission'
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER operations_capacity_fixed BEFORE UPDATE OF pool, units ON operations
    FOR EACH ROW WHEN (NEW.pool IS DISTINCT FROM OLD.pool OR NEW.units <> OLD.units)
    EXECUTE FUNCTION effectledger_capacity_fixed();

CREATE INDEX operations_by_reference
    ON operations (tenant_id, destination_account, destination_endpoint, provider_reference);

-- cursors). The hot path only gains one row per event in log_pending, written by a trigger with
-- no per-tenant lock; the sealer assigns log positions in batches and signs a checkpoint per
-- batch while holding the tenant's log_heads row (SELECT ... FOR UPDATE).

-- Events committed but not yet given a log position. An event's pending_id is drawn before its
-- transaction commits, so an operation's later event always has a larger pending_id. Kept lean:
-- every audit event writes one row here. (event_id is unique through audit_events' key.)
CREATE TABLE log_pending (
    pending_id  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   TEXT   NOT NULL,
    event_id    TEXT   NOT NULL,
    recorded_us BIGINT NOT NULL
);

CREATE INDEX log_pending_by_tenant ON log_pending (tenant_id, pending_id);

CREATE FUNCTION effectledger_log_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO log_pending (tenant_id, event_id, recorded_us)
    VALUES (NEW.tenant_id, NEW.event_id, NEW.recorded_us);
    RETURN NULL;
END;
$$;

CREATE TRIGGER audit_events_log_pending AFTER INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION effectledger_log_pending();

-- The per-tenant Merkle log: leaf `position` of the tenant's log is event `event_id`.
CREATE TABLE log_entries (
    tenant_id TEXT   NOT NULL,
    position  BIGINT NOT NULL CHECK (position >= 0),
    event_id  TEXT   NOT NULL UNIQUE REFERENCES audit_events (event_id),
    leaf_hash BYTEA  NOT NULL CHECK (octet_length(leaf_hash) = 32),
    sealed_us BIGINT NOT NULL,
    -- The trail position the entry sealed (migration 16; empty for an entry whose event was
    -- gone when the migration filled them in).
    operation_id TEXT,
    sequence  BIGINT CHECK (sequence >= 1),
    PRIMARY KEY (tenant_id, position)
);

-- A claim reads its operation's sealed positions; the sealer looks one up before sealing it.
CREATE UNIQUE INDEX log_entries_by_position ON log_entries (tenant_id, operation_id, sequence);

-- One row per tenant log: its size, root, right edge (frontier) and latest checkpoint. The sealer
-- locks this row for the whole seal transaction, so two sealers never assign the same position.
CREATE TABLE log_heads (
    tenant_id      TEXT   NOT NULL PRIMARY KEY,
    size           BIGINT NOT NULL CHECK (size >= 0),
    root_hash      TEXT   NOT NULL CHECK (length(root_hash) = 64),
    frontier       TEXT   NOT NULL,
    checkpoint_seq BIGINT NOT NULL CHECK (checkpoint_seq >= 0),
    updated_us     BIGINT NOT NULL
);

-- Every signed checkpoint ever issued, with the consistency proof from the one before it.
CREATE TABLE log_checkpoints (
    tenant_id         TEXT   NOT NULL,
    seq               BIGINT NOT NULL CHECK (seq >= 1),
    size              BIGINT NOT NULL CHECK (size >= 0),
    root_hash         TEXT   NOT NULL CHECK (length(root_hash) = 64),
    previous_size     BIGINT NOT NULL CHECK (previous_size >= 0 AND previous_size <= size),
    consistency_proof TEXT   NOT NULL,
    note              TEXT   NOT NULL,
    signed_us         BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, seq)
);

-- Durable cursors of exporters: what each has durably written, so a restart resumes exactly.
CREATE TABLE export_cursors (
    exporter_id    TEXT   NOT NULL,
    tenant_id      TEXT   NOT NULL,
    position       BIGINT NOT NULL CHECK (position >= 0),
    checkpoint_seq BIGINT NOT NULL CHECK (checkpoint_seq >= 0),
    file_offset    BIGINT NOT NULL CHECK (file_offset >= 0),
    updated_us     BIGINT NOT NULL,
    PRIMARY KEY (exporter_id, tenant_id)
);

-- The log and its checkpoints are append-only, like the audit trail they cover.
CREATE FUNCTION effectledger_evidence_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER log_entries_append_only BEFORE UPDATE OR DELETE ON log_entries
    FOR EACH ROW EXECUTE FUNCTION effectledger_evidence_append_only();

CREATE TRIGGER log_entries_no_truncate BEFORE TRUNCATE ON log_entries
    FOR EACH STATEMENT EXECUTE FUNCTION effectledger_evidence_append_only();

CREATE TRIGGER log_checkpoints_append_only BEFORE UPDATE OR DELETE ON log_checkpoints
    FOR EACH ROW EXECUTE FUNCTION effectledger_evidence_append_only();

CREATE TRIGGER log_checkpoints_no_truncate BEFORE TRUNCATE ON log_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION effectledger_evidence_append_only();

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
    content    BYTEA   NOT NULL CHECK (octet_length(content) = size_bytes),
    stored_us  BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, sha256)
);

-- Evidence is append-only: a stored answer is never edited or removed. SQLSTATE 23000 makes the
-- store report a refused change as a constraint violation, as SQLite's RAISE(ABORT) does.
CREATE FUNCTION evidence_blobs_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evidence_blobs is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER evidence_blobs_no_update BEFORE UPDATE ON evidence_blobs
    FOR EACH ROW EXECUTE FUNCTION evidence_blobs_append_only();

CREATE TRIGGER evidence_blobs_no_delete BEFORE DELETE ON evidence_blobs
    FOR EACH ROW EXECUTE FUNCTION evidence_blobs_append_only();

CREATE TRIGGER evidence_blobs_no_truncate BEFORE TRUNCATE ON evidence_blobs
    FOR EACH STATEMENT EXECUTE FUNCTION evidence_blobs_append_only();

-- API keys for the HTTP API: found by key_id, checked against the SHA-256 of the secret token
-- (never stored); identity fixed, revocable once.

CREATE TABLE api_keys (
    key_id      TEXT    NOT NULL PRIMARY KEY,
    secret_hash TEXT    NOT NULL,
    tenant_id   TEXT    NOT NULL,
    actor_id    TEXT    NOT NULL,
    roles_json  TEXT    NOT NULL,
    created_us  BIGINT  NOT NULL,
    revoked_us  BIGINT
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_us);

CREATE FUNCTION api_keys_identity_fixed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key_id IS DISTINCT FROM OLD.key_id OR NEW.secret_hash IS DISTINCT FROM OLD.secret_hash
       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.actor_id IS DISTINCT FROM OLD.actor_id
       OR NEW.roles_json IS DISTINCT FROM OLD.roles_json
       OR NEW.created_us IS DISTINCT FROM OLD.created_us OR OLD.revoked_us IS NOT NULL THEN
        RAISE EXCEPTION 'an API key can only be revoked, once'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER api_keys_identity_fixed BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_identity_fixed();

-- Witness cosignatures of checkpoints (migration 13).
-- The sealer submits each checkpoint it signs to the witnesses it is configured with; each
-- cosignature line a witness returns is verified with that witness's key and stored here, keyed
-- by the checkpoint and the witness's verifier key. Size and root repeat the checkpoint's, so a
-- cosignature never attaches to another checkpoint stored under the same number.

CREATE TABLE checkpoint_cosignatures (
    tenant_id   TEXT   NOT NULL,
    seq         BIGINT NOT NULL CHECK (seq >= 1),
    witness_key TEXT   NOT NULL,
    size        BIGINT NOT NULL CHECK (size >= 0),
    root_hash   TEXT   NOT NULL CHECK (length(root_hash) = 64),
    cosignature TEXT   NOT NULL,
    cosigned_us BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, seq, witness_key)
);

-- The sealer finds the latest checkpoint each witness cosigned.
CREATE INDEX checkpoint_cosignatures_by_witness
    ON checkpoint_cosignatures (tenant_id, witness_key, seq);

CREATE TRIGGER checkpoint_cosignatures_append_only
    BEFORE UPDATE OR DELETE ON checkpoint_cosignatures
    FOR EACH ROW EXECUTE FUNCTION effectledger_evidence_append_only();

CREATE TRIGGER checkpoint_cosignatures_no_truncate BEFORE TRUNCATE ON checkpoint_cosignatures
    FOR EACH STATEMENT EXECUTE FUNCTION effectledger_evidence_append_only();

-- The W3C trace context an operation was admitted in, kept while tracing records (migration 17):
-- later spans for the operation link to it. Not evidence; identifiers only.
CREATE TABLE operation_traces (
    tenant_id    TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    traceparent  TEXT NOT NULL CHECK (length(traceparent) = 55),
    PRIMARY KEY (tenant_id, operation_id)
);
