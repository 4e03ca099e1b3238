-- effectledger PostgreSQL schema, migration 1: operations, attempts, the audit trail.
-- The same tables, keys and constraints as the SQLite schema. Times are microseconds since the
-- Unix epoch in BIGINT columns; every key starts with the tenant.

CREATE TABLE operations (
    tenant_id            TEXT    NOT NULL,
    operation_id         TEXT    NOT NULL,
    requester_id         TEXT    NOT NULL,
    revision             TEXT    NOT NULL,
    action               TEXT    NOT NULL,
    contract_version     TEXT    NOT NULL,
    command_json         TEXT    NOT NULL,
    fingerprint          TEXT    NOT NULL,
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
    last_event_hash      TEXT    NOT NULL,
    proposal_id          TEXT,
    approval_id          TEXT,
    pool                 TEXT,
    units                BIGINT  NOT NULL DEFAULT 0 CHECK (units >= 0),
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
    prev_hash          TEXT    NOT NULL,
    event_hash         TEXT    NOT NULL,
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
