-- Named queries of the reference receiver (same "-- name:" format as the ledger's).

-- name: effect_get
SELECT * FROM effects WHERE collection = :collection AND idempotency_key = :key;

-- name: effect_insert
INSERT INTO effects (
    collection, idempotency_key, body_sha256, body_json, provider_reference, state, created_ns
) VALUES (:collection, :key, :body_sha256, :body_json, :provider_reference, :state, :now_ns);

-- name: effect_performed
UPDATE effects SET state = 'performed' WHERE collection = :collection AND idempotency_key = :key;

-- name: counter_add
UPDATE counters SET value = value + 1 WHERE name = :name;

-- name: counters_all
SELECT name, value FROM counters;

-- name: effects_count
SELECT count(*) AS effects FROM effects;

-- name: effects_for_key
SELECT count(*) AS effects FROM effects WHERE idempotency_key = :key;

-- The store's own statements.

-- name: journal_mode_wal
PRAGMA journal_mode = WAL;

-- name: synchronous_normal
-- Surviving a killed process is what the fault tests need, not a power cut.
PRAGMA synchronous = NORMAL;

-- name: begin_write
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;
