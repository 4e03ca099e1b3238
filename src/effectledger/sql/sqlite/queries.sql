-- Named queries for the SQLite store. Each block starts with "-- name: <name>" and holds one
-- statement with :named parameters. Python never builds SQL; it runs these by name.

-- name: advisory_lock
-- Serializes the transactions that read a total or a trail and then write on it (one operation's
-- trail, a pool's capacity, an action's pre-authorization budget). BEGIN IMMEDIATE already holds
-- the database's only write lock, so there is nothing to run: the store skips a query that holds
-- no statement.

-- name: schema_version
-- The newest migration applied; opening an existing ledger without migrating checks it.
SELECT max(version) AS version FROM schema_migrations;

-- name: operation_insert
-- An admission's operation and its OperationAdmitted event. Two statements run in order in the
-- caller's transaction; the answer is the first one's: a row if it inserted the operation (whose
-- values the caller knows: nothing is read back), or no row if the operation id is taken (then
-- read the one that is), and then the event is not appended either.
INSERT INTO operations (
    tenant_id, operation_id, requester_id, revision, action, contract_version, command_json,
    fingerprint, admission_reference, destination_account, destination_endpoint, idempotency_key,
    state, version, event_sequence, created_us, updated_us, last_event_hash, proposal_id,
    approval_id, pool, units
) VALUES (
    :tenant_id, :operation_id, :requester_id, :revision, :action, :contract_version, :command_json,
    :fingerprint, :admission_reference, :destination_account, :destination_endpoint,
    :idempotency_key, 'READY', 1, :event_sequence, :now_us, :now_us, :event_hash, :proposal_id,
    :approval_id, :pool, :units
)
ON CONFLICT (tenant_id, operation_id) DO NOTHING
RETURNING 1 AS inserted;
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
)
SELECT :event_id, :tenant_id, :operation_id, :attempt_id, :sequence, :actor, :event_type,
       :recorded_us, :evidence_reference, :details_json, :observation_id, :prev_hash, :event_hash, :trail_tag
WHERE changes() = 1;

-- name: operation_get
SELECT * FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_with_attempt
-- The operation, whether it has the named attempt, and another operation of the same
-- destination that already holds the provider reference being recorded (NULL: none, or no
-- reference), in one read (for record).
SELECT o.*, EXISTS (
    SELECT 1 FROM attempts AS a
    WHERE a.tenant_id = o.tenant_id AND a.operation_id = o.operation_id
      AND a.attempt_id = :attempt_id
) AS attempt_present, (
    SELECT h.operation_id FROM operations AS h
    WHERE h.tenant_id = o.tenant_id AND h.destination_account = o.destination_account
      AND h.destination_endpoint = o.destination_endpoint
      AND h.provider_reference = :provider_reference AND h.operation_id <> o.operation_id
    LIMIT 1
) AS reference_holder
FROM operations AS o
WHERE o.tenant_id = :tenant_id AND o.operation_id = :operation_id;

-- name: operation_lock
-- The row a claim is about to change. BEGIN IMMEDIATE already holds the database's write lock.
SELECT * FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_settle
-- Run inside a write transaction: BEGIN IMMEDIATE waits until no other transaction is open.
SELECT 1 AS present FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_status
SELECT state, provider_reference, active_attempt_id, requester_id
FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_dispatch
-- An executor's first read: the recorded state for a repeated call, and for a READY
-- operation every column its claim checks and writes from, so the claim need not read again.
SELECT tenant_id, operation_id, requester_id, state, version, event_sequence, last_event_hash,
       active_attempt_id, proposal_id, approval_id, pool, units,
       provider_reference, inconclusive_lookups, retries_authorized, review_owner,
       review_deadline_us, command_json, fingerprint, admission_reference,
       destination_account, destination_endpoint, idempotency_key
FROM operations WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: operation_step
-- One step of an operation: its row moves (guarded by its version and the head of its trail)
-- and the step's event is appended, only if the row moved. Two statements run in order in the
-- caller's transaction; the count is the last one's: 1 when both happened, 0 when the guard
-- failed and nothing was written. changes() is the UPDATE's own count (triggers excluded).
UPDATE operations SET
    state = :state,
    active_attempt_id = :active_attempt_id,
    provider_reference = :provider_reference,
    inconclusive_lookups = :inconclusive_lookups,
    retries_authorized = :retries_authorized,
    review_owner = :review_owner,
    review_deadline_us = :review_deadline_us,
    version = :new_version,
    event_sequence = :new_sequence,
    last_event_hash = :event_hash,
    updated_us = :now_us
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND version = :version
  AND event_sequence = :sequence;
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
)
SELECT :event_id, :tenant_id, :operation_id, :attempt_id, :new_sequence, :actor, :event_type,
       :recorded_us, :evidence_reference, :details_json, :observation_id, :prev_hash, :event_hash, :trail_tag
