-- Hash columns hold the hash's bytes instead of its hex text: 32 bytes, or 33 for a version 2
-- hash (the byte 0x02 first), where the text took 64 or 67 (effectledger.store.hashes). Their
-- declared type DIGEST BLOB has BLOB affinity, and the store reads the columns of that type back
-- as the same hex strings, so every hash, leaf, checkpoint and bundle stays byte for byte as it
-- was. Text the ledger did not write (a hand edit) is kept as it is.
--
-- SQLite changes a declared type by rebuilding the table: each table is copied aside, dropped
-- and created again under its own name, its rows put back with their hashes packed by the
-- store's function effectledger_pack_hash (in row order), then its indexes and triggers are
-- created again (after the rows: the triggers would count capacity or queue events again).
-- Foreign keys are checked once at COMMIT, when every parent row is back. approvals_by_kind
-- comes back holding the pre-authorizations only, the one kind a query counts.
PRAGMA defer_foreign_keys = ON;
-- No query reads attempts through attempts_due (recovery starts from operations_unresolved).
DROP INDEX IF EXISTS attempts_due;
-- Foreign keys are checked for each row dropped and put back: approval_consumptions is read by
-- operation for that while the migration runs (without an index, each row would read it whole).
CREATE INDEX approval_consumptions_v15 ON approval_consumptions (tenant_id, operation_id);
CREATE TEMP TABLE operations_v14 AS SELECT * FROM main.operations;
CREATE TEMP TABLE audit_events_v14 AS SELECT * FROM main.audit_events ORDER BY rowid;
CREATE TEMP TABLE proposals_v14 AS SELECT * FROM main.proposals;
CREATE TEMP TABLE approvals_v14 AS SELECT * FROM main.approvals;
CREATE TEMP TABLE log_entries_v14 AS SELECT * FROM main.log_entries;
DROP TABLE main.log_entries;
DROP TABLE main.approvals;
DROP TABLE main.proposals;
DROP TABLE main.audit_events;
DROP TABLE main.operations;

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
INSERT INTO main.operations (
    tenant_id, operation_id, requester_id, revision, action, contract_version, command_json,
    fingerprint, admission_reference, destination_account, destination_endpoint,
    idempotency_key, state, version, active_attempt_id, provider_reference,
    inconclusive_lookups, retries_authorized, review_owner, review_deadline_us, created_us,
    updated_us, last_event_hash, proposal_id, approval_id, pool, units, event_sequence
)
SELECT
    tenant_id, operation_id, requester_id, revision, action, contract_version, command_json,
    effectledger_pack_hash(fingerprint), admission_reference, destination_account,
    destination_endpoint, idempotency_key, state, version, active_attempt_id,
    provider_reference, inconclusive_lookups, retries_authorized, review_owner,
    review_deadline_us, created_us, updated_us, effectledger_pack_hash(last_event_hash),
    proposal_id, approval_id, pool, units, event_sequence
FROM temp.operations_v14;
DROP TABLE temp.operations_v14;

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
INSERT INTO main.audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
)
SELECT
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, effectledger_pack_hash(prev_hash),
    effectledger_pack_hash(event_hash), trail_tag
FROM temp.audit_events_v14 ORDER BY rowid;
DROP TABLE temp.audit_events_v14;

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
    PRIMARY KEY (tenant_id, proposal_id),
    UNIQUE (tenant_id, operation_id)
) WITHOUT ROWID;
INSERT INTO main.proposals (
    tenant_id, proposal_id, operation_id, proposer_id, action, contract_version, target,
    resource_version, arguments_json, units, pool, destination_account, destination_endpoint,
    policy_version, expires_us, correlation_json, digest, created_us
)
SELECT
    tenant_id, proposal_id, operation_id, proposer_id, action, contract_version, target,
    resource_version, arguments_json, units, pool, destination_account, destination_endpoint,
    policy_version, expires_us, correlation_json, effectledger_pack_hash(digest), created_us
FROM temp.proposals_v14;
DROP TABLE temp.proposals_v14;

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
INSERT INTO main.approvals (
    tenant_id, approval_id, proposal_id, digest, decision, kind, approver_id, policy_version,
    reason, decided_us, expires_us
)
SELECT
    tenant_id, approval_id, proposal_id, effectledger_pack_hash(digest), decision, kind,
    approver_id, policy_version, reason, decided_us, expires_us
FROM temp.approvals_v14;
DROP TABLE temp.approvals_v14;

CREATE TABLE log_entries (
    tenant_id TEXT    NOT NULL,
    position  INTEGER NOT NULL CHECK (position >= 0),
    event_id  TEXT    NOT NULL UNIQUE REFERENCES audit_events (event_id),
    leaf_hash DIGEST BLOB NOT NULL CHECK (length(leaf_hash) = 32
                               OR typeof(leaf_hash) = 'text' AND length(leaf_hash) = 64),
    sealed_us INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, position)
) WITHOUT ROWID;
INSERT INTO main.log_entries (
    tenant_id, position, event_id, leaf_hash, sealed_us
)
SELECT
    tenant_id, position, event_id, effectledger_pack_hash(leaf_hash), sealed_us
FROM temp.log_entries_v14;
DROP TABLE temp.log_entries_v14;

CREATE INDEX operations_by_reference
    ON operations (tenant_id, destination_account, destination_endpoint, provider_reference);

CREATE INDEX operations_ready
    ON operations (destination_account, destination_endpoint, created_us, tenant_id, operation_id)
    WHERE state = 'READY';

CREATE INDEX operations_unresolved
    ON operations (tenant_id, operation_id)
    WHERE state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN');

CREATE INDEX operations_in_review
    ON operations (tenant_id, review_deadline_us, operation_id)
    WHERE state = 'MANUAL_REVIEW';

CREATE UNIQUE INDEX audit_events_observation
    ON audit_events (tenant_id, operation_id, observation_id)
    WHERE observation_id IS NOT NULL;

CREATE INDEX proposals_by_expiry ON proposals (tenant_id, expires_us, proposal_id);

CREATE INDEX proposals_by_age ON proposals (tenant_id, created_us, proposal_id);

CREATE INDEX approvals_by_kind ON approvals (tenant_id, kind, decided_us)
    WHERE kind = 'preauthorization';

CREATE INDEX approvals_by_proposal ON approvals (tenant_id, proposal_id, decided_us);

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

CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only');
END;

CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only');
END;

CREATE TRIGGER audit_events_log_pending AFTER INSERT ON audit_events
BEGIN
    INSERT INTO log_pending (tenant_id, event_id, recorded_us)
    VALUES (NEW.tenant_id, NEW.event_id, NEW.recorded_us);
END;

CREATE TRIGGER proposals_no_update BEFORE UPDATE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are immutable');
END;

CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are immutable');
END;

CREATE TRIGGER approvals_no_update BEFORE UPDATE ON approvals
BEGIN
    SELECT RAISE(ABORT, 'approvals are immutable');
END;

CREATE TRIGGER approvals_no_delete BEFORE DELETE ON approvals
BEGIN
    SELECT RAISE(ABORT, 'approvals are immutable');
END;

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

CREATE TRIGGER log_entries_no_update BEFORE UPDATE ON log_entries
BEGIN
    SELECT RAISE(ABORT, 'log_entries is append-only');
END;

CREATE TRIGGER log_entries_no_delete BEFORE DELETE ON log_entries
BEGIN
    SELECT RAISE(ABORT, 'log_entries is append-only');
END;

DROP INDEX approval_consumptions_v15;
