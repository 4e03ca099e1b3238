-- effectledger SQLite schema, migration 3: evidence (Merkle log, signed checkpoints, export cursors).
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
    leaf_hash TEXT    NOT NULL CHECK (length(leaf_hash) = 64),
    sealed_us INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, position)
) WITHOUT ROWID;

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