WHERE changes() = 1;

-- name: operation_step_observed
-- operation_step after storing the active attempt's observation: what a recorded reply that
-- owns the operation's state writes. The attempt is updated even when the row's guard fails; the
-- caller then steps again after the moved head or rolls the whole transaction back.
UPDATE attempts SET
    observation = :observation,
    provider_reference = :observed_reference,
    evidence_reference = :evidence_reference
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND attempt_id = :attempt_id;
UPDATE operations SET
    state = :state,
    active_attempt_id = :active_attempt_id,
    provider_reference = :provider_reference,
    inconclusive_lookups = :inconclusive_lookups,
    retries_authorized = :retries_authorized,
    review_owner = :review_owner,
    review_deadline_us = :review_deadline_us,
    version = :new_version,
    event_sequence = :new_sequence,
    last_event_hash = :event_hash,
    updated_us = :now_us
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND version = :version
  AND event_sequence = :sequence;
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
)
SELECT :event_id, :tenant_id, :operation_id, :attempt_id, :new_sequence, :actor, :event_type,
       :recorded_us, :evidence_reference, :details_json, :observation_id, :prev_hash, :event_hash, :trail_tag
WHERE changes() = 1;

-- name: operations_list
SELECT * FROM operations WHERE tenant_id = :tenant_id
ORDER BY created_us DESC, operation_id LIMIT :limit;

-- name: operations_by_state
-- The tenant's operations counted by state (an operator's summary, not a hot path).
SELECT state, count(*) AS operations FROM operations WHERE tenant_id = :tenant_id GROUP BY state;

-- name: operations_uncertain_oldest
-- How many of the tenant's operations are uncertain, and the oldest last change among them.
SELECT count(*) AS uncertain, min(updated_us) AS oldest_us FROM operations
WHERE tenant_id = :tenant_id AND state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW');

-- name: operations_by_tenant_state
-- Every tenant's operations counted by state: the gauges' one read per collection.
SELECT tenant_id, state, count(*) AS operations FROM operations GROUP BY tenant_id, state;

-- name: operations_uncertain_oldest_by_tenant
-- Per tenant, how many operations are uncertain and the oldest last change among them (gauges).
SELECT tenant_id, count(*) AS uncertain, min(updated_us) AS oldest_us FROM operations
WHERE state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW') GROUP BY tenant_id;

-- name: operations_in_review
-- The manual-review queue: the tenant's operations in MANUAL_REVIEW, soonest deadline first.
SELECT * FROM operations
WHERE tenant_id = :tenant_id AND state = 'MANUAL_REVIEW'
ORDER BY review_deadline_us, operation_id LIMIT :limit;

-- name: operations_ready
-- READY operations of one destination, oldest first (for executors that recheck before claiming).
SELECT tenant_id, operation_id, requester_id FROM operations
WHERE state = 'READY'
  AND destination_account = :destination_account
  AND destination_endpoint = :destination_endpoint
ORDER BY created_us, tenant_id, operation_id
LIMIT :limit;

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

-- name: operations_ready_batch
-- Up to :limit READY operations of one destination after a position in the queue, oldest
-- first, with every column their claims check: what a batch claimer rechecks before its claim
-- transaction (bounded by the limit and the partial index of READY operations).
SELECT * FROM operations
WHERE state = 'READY'
  AND destination_account = :destination_account
  AND destination_endpoint = :destination_endpoint
  AND (created_us, tenant_id, operation_id)
      > (:after_us, :after_tenant, :after_operation)
ORDER BY created_us, tenant_id, operation_id
LIMIT :limit;

-- name: operations_lock_ready_batch
-- The operations of a batch claim (:keys, a JSON array of [tenant_id, operation_id]) that are
-- still READY, in queue order (BEGIN IMMEDIATE serializes claimers).
SELECT * FROM operations
WHERE (tenant_id, operation_id) IN (
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:keys))
  AND state = 'READY'
ORDER BY created_us, tenant_id, operation_id;

-- name: events_for_operations
-- events_for_operation for each operation of a batch (:keys, a JSON array of [tenant_id,
-- operation_id]) in one read: the same columns, by operation, each trail in sequence order.
SELECT e.*, l.leaf_hash AS sealed_leaf,
       (SELECT max(s.sequence) FROM log_entries AS s
        WHERE s.tenant_id = e.tenant_id AND s.operation_id = e.operation_id) AS sealed_through
FROM audit_events AS e
LEFT JOIN log_entries AS l
  ON l.tenant_id = e.tenant_id AND l.operation_id = e.operation_id AND l.sequence = e.sequence
