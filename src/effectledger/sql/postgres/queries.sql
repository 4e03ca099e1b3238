-- Named queries for the PostgreSQL store: the same names, parameters and meaning as the SQLite
-- file. Each block starts with "-- name: <name>" and holds one statement with %(name)s
-- parameters for psycopg. Python never builds SQL; it runs these by name. Transactions run under
-- READ COMMITTED: every statement sees the latest committed rows, and the ledger's updates are
-- guarded by the operation's version.

-- name: operation_insert
INSERT INTO operations (
    tenant_id, operation_id, requester_id, revision, action, contract_version, command_json,
    fingerprint, admission_reference, destination_account, destination_endpoint, idempotency_key,
    state, version, created_us, updated_us, last_event_hash
) VALUES (
    %(tenant_id)s, %(operation_id)s, %(requester_id)s, %(revision)s, %(action)s,
    %(contract_version)s, %(command_json)s, %(fingerprint)s, %(admission_reference)s,
    %(destination_account)s, %(destination_endpoint)s, %(idempotency_key)s, 'READY', 1,
    %(now_us)s, %(now_us)s, %(event_hash)s
)
ON CONFLICT (tenant_id, operation_id) DO NOTHING;

-- name: operation_get
SELECT * FROM operations WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s;

-- name: operation_lock
-- The row a claim is about to change, locked: a concurrent claim waits here, then sees the
-- winner's committed state instead of failing its version check.
SELECT * FROM operations
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
FOR UPDATE;

-- name: operation_settle
-- Waits until any transaction that changed the operation (a claim whose COMMIT was not
-- acknowledged) has committed or rolled back; the next statement sees the outcome.
SELECT 1 AS present FROM operations
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
FOR SHARE;

-- name: operation_status
SELECT state, provider_reference, active_attempt_id, requester_id
FROM operations WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s;

-- name: operation_update
UPDATE operations SET
    state = %(state)s,
    active_attempt_id = %(active_attempt_id)s,
    provider_reference = %(provider_reference)s,
    inconclusive_lookups = %(inconclusive_lookups)s,
    retries_authorized = %(retries_authorized)s,
    review_owner = %(review_owner)s,
    review_deadline_us = %(review_deadline_us)s,
    version = %(new_version)s,
    last_event_hash = %(event_hash)s,
    updated_us = %(now_us)s
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s AND version = %(version)s;

-- name: operations_list
SELECT * FROM operations WHERE tenant_id = %(tenant_id)s
ORDER BY created_us DESC, operation_id LIMIT %(limit)s;

-- name: operations_ready
SELECT tenant_id, operation_id, requester_id FROM operations
WHERE state = 'READY' ORDER BY created_us LIMIT %(limit)s;

-- name: operations_ready_lock
-- The oldest READY operation of one destination after a position in the queue that no
-- other executor holds, locked for a claim in this transaction.
SELECT * FROM operations
WHERE state = 'READY'
  AND destination_account = %(destination_account)s
  AND destination_endpoint = %(destination_endpoint)s
  AND (created_us, tenant_id, operation_id)
      > (%(after_us)s, %(after_tenant)s, %(after_operation)s)
ORDER BY created_us, tenant_id, operation_id
LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: attempt_insert
INSERT INTO attempts (
    tenant_id, operation_id, attempt_id, executor_id, destination_account, destination_endpoint,
    idempotency_key, prepared_us, recover_after_us
) VALUES (
    %(tenant_id)s, %(operation_id)s, %(attempt_id)s, %(executor_id)s, %(destination_account)s,
    %(destination_endpoint)s, %(idempotency_key)s, %(now_us)s, %(recover_after_us)s
);

-- name: attempt_get
SELECT * FROM attempts
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND attempt_id = %(attempt_id)s;

-- name: attempt_exists
SELECT 1 AS present FROM attempts
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND attempt_id = %(attempt_id)s;

-- name: attempts_for_operation
SELECT * FROM attempts WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
ORDER BY prepared_us, attempt_id;

-- name: attempt_observe
UPDATE attempts SET
    observation = %(observation)s,
    provider_reference = %(provider_reference)s,
    evidence_reference = %(evidence_reference)s
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND attempt_id = %(attempt_id)s;

-- name: attempt_reschedule
UPDATE attempts SET recover_after_us = %(recover_after_us)s
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND attempt_id = %(attempt_id)s;

-- name: attempts_due
SELECT a.tenant_id, a.operation_id, a.attempt_id
FROM attempts AS a
JOIN operations AS o
  ON o.tenant_id = a.tenant_id AND o.operation_id = a.operation_id
 AND o.active_attempt_id = a.attempt_id
WHERE a.recover_after_us <= %(now_us)s AND o.state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')
ORDER BY a.recover_after_us
LIMIT %(limit)s;

-- name: attempts_due_lock
-- Due attempts that no other recovery worker holds. Both rows are locked, so a row that another
-- worker reserved just before is re-checked on its new recover_after and left out.
SELECT a.tenant_id, a.operation_id, a.attempt_id
FROM attempts AS a
JOIN operations AS o
  ON o.tenant_id = a.tenant_id AND o.operation_id = a.operation_id
 AND o.active_attempt_id = a.attempt_id
WHERE a.recover_after_us <= %(now_us)s AND o.state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')
ORDER BY a.recover_after_us
LIMIT %(limit)s
FOR UPDATE OF a, o SKIP LOCKED;

-- name: event_insert
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash
) VALUES (
    %(event_id)s, %(tenant_id)s, %(operation_id)s, %(attempt_id)s, %(sequence)s, %(actor)s,
    %(event_type)s, %(recorded_us)s, %(evidence_reference)s, %(details_json)s,
    %(observation_id)s, %(prev_hash)s, %(event_hash)s
);

-- name: events_for_operation
SELECT * FROM audit_events WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
ORDER BY sequence;

-- name: event_by_observation
SELECT event_id FROM audit_events
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND observation_id = %(observation_id)s;
