-- effectledger PostgreSQL schema, migration 3: evidence (Merkle log, signed checkpoints, export
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
    leaf_hash TEXT   NOT NULL CHECK (length(leaf_hash) = 64),
    sealed_us BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, position)
);

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