WHERE (e.tenant_id, e.operation_id) IN (
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:keys))
ORDER BY e.tenant_id, e.operation_id, e.sequence;

-- name: proposals_for_batch
-- proposal_get for each proposal of a batch (:keys, a JSON array of [tenant_id, proposal_id]).
SELECT * FROM proposals
WHERE (tenant_id, proposal_id) IN (
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:keys));

-- name: approvals_for_batch
-- approval_get for each approval of a batch (:keys, a JSON array of [tenant_id, approval_id]).
SELECT * FROM approvals
WHERE (tenant_id, approval_id) IN (
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:keys));

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

-- name: attempts_for_operation
SELECT * FROM attempts WHERE tenant_id = :tenant_id AND operation_id = :operation_id
ORDER BY prepared_us, attempt_id;

-- name: attempt_reschedule
UPDATE attempts SET recover_after_us = :recover_after_us
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND attempt_id = :attempt_id;

-- name: attempts_due_lock
-- Due attempts, for a reservation in this write transaction (BEGIN IMMEDIATE serializes workers).
-- CROSS JOIN makes SQLite start from the few unresolved operations (operations_unresolved)
-- instead of walking every attempt ever made through the attempts_due index.
SELECT a.tenant_id, a.operation_id, a.attempt_id
FROM operations AS o
CROSS JOIN attempts AS a
  ON a.tenant_id = o.tenant_id AND a.operation_id = o.operation_id
 AND a.attempt_id = o.active_attempt_id
WHERE a.recover_after_us <= :now_us AND o.state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')
  AND a.destination_account = :destination_account
  AND a.destination_endpoint = :destination_endpoint
ORDER BY a.recover_after_us
LIMIT :limit;

-- name: event_insert
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
) VALUES (
    :event_id, :tenant_id, :operation_id, :attempt_id, :sequence, :actor, :event_type,
    :recorded_us, :evidence_reference, :details_json, :observation_id, :prev_hash, :event_hash, :trail_tag
);

-- name: events_for_operation
-- An operation's events in sequence order, each with the leaf the log sealed at its position
-- (sealed_leaf, NULL while it waits for the sealer): a sealed event is compared with its leaf, not
-- trusted, and an event written at a position sealed for another is not the sealed one. Every
-- row carries sealed_through, the highest position of the operation the log sealed: a trail
-- shorter than that lost sealed events.
SELECT e.*, l.leaf_hash AS sealed_leaf,
       (SELECT max(s.sequence) FROM log_entries AS s
        WHERE s.tenant_id = :tenant_id AND s.operation_id = :operation_id) AS sealed_through
FROM audit_events AS e
LEFT JOIN log_entries AS l
  ON l.tenant_id = e.tenant_id AND l.operation_id = e.operation_id AND l.sequence = e.sequence
WHERE e.tenant_id = :tenant_id AND e.operation_id = :operation_id
ORDER BY e.sequence;

-- name: event_head
SELECT sequence, event_hash FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id
ORDER BY sequence DESC LIMIT 1;

-- name: event_present
-- Whether the event a write computed was stored (read back after a lost COMMIT acknowledgement).
SELECT 1 AS present FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND event_hash = :event_hash;

-- name: event_by_observation
SELECT event_id FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND observation_id = :observation_id;

-- Authority: proposals, approvals, consumption, capacity.

-- name: proposal_insert
INSERT INTO proposals (
    tenant_id, proposal_id, operation_id, proposer_id, action, contract_version, target,
    resource_version, arguments_json, units, pool, destination_account, destination_endpoint,
    policy_version, expires_us, correlation_json, digest, created_us,
    stated_reason
) VALUES (
    :tenant_id, :proposal_id, :operation_id, :proposer_id, :action, :contract_version, :target,
    :resource_version, :arguments_json, :units, :pool, :destination_account,
    :destination_endpoint, :policy_version, :expires_us, :correlation_json, :digest, :created_us, :stated_reason
);

-- name: proposal_get
SELECT * FROM proposals WHERE tenant_id = :tenant_id AND proposal_id = :proposal_id;

