-- Named statements of the simulated receiver (same "-- name:" format as the ledger's).
-- PRAGMA takes no bound parameters: {level} is filled by effectledger.sql.fill.

-- name: journal_mode_wal
PRAGMA journal_mode = WAL;

-- name: synchronous
PRAGMA synchronous = {level};

-- name: begin_write
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: check_tables
-- Opening an existing file: both tables must be there.
SELECT (SELECT count(*) FROM effects) AS effects, (SELECT count(*) FROM counters) AS counters;

-- name: counter_add
UPDATE counters SET value = value + 1 WHERE name = :name;

-- name: effect_by_key
SELECT fingerprint, provider_reference, digest FROM effects WHERE idempotency_key = :key;

-- name: effect_insert
INSERT INTO effects (
    idempotency_key, fingerprint, command_json, provider_reference, created_ns, operation_id,
    proposal_id, approval_id, digest, amount, unit
) VALUES (
    :key, :fingerprint, :command_json, :provider_reference, :created_ns, :operation_id,
    :proposal_id, :approval_id, :digest, :amount, :unit
);

-- name: effect_reference
SELECT provider_reference FROM effects WHERE idempotency_key = :key;

-- name: counters_all
SELECT name, value FROM counters;

-- name: effects_count
SELECT count(*) FROM effects;

-- name: effect_record
SELECT provider_reference, command_json, operation_id, proposal_id, approval_id, digest, amount,
       unit
FROM effects WHERE idempotency_key = :key;

-- name: effects_for_key
SELECT count(*) FROM effects WHERE idempotency_key = :key;
