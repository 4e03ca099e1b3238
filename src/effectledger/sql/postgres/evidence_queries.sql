-- Named queries of the evidence layer for PostgreSQL (merged into queries.sql).
-- Each block starts with "-- name: <name>" and holds one statement with :named parameters.

-- Evidence: Merkle log, checkpoints, export

-- name: event_get
SELECT * FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND event_id = :event_id;

-- name: event_at_sequence
SELECT * FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND sequence = :sequence;

-- name: log_head_ensure
INSERT INTO log_heads (tenant_id, size, root_hash, frontier, checkpoint_seq, updated_us)
VALUES (:tenant_id, 0, :root_hash, '', 0, :now_us)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: log_head_lock
-- Held until the seal transaction ends: concurrent sealers of one tenant queue here.
SELECT * FROM log_heads WHERE tenant_id = :tenant_id FOR UPDATE;

-- name: log_head_get
SELECT * FROM log_heads WHERE tenant_id = :tenant_id;

-- name: log_head_advance
UPDATE log_heads SET
    size = :size,
    root_hash = :root_hash,
    frontier = :frontier,
    checkpoint_seq = :checkpoint_seq,
    updated_us = :now_us
WHERE tenant_id = :tenant_id AND size = :old_size AND checkpoint_seq = :old_checkpoint_seq;

-- name: log_tenants
SELECT tenant_id FROM log_heads ORDER BY tenant_id;

-- name: log_pending_tenants
SELECT DISTINCT tenant_id FROM log_pending ORDER BY tenant_id;

-- name: log_pending_batch
SELECT p.pending_id, p.event_id AS pending_event_id, p.recorded_us AS pending_recorded_us,
       e.event_id, e.tenant_id, e.operation_id, e.attempt_id, e.sequence, e.actor,
       e.event_type, e.recorded_us, e.evidence_reference, e.details_json, e.observation_id,
       e.prev_hash, e.event_hash
FROM log_pending AS p
LEFT JOIN audit_events AS e ON e.event_id = p.event_id
WHERE p.tenant_id = :tenant_id
ORDER BY p.pending_id
LIMIT :limit;

-- name: log_pending_delete
DELETE FROM log_pending WHERE pending_id = :pending_id;

-- name: log_pending_oldest
SELECT count(*) AS pending, min(recorded_us) AS oldest_us
FROM log_pending WHERE tenant_id = :tenant_id;

-- name: log_entry_insert
INSERT INTO log_entries (tenant_id, position, event_id, leaf_hash, sealed_us)
VALUES (:tenant_id, :position, :event_id, :leaf_hash, :now_us);

-- name: log_entries_from
SELECT l.position, l.event_id AS entry_event_id, l.leaf_hash,
       e.event_id, e.tenant_id, e.operation_id, e.attempt_id, e.sequence, e.actor,
       e.event_type, e.recorded_us, e.evidence_reference, e.details_json, e.observation_id,
       e.prev_hash, e.event_hash
FROM log_entries AS l
LEFT JOIN audit_events AS e ON e.event_id = l.event_id
WHERE l.tenant_id = :tenant_id AND l.position >= :position
ORDER BY l.position
LIMIT :limit;

-- name: log_entry_for_event
SELECT l.position, l.event_id AS entry_event_id, l.leaf_hash,
       e.event_id, e.tenant_id, e.operation_id, e.attempt_id, e.sequence, e.actor,
       e.event_type, e.recorded_us, e.evidence_reference, e.details_json, e.observation_id,
       e.prev_hash, e.event_hash
FROM log_entries AS l
JOIN audit_events AS e ON e.event_id = l.event_id
WHERE l.tenant_id = :tenant_id AND l.event_id = :event_id;

-- name: log_leaves_from
SELECT position, leaf_hash FROM log_entries
WHERE tenant_id = :tenant_id AND position >= :position AND position < :size
ORDER BY position
LIMIT :limit;

-- name: log_checkpoint_insert
INSERT INTO log_checkpoints (
    tenant_id, seq, size, root_hash, previous_size, consistency_proof, note, signed_us
) VALUES (
    :tenant_id, :seq, :size, :root_hash, :previous_size, :consistency_proof, :note, :now_us
);

-- name: log_checkpoint_latest
SELECT * FROM log_checkpoints WHERE tenant_id = :tenant_id ORDER BY seq DESC LIMIT 1;

-- name: log_checkpoints_after
SELECT * FROM log_checkpoints WHERE tenant_id = :tenant_id AND seq > :seq
ORDER BY seq
LIMIT :limit;

-- name: export_cursor_get
SELECT * FROM export_cursors WHERE exporter_id = :exporter_id AND tenant_id = :tenant_id;

-- name: export_cursor_insert
INSERT INTO export_cursors (
    exporter_id, tenant_id, position, checkpoint_seq, file_offset, updated_us
) VALUES (:exporter_id, :tenant_id, 0, 0, :file_offset, :now_us);

-- name: export_cursor_advance
UPDATE export_cursors SET
    position = :position,
    checkpoint_seq = :checkpoint_seq,
    file_offset = :file_offset,
    updated_us = :now_us
WHERE exporter_id = :exporter_id AND tenant_id = :tenant_id AND file_offset = :old_offset;