-- name: proposal_for_operation
SELECT * FROM proposals WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: proposal_replay
-- A perform's first read: the proposal, the operation admitted for it, if any, and the head of
-- the operation's trail (``head``: the type of the event at its ``event_sequence`` if that
-- event's hash is the row's ``last_event_hash``, with ``+reference`` after it if its details
-- name the row's provider reference as the canonical text of one that needs no escape). A
-- repeated perform ends here, its recorded result checked against that head; a first one admits
-- the proposal read here. The digest comes as its stored bytes (``stored_digest``, not a hash
-- column's name, and no DIGEST type: a CAST): a replay never reads it, and an admission turns
-- it into its string once. Every other column is read as ``+column`` (SQLite's no-op unary
-- plus): an expression has no declared type, so the driver looks up no converter for it. What a
-- replay reads comes first: the driver finds a column by name by comparing it with each name
-- before it.
SELECT +o.state AS state, +o.requester_id AS requester_id,
       CASE WHEN h.event_hash = o.last_event_hash THEN h.event_type || CASE
           WHEN instr(h.details_json, '"provider_reference":"' || o.provider_reference || '"') > 0
           THEN '+reference' ELSE '' END END AS head,
       +o.provider_reference AS provider_reference, +p.operation_id AS operation_id,
       +o.active_attempt_id AS active_attempt_id,
       +p.tenant_id AS tenant_id, +p.proposal_id AS proposal_id,
       +p.proposer_id AS proposer_id, +p.action AS action, +p.contract_version AS contract_version,
       +p.target AS target, +p.resource_version AS resource_version,
       +p.arguments_json AS arguments_json, +p.units AS units, +p.pool AS pool,
       +p.destination_account AS destination_account,
       +p.destination_endpoint AS destination_endpoint, +p.policy_version AS policy_version,
       +p.expires_us AS expires_us, +p.correlation_json AS correlation_json,
       +p.created_us AS created_us, CAST(p.digest AS BLOB) AS stored_digest,
       +o.approval_id AS approval_id
FROM proposals AS p
LEFT JOIN operations AS o ON o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
LEFT JOIN audit_events AS h
  ON h.tenant_id = o.tenant_id AND h.operation_id = o.operation_id AND h.sequence = o.event_sequence
WHERE p.tenant_id = :tenant_id AND p.proposal_id = :proposal_id;

-- name: proposal_decision
-- For a perform that names no approval: whether the proposal's operation id is admitted, else
-- the decision recorded on its digest (the first denial, or the latest grant). The admission
-- checks whatever is chosen here again, under its locks.
SELECT EXISTS (
           SELECT 1 FROM operations AS o
           WHERE o.tenant_id = :tenant_id AND o.operation_id = :operation_id
       ) AS admitted,
       (
           SELECT d.approval_id FROM approvals AS d
           WHERE d.tenant_id = :tenant_id AND d.proposal_id = :proposal_id
             AND d.digest = :digest AND d.kind = 'approval' AND d.decision = 'denied'
           ORDER BY d.decided_us, d.approval_id LIMIT 1
       ) AS denied,
       (
           SELECT g.approval_id FROM approvals AS g
           WHERE g.tenant_id = :tenant_id AND g.proposal_id = :proposal_id
             AND g.digest = :digest AND g.kind = 'approval' AND g.decision = 'granted'
           ORDER BY g.decided_us DESC, g.approval_id DESC LIMIT 1
       ) AS granted;

-- name: proposal_denial
-- A denial closes its proposal: the first one recorded, if any.
SELECT approval_id, approver_id, reason FROM approvals
WHERE tenant_id = :tenant_id AND proposal_id = :proposal_id AND decision = 'denied'
ORDER BY decided_us, approval_id LIMIT 1;

-- name: proposal_grants
-- The granted, unconsumed approvals of a proposal (for policies that need several approvers).
SELECT a.* FROM approvals AS a
WHERE a.tenant_id = :tenant_id AND a.proposal_id = :proposal_id AND a.decision = 'granted'
  AND a.kind = 'approval'
  AND NOT EXISTS (
      SELECT 1 FROM approval_consumptions AS c
      WHERE c.tenant_id = a.tenant_id AND c.approval_id = a.approval_id
  )
ORDER BY a.decided_us, a.approval_id;

-- name: proposals_pending_expiring
-- The reviewer's queue, soonest-expiring first: the tenant's unexpired proposals that are not
-- admitted and not denied, after the cursor (expiry, id), each with the number of distinct
-- approvers whose live grant of its digest is recorded and whether the reviewer is one of them.
-- An empty filter matches every value. SQLite's planner, without statistics, would search a
-- tenant's approvals by their primary key: the proposal index is named.
SELECT p.*,
       (
           SELECT count(DISTINCT g.approver_id) FROM approvals AS g INDEXED BY approvals_by_proposal
           WHERE g.tenant_id = p.tenant_id AND g.proposal_id = p.proposal_id
             AND g.digest = p.digest AND g.kind = 'approval' AND g.decision = 'granted'
             AND g.expires_us > :now_us
       ) AS approvers,
       EXISTS (
           SELECT 1 FROM approvals AS m INDEXED BY approvals_by_proposal
           WHERE m.tenant_id = p.tenant_id AND m.proposal_id = p.proposal_id
             AND m.approver_id = :reviewer_id AND m.decision = 'granted'
             AND m.expires_us > :now_us
       ) AS reviewer_approved
FROM proposals AS p
WHERE p.tenant_id = :tenant_id AND p.expires_us > :now_us AND p.expires_us < :expiring_before
  AND (p.expires_us, p.proposal_id) > (:after_us, :after_id)
  AND (:action = '' OR p.action = :action)
  AND (:pool = '' OR p.pool = :pool)
  AND (:proposer_id = '' OR p.proposer_id = :proposer_id)
  AND NOT EXISTS (
      SELECT 1 FROM operations AS o
      WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
  )
  AND NOT EXISTS (
      SELECT 1 FROM approvals AS d INDEXED BY approvals_by_proposal
      WHERE d.tenant_id = p.tenant_id AND d.proposal_id = p.proposal_id AND d.decision = 'denied'
  )
ORDER BY p.expires_us, p.proposal_id
LIMIT :limit;

-- name: proposals_pending_newest
-- The reviewer's queue, newest first: as proposals_pending_expiring, walking back from the
-- cursor (creation time, id). The cursors are row values: SQLite walks the index from them
-- and stops after a page, where an OR of the two columns made it read every live proposal.
SELECT p.*,
       (
           SELECT count(DISTINCT g.approver_id) FROM approvals AS g INDEXED BY approvals_by_proposal
           WHERE g.tenant_id = p.tenant_id AND g.proposal_id = p.proposal_id
             AND g.digest = p.digest AND g.kind = 'approval' AND g.decision = 'granted'
             AND g.expires_us > :now_us
       ) AS approvers,
       EXISTS (
           SELECT 1 FROM approvals AS m INDEXED BY approvals_by_proposal
           WHERE m.tenant_id = p.tenant_id AND m.proposal_id = p.proposal_id
             AND m.approver_id = :reviewer_id AND m.decision = 'granted'
             AND m.expires_us > :now_us
       ) AS reviewer_approved
FROM proposals AS p
WHERE p.tenant_id = :tenant_id
  AND (p.created_us, p.proposal_id) < (:after_us, :after_id)
  AND p.expires_us > :now_us AND p.expires_us < :expiring_before
  AND (:action = '' OR p.action = :action)
  AND (:pool = '' OR p.pool = :pool)
  AND (:proposer_id = '' OR p.proposer_id = :proposer_id)
  AND NOT EXISTS (
      SELECT 1 FROM operations AS o
      WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
  )
  AND NOT EXISTS (
      SELECT 1 FROM approvals AS d INDEXED BY approvals_by_proposal
      WHERE d.tenant_id = p.tenant_id AND d.proposal_id = p.proposal_id AND d.decision = 'denied'
  )
ORDER BY p.created_us DESC, p.proposal_id DESC
LIMIT :limit;

-- name: proposal_review
-- Where one proposal stands for a reviewer: admitted, its first denial (who and why), the
-- distinct approvers with a live grant of its digest, and whether the reviewer is one of them.
SELECT EXISTS (
           SELECT 1 FROM operations AS o
           WHERE o.tenant_id = :tenant_id AND o.operation_id = :operation_id
       ) AS admitted,
       (
           SELECT d.approver_id FROM approvals AS d INDEXED BY approvals_by_proposal
           WHERE d.tenant_id = :tenant_id AND d.proposal_id = :proposal_id
             AND d.decision = 'denied'
           ORDER BY d.decided_us, d.approval_id LIMIT 1
       ) AS denied_by,
       (
           SELECT r.reason FROM approvals AS r INDEXED BY approvals_by_proposal
           WHERE r.tenant_id = :tenant_id AND r.proposal_id = :proposal_id
             AND r.decision = 'denied'
           ORDER BY r.decided_us, r.approval_id LIMIT 1
       ) AS denial_reason,
       (
           SELECT count(DISTINCT g.approver_id) FROM approvals AS g INDEXED BY approvals_by_proposal
           WHERE g.tenant_id = :tenant_id AND g.proposal_id = :proposal_id
             AND g.digest = :digest AND g.kind = 'approval' AND g.decision = 'granted'
             AND g.expires_us > :now_us
       ) AS approvers,
       EXISTS (
           SELECT 1 FROM approvals AS m INDEXED BY approvals_by_proposal
           WHERE m.tenant_id = :tenant_id AND m.proposal_id = :proposal_id
             AND m.approver_id = :reviewer_id AND m.decision = 'granted'
             AND m.expires_us > :now_us
       ) AS reviewer_approved;

-- name: approval_insert
INSERT INTO approvals (
    tenant_id, approval_id, proposal_id, digest, decision, kind, approver_id, policy_version,
    reason, decided_us, expires_us
) VALUES (
    :tenant_id, :approval_id, :proposal_id, :digest, :decision, :kind, :approver_id,
    :policy_version, :reason, :decided_us, :expires_us
);

-- name: admission_approval
-- What an admission needs to know, in one read once its trail is held: whether the operation
-- was admitted already (``admitted``, and for which proposal), the first denial of the proposal
-- (if any), the presented approval's row (all NULL if there is none or no id was given), whether
-- that approval was already consumed, and the head of the operation's trail (``head_sequence``
-- and ``head_hash``, the stored bytes of its event hash; NULL before its first event).
SELECT EXISTS (
           SELECT 1 FROM operations AS o
           WHERE o.tenant_id = :tenant_id AND o.operation_id = :operation_id
       ) AS admitted,
       (
           SELECT o.proposal_id FROM operations AS o
           WHERE o.tenant_id = :tenant_id AND o.operation_id = :operation_id
       ) AS admitted_proposal_id,
       (
           SELECT d.approver_id FROM approvals AS d
           WHERE d.tenant_id = :tenant_id AND d.proposal_id = :proposal_id
             AND d.decision = 'denied'
           ORDER BY d.decided_us, d.approval_id LIMIT 1
       ) AS denied_by,
       a.*,
       EXISTS (
           SELECT 1 FROM approval_consumptions AS c
           WHERE c.tenant_id = :tenant_id AND c.approval_id = :approval_id
       ) AS consumed,
       (
           SELECT h.sequence FROM audit_events AS h
           WHERE h.tenant_id = :tenant_id AND h.operation_id = :operation_id
           ORDER BY h.sequence DESC LIMIT 1
       ) AS head_sequence,
       (
           SELECT h.event_hash FROM audit_events AS h
           WHERE h.tenant_id = :tenant_id AND h.operation_id = :operation_id
           ORDER BY h.sequence DESC LIMIT 1
       ) AS head_hash
