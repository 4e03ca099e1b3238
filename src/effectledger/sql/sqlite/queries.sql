-- Named queries for the SQLite store. Each block starts with "-- name: <name>" and holds one
-- statement with :named parameters. Python never builds SQL; it runs these by name.

-- name: operation_insert
INSERT INTO operations (
    tenant_id, operation_id, requester_id, revision, action, contract_version, command_json,
    fingerprint, admission_reference, destination_account, destination_endpoint, idempotency_key,
    state, version, created_us, updated_us, last_event_hash
) VALUES (
    :tenant_id, :operation_id, :requester_id, :revision, :action, :contract_version, :command_json,
    :fingerprint, :admission_reference, :destination_account, :destination_endpoint,
    :idempotency_key, 'READY', 1, :now_us, :now_us, :event_hash
)
ON CONFLICT (tenant_id, operation_id) DO NOTHING;

-- name: operation_get
SELECT * FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_lock
-- The row a claim is about to change. BEGIN IMMEDIATE already holds the database's write lock.
SELECT * FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_settle
-- Run inside a write transaction: BEGIN IMMEDIATE waits until no other transaction is open.
SELECT 1 AS present FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_status
SELECT state, provider_reference, active_attempt_id, requester_id
FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_update
UPDATE operations SET
    state = :state,
    active_attempt_id = :active_attempt_id,
    provider_reference = :provider_reference,
    inconclusive_lookups = :inconclusive_lookups,
    retries_authorized = :retries_authorized,
    review_owner = :review_owner,
    review_deadline_us = :review_deadline_us,
    version = :new_version,
    last_event_hash = :event_hash,
    updated_us = :now_us
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND version = :version;

-- name: operations_list
SELECT * FROM operations WHERE tenant_id = :tenant_id
ORDER BY created_us DESC, operation_id LIMIT :limit;

-- name: operations_ready
SELECT tenant_id, operation_id, requester_id FROM operations
WHERE state = 'READY' ORDER BY created_us LIMIT :limit;

-- name: operations_ready_lock
-- The oldest READY operation of one destination after a position in the queue, for a claim
-- in this write transaction (BEGIN IMMEDIATE serializes executors).
SELECT * FROM operations
WHERE state = 'READY'
  AND destination_account = :destination_account
  AND destination_endpoint = :destination_endpoint
  AND (created_us, tenant_id, operation_id)
      > (:after_us, :after_tenant, :after_operation)
ORDER BY created_us, tenant_id, operation_id
LIMIT 1;

-- name: attempt_insert
INSERT INTO attempts (
    tenant_id, operation_id, attempt_id, executor_id, destination_account, destination_endpoint,
    idempotency_key, prepared_us, recover_after_us
) VALUES (
    :tenant_id, :operation_id, :attempt_id, :executor_id, :destination_account,
    :destination_endpoint, :idempotency_key, :now_us, :recover_after_us
);

-- name: attempt_get
SELECT * FROM attempts
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND attempt_id = :attempt_id;

-- name: attempt_exists
SELECT 1 AS present FROM attempts
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND attempt_id = :attempt_id;

-- name: attempts_for_operation
SELECT * FROM attempts WHERE tenant_id = :tenant_id AND operation_id = :operation_id
ORDER BY prepared_us, attempt_id;

-- name: attempt_observe
UPDATE attempts SET
    observation = :observation,
    provider_reference = :provider_reference,
    evidence_reference = :evidence_reference
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND attempt_id = :attempt_id;

-- name: attempt_reschedule
UPDATE attempts SET recover_after_us = :recover_after_us
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND attempt_id = :attempt_id;

-- name: attempts_due
-- CROSS JOIN makes SQLite start from the few unresolved operations (operations_unresolved)
-- instead of walking every attempt ever made through attempts_due.
SELECT a.tenant_id, a.operation_id, a.attempt_id
FROM operations AS o
CROSS JOIN attempts AS a
  ON a.tenant_id = o.tenant_id AND a.operation_id = o.operation_id
 AND a.attempt_id = o.active_attempt_id
WHERE a.recover_after_us <= :now_us AND o.state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')
ORDER BY a.recover_after_us
LIMIT :limit;

-- name: attempts_due_lock
-- attempts_due for a reservation in this write transaction (BEGIN IMMEDIATE serializes workers).
SELECT a.tenant_id, a.operation_id, a.attempt_id
FROM operations AS o
CROSS JOIN attempts AS a
  ON a.tenant_id = o.tenant_id AND a.operation_id = o.operation_id
 AND a.attempt_id = o.active_attempt_id
WHERE a.recover_after_us <= :now_us AND o.state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')
ORDER BY a.recover_after_us
LIMIT :limit;

-- name: event_insert
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash
) VALUES (
    :event_id, :tenant_id, :operation_id, :attempt_id, :sequence, :actor, :event_type,
    :recorded_us, :evidence_reference, :details_json, :observation_id, :prev_hash, :event_hash
);

-- name: events_for_operation
SELECT * FROM audit_events WHERE tenant_id = :tenant_id AND operation_id = :operation_id
ORDER BY sequence;

-- name: event_by_observation
SELECT event_id FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND observation_id = :observation_id;