FROM (SELECT 1 AS one) AS request
LEFT JOIN approvals AS a ON a.tenant_id = :tenant_id AND a.approval_id = :approval_id;

-- name: decisions_page
-- The desk's history: a tenant's decisions (approvals and denials by people), newest first, a
-- page at a time, filtered by decider, action, outcome, time and a target or id searched for.
SELECT a.approval_id, a.proposal_id, a.decision, a.approver_id, a.reason, a.decided_us,
       p.action, p.target, p.operation_id, p.proposer_id
FROM approvals AS a
JOIN proposals AS p ON p.tenant_id = a.tenant_id AND p.proposal_id = a.proposal_id
WHERE a.tenant_id = :tenant_id AND a.kind = 'approval'
  AND (:decider IS NULL OR a.approver_id = :decider)
  AND (:action IS NULL OR p.action = :action)
  AND (:decision IS NULL OR a.decision = :decision)
  AND (:since_us IS NULL OR a.decided_us >= :since_us)
  AND (:until_us IS NULL OR a.decided_us < :until_us)
  AND (:search IS NULL OR p.target = :search OR p.proposal_id = :search
       OR p.operation_id = :search)
  AND (:before_us IS NULL
       OR a.decided_us < :before_us
       OR (a.decided_us = :before_us AND a.approval_id < :before_id))
ORDER BY a.decided_us DESC, a.approval_id DESC
LIMIT :limit;

-- name: approval_get
SELECT * FROM approvals WHERE tenant_id = :tenant_id AND approval_id = :approval_id;

-- name: consumption_get
SELECT * FROM approval_consumptions WHERE tenant_id = :tenant_id AND approval_id = :approval_id;

-- name: consumption_insert
INSERT INTO approval_consumptions (tenant_id, approval_id, operation_id, consumed_us)
VALUES (:tenant_id, :approval_id, :operation_id, :now_us);

-- name: preauthorized_units_since
SELECT coalesce(sum(p.units), 0) AS units
FROM approvals AS a
JOIN proposals AS p ON p.tenant_id = a.tenant_id AND p.proposal_id = a.proposal_id
WHERE a.tenant_id = :tenant_id AND a.kind = 'preauthorization' AND a.decision = 'granted'
  AND p.action = :action AND a.decided_us >= :since_us;

-- name: capacity_limit_get
SELECT limit_units FROM capacity_limits WHERE tenant_id = :tenant_id AND pool = :pool;

-- name: capacity_limit_lock
-- Admissions to one pool serialize here (BEGIN IMMEDIATE already serializes SQLite writers).
SELECT limit_units FROM capacity_limits WHERE tenant_id = :tenant_id AND pool = :pool;

-- name: capacity_limit_set
INSERT INTO capacity_limits (tenant_id, pool, limit_units, updated_us)
VALUES (:tenant_id, :pool, :limit_units, :now_us)
ON CONFLICT (tenant_id, pool) DO UPDATE SET
    limit_units = excluded.limit_units, updated_us = excluded.updated_us;

-- name: capacity_usage
-- The pool's running totals (migration 14), summed over its shards: one key read.
SELECT coalesce(sum(held), 0) AS held, coalesce(sum(committed), 0) AS committed,
       coalesce(sum(freed), 0) AS freed
FROM capacity_totals WHERE tenant_id = :tenant_id AND pool = :pool;

-- name: capacity_recount
-- What the totals should be: every pool's units summed from its operations (the check reads
-- the whole ledger on purpose).
SELECT tenant_id, pool,
    sum(CASE WHEN state IN ('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                            'RETRY_PENDING') THEN units ELSE 0 END) AS held,
    sum(CASE WHEN state = 'SUCCEEDED' THEN units ELSE 0 END) AS committed,
    sum(CASE WHEN state IN ('REJECTED', 'RELEASED') THEN units ELSE 0 END) AS freed
FROM operations WHERE pool IS NOT NULL AND units > 0
GROUP BY tenant_id, pool ORDER BY tenant_id, pool;

-- name: capacity_totals_all
SELECT tenant_id, pool, sum(held) AS held, sum(committed) AS committed, sum(freed) AS freed
FROM capacity_totals GROUP BY tenant_id, pool ORDER BY tenant_id, pool;

-- name: capacity_totals_lock
-- BEGIN IMMEDIATE already keeps every other writer out: nothing to run.

-- name: capacity_totals_clear
DELETE FROM capacity_totals;

-- name: capacity_totals_rebuild
INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
SELECT tenant_id, pool, 0,
    sum(CASE WHEN state IN ('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                            'RETRY_PENDING') THEN units ELSE 0 END),
    sum(CASE WHEN state = 'SUCCEEDED' THEN units ELSE 0 END),
    sum(CASE WHEN state IN ('REJECTED', 'RELEASED') THEN units ELSE 0 END)
FROM operations WHERE pool IS NOT NULL AND units > 0
GROUP BY tenant_id, pool;

-- Evidence: Merkle log, checkpoints, export

-- name: event_get
SELECT * FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND event_id = :event_id;

-- name: event_at_sequence
SELECT * FROM audit_events
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND sequence = :sequence;

-- name: event_sealed_at_sequence
-- One event of an operation, with the leaf the log sealed it as (NULL while it is pending).
SELECT e.*, l.leaf_hash AS sealed_leaf
FROM audit_events AS e
LEFT JOIN log_entries AS l
  ON l.tenant_id = e.tenant_id AND l.operation_id = e.operation_id AND l.sequence = e.sequence
WHERE e.tenant_id = :tenant_id AND e.operation_id = :operation_id
  AND e.sequence = :sequence;

-- name: log_head_ensure
INSERT INTO log_heads (tenant_id, size, root_hash, frontier, checkpoint_seq, updated_us)
VALUES (:tenant_id, 0, :root_hash, '', 0, :now_us)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: log_head_lock
-- The write transaction (BEGIN IMMEDIATE) already serializes sealers on SQLite.
SELECT * FROM log_heads WHERE tenant_id = :tenant_id;

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
       e.prev_hash, e.event_hash, e.trail_tag
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

-- name: log_pending_oldest_by_tenant
-- Per tenant, the events waiting to be sealed and the oldest one's time (gauges).
SELECT tenant_id, count(*) AS pending, min(recorded_us) AS oldest_us
FROM log_pending GROUP BY tenant_id;

-- name: log_entry_insert
INSERT INTO log_entries (tenant_id, position, event_id, leaf_hash, sealed_us, operation_id, sequence)
VALUES (:tenant_id, :position, :event_id, :leaf_hash, :now_us, :operation_id,
        :sequence);

-- name: log_entry_at_position
-- The entry that sealed a trail position already, if any: the sealer seals each position once.
SELECT event_id, position FROM log_entries
WHERE tenant_id = :tenant_id AND operation_id = :operation_id AND sequence = :sequence;

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

-- name: evidence_blob_insert
-- Content-addressed: an identical answer already stored for the tenant is kept as it is.
INSERT INTO evidence_blobs (tenant_id, sha256, media_type, size_bytes, content, stored_us)
VALUES (:tenant_id, :sha256, :media_type, :size_bytes, :content, :now_us)
ON CONFLICT (tenant_id, sha256) DO NOTHING;

-- name: evidence_blob_get
SELECT * FROM evidence_blobs WHERE tenant_id = :tenant_id AND sha256 = :sha256;

-- name: store_ping
-- Whether the store answers and its schema is in place (the HTTP API's readiness).
SELECT max(version) AS schema_version FROM schema_migrations;

-- name: ledger_has_events
-- Whether any audit event was ever written (a ledger without one gets its keys on migrate).
SELECT EXISTS (SELECT 1 FROM audit_events) AS found;

-- name: api_key_insert
INSERT INTO api_keys (key_id, secret_hash, tenant_id, actor_id, roles_json, created_us)
VALUES (:key_id, :secret_hash, :tenant_id, :actor_id, :roles_json, :now_us);

-- name: api_key_get
SELECT * FROM api_keys WHERE key_id = :key_id;

-- name: api_key_revoke
-- Revokes a live key; a key already revoked keeps its first revocation time (no row changes).
UPDATE api_keys SET revoked_us = :now_us WHERE key_id = :key_id AND revoked_us IS NULL;

-- name: api_keys_list
SELECT * FROM api_keys ORDER BY created_us, key_id LIMIT :limit;

-- name: api_keys_list_tenant
SELECT * FROM api_keys WHERE tenant_id = :tenant_id ORDER BY created_us, key_id LIMIT :limit;

-- name: checkpoint_cosignature_insert
INSERT INTO checkpoint_cosignatures (
    tenant_id, seq, witness_key, size, root_hash, cosignature, cosigned_us
) VALUES (
    :tenant_id, :seq, :witness_key, :size, :root_hash, :cosignature, :now_us
)
ON CONFLICT (tenant_id, seq, witness_key) DO NOTHING;

-- name: checkpoint_cosignatures_of
SELECT c.witness_key, c.cosignature FROM checkpoint_cosignatures c
JOIN log_checkpoints l
  ON l.tenant_id = c.tenant_id AND l.seq = c.seq AND l.size = c.size AND l.root_hash = c.root_hash
WHERE c.tenant_id = :tenant_id AND c.seq = :seq
ORDER BY c.witness_key;

-- name: checkpoint_cosigned_latest
SELECT l.seq, l.size, l.root_hash, l.note
FROM checkpoint_cosignatures c INDEXED BY checkpoint_cosignatures_by_witness
JOIN log_checkpoints l
  ON l.tenant_id = c.tenant_id AND l.seq = c.seq AND l.size = c.size AND l.root_hash = c.root_hash
WHERE c.tenant_id = :tenant_id AND c.witness_key = :witness_key
ORDER BY c.seq DESC
LIMIT 1;

-- name: trails_in_flight
-- The trails a key rotation must re-tag, after the cursor (tenant, operation), in id order: the
-- operations not yet final and the unexpired proposals not yet admitted. An empty tenant matches
-- every tenant. An operator's command (audit retag), not a hot path: it reads every such row.
SELECT tenant_id, operation_id FROM (
    SELECT tenant_id, operation_id FROM operations
    WHERE state IN ('READY', 'IN_PROGRESS', 'RETRY_PENDING', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW')
    UNION
    SELECT p.tenant_id, p.operation_id FROM proposals AS p
    WHERE p.expires_us > :now_us AND NOT EXISTS (
        SELECT 1 FROM operations AS o
        WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
    )
) AS t
WHERE (:tenant_id = '' OR tenant_id = :tenant_id)
  AND (tenant_id > :after_tenant OR (tenant_id = :after_tenant AND operation_id > :after_operation))
ORDER BY tenant_id, operation_id
LIMIT :limit;

-- name: trails_in_flight_count
-- How many trails trails_in_flight lists in all (the progress of audit retag).
SELECT count(*) AS trails FROM (
    SELECT tenant_id, operation_id FROM operations
    WHERE state IN ('READY', 'IN_PROGRESS', 'RETRY_PENDING', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW')
    UNION
    SELECT p.tenant_id, p.operation_id FROM proposals AS p
    WHERE p.expires_us > :now_us AND NOT EXISTS (
        SELECT 1 FROM operations AS o
        WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
    )
) AS t
WHERE (:tenant_id = '' OR tenant_id = :tenant_id);

-- name: operation_trace_insert
-- The trace an operation was admitted in (migration 17), in its admission's transaction.
INSERT INTO operation_traces (tenant_id, operation_id, traceparent)
VALUES (:tenant_id, :operation_id, :traceparent)
ON CONFLICT (tenant_id, operation_id) DO NOTHING;

-- name: operation_trace_get
-- The trace an operation was admitted in, for a later span's link.
SELECT traceparent FROM operation_traces
WHERE tenant_id = :tenant_id AND operation_id = :operation_id;

-- name: sealed_traces
-- The admission traces of the operations whose events hold log positions [first, end) of a
-- tenant's log, for the seal's links; at most the limit of them.
SELECT DISTINCT t.traceparent FROM log_entries AS l
JOIN operation_traces AS t ON t.tenant_id = l.tenant_id AND t.operation_id = l.operation_id
WHERE l.tenant_id = :tenant_id AND l.position >= :first AND l.position < :end
LIMIT :limit;
