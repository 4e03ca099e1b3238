-- Named queries for the PostgreSQL store: the same names, parameters and meaning as the SQLite
-- file. Each block starts with "-- name: <name>" and holds one statement with %(name)s
-- parameters for psycopg. Python never builds SQL; it runs these by name. Transactions run under
-- READ COMMITTED: every statement sees the latest committed rows, and the ledger's updates are
-- guarded by the operation's version.

-- name: advisory_lock
-- Serializes the transactions that read a total or a trail and then write on it (one operation's
-- trail, a pool's capacity, an action's pre-authorization budget) until the transaction ends.
-- Identifiers never contain '|', so the joined key is unambiguous.
SELECT pg_advisory_xact_lock(hashtextextended(%(tenant_id)s || '|' || %(scope)s, 0));

-- name: schema_version
-- The newest migration applied; opening an existing ledger without migrating checks it.
SELECT max(version) AS version FROM schema_migrations;

-- name: operation_insert
-- An admission's operation and its OperationAdmitted event in one statement: a row if it inserted
-- the operation (whose values the caller knows: nothing is read back), or no row if the operation
-- id is taken (then read the one that is), and then the event is not appended either.
WITH inserted AS (
    INSERT INTO operations (
        tenant_id, operation_id, requester_id, revision, action, contract_version, command_json,
        fingerprint, admission_reference, destination_account, destination_endpoint, idempotency_key,
        state, version, event_sequence, created_us, updated_us, last_event_hash, proposal_id,
        approval_id, pool, units
    ) VALUES (
        %(tenant_id)s, %(operation_id)s, %(requester_id)s, %(revision)s, %(action)s, %(contract_version)s, %(command_json)s,
        %(fingerprint)s, %(admission_reference)s, %(destination_account)s, %(destination_endpoint)s,
        %(idempotency_key)s, 'READY', 1, %(event_sequence)s, %(now_us)s, %(now_us)s, %(event_hash)s, %(proposal_id)s,
        %(approval_id)s, %(pool)s, %(units)s
    )
    ON CONFLICT (tenant_id, operation_id) DO NOTHING
    RETURNING 1 AS inserted
), logged AS (
    INSERT INTO audit_events (
        event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
        evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
    )
    SELECT %(event_id)s, %(tenant_id)s, %(operation_id)s, %(attempt_id)s, %(sequence)s, %(actor)s, %(event_type)s,
           %(recorded_us)s, %(evidence_reference)s, %(details_json)s, %(observation_id)s, %(prev_hash)s, %(event_hash)s, %(trail_tag)s
    FROM inserted
)
SELECT inserted FROM inserted;

-- name: operation_get
SELECT * FROM operations WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s;

-- name: operation_with_attempt
-- The operation, whether it has the named attempt, and another operation of the same
-- destination that already holds the provider reference being recorded (NULL: none, or no
-- reference), in one read (for record).
SELECT o.*, EXISTS (
    SELECT 1 FROM attempts AS a
    WHERE a.tenant_id = o.tenant_id AND a.operation_id = o.operation_id
      AND a.attempt_id = %(attempt_id)s
) AS attempt_present, (
    SELECT h.operation_id FROM operations AS h
    WHERE h.tenant_id = o.tenant_id AND h.destination_account = o.destination_account
      AND h.destination_endpoint = o.destination_endpoint
      AND h.provider_reference = %(provider_reference)s AND h.operation_id <> o.operation_id
    LIMIT 1
) AS reference_holder
FROM operations AS o
WHERE o.tenant_id = %(tenant_id)s AND o.operation_id = %(operation_id)s;

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

-- name: operation_dispatch
-- An executor's first read: the recorded state for a repeated call, and for a READY
-- operation every column its claim checks and writes from, so the claim need not read again.
SELECT tenant_id, operation_id, requester_id, state, version, event_sequence, last_event_hash,
       active_attempt_id, proposal_id, approval_id, pool, units,
       provider_reference, inconclusive_lookups, retries_authorized, review_owner,
       review_deadline_us, command_json, fingerprint, admission_reference,
       destination_account, destination_endpoint, idempotency_key
FROM operations WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s;

-- name: operation_step
-- One step of an operation in one statement: its row moves (guarded by its version and the head
-- of its trail) and the step's event is appended only if the row moved. The count is 1 when
-- both happened, 0 when the guard failed and nothing was written.
WITH moved AS (
    UPDATE operations SET
        state = %(state)s,
        active_attempt_id = %(active_attempt_id)s,
        provider_reference = %(provider_reference)s,
        inconclusive_lookups = %(inconclusive_lookups)s,
        retries_authorized = %(retries_authorized)s,
        review_owner = %(review_owner)s,
        review_deadline_us = %(review_deadline_us)s,
        version = %(new_version)s,
        event_sequence = %(new_sequence)s,
        last_event_hash = %(event_hash)s,
        updated_us = %(now_us)s
    WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
      AND version = %(version)s AND event_sequence = %(sequence)s
    RETURNING 1
)
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
)
SELECT %(event_id)s, %(tenant_id)s, %(operation_id)s, %(attempt_id)s, %(new_sequence)s,
       %(actor)s, %(event_type)s, %(recorded_us)s, %(evidence_reference)s, %(details_json)s,
       %(observation_id)s, %(prev_hash)s, %(event_hash)s, %(trail_tag)s
FROM moved;

-- name: operation_step_observed
-- operation_step after storing the active attempt's observation: what a recorded reply that
-- owns the operation's state writes. The attempt is updated even when the row's guard fails; the
-- caller then steps again after the moved head or rolls the whole transaction back.
WITH observed AS (
    UPDATE attempts SET
        observation = %(observation)s,
        provider_reference = %(observed_reference)s,
        evidence_reference = %(evidence_reference)s
    WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s AND attempt_id = %(attempt_id)s
    RETURNING 1
), moved AS (
    UPDATE operations SET
        state = %(state)s,
        active_attempt_id = %(active_attempt_id)s,
        provider_reference = %(provider_reference)s,
        inconclusive_lookups = %(inconclusive_lookups)s,
        retries_authorized = %(retries_authorized)s,
        review_owner = %(review_owner)s,
        review_deadline_us = %(review_deadline_us)s,
        version = %(new_version)s,
        event_sequence = %(new_sequence)s,
        last_event_hash = %(event_hash)s,
        updated_us = %(now_us)s
    WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
      AND version = %(version)s AND event_sequence = %(sequence)s
    RETURNING 1
)
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
)
SELECT %(event_id)s, %(tenant_id)s, %(operation_id)s, %(attempt_id)s, %(new_sequence)s,
       %(actor)s, %(event_type)s, %(recorded_us)s, %(evidence_reference)s, %(details_json)s,
       %(observation_id)s, %(prev_hash)s, %(event_hash)s, %(trail_tag)s
FROM moved;

-- name: operations_list
SELECT * FROM operations WHERE tenant_id = %(tenant_id)s
ORDER BY created_us DESC, operation_id LIMIT %(limit)s;

-- name: operations_by_state
-- The tenant's operations counted by state (an operator's summary, not a hot path).
SELECT state, count(*) AS operations FROM operations WHERE tenant_id = %(tenant_id)s GROUP BY state;

-- name: operations_uncertain_oldest
-- How many of the tenant's operations are uncertain, and the oldest last change among them.
SELECT count(*) AS uncertain, min(updated_us) AS oldest_us FROM operations
WHERE tenant_id = %(tenant_id)s AND state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW');

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
WHERE tenant_id = %(tenant_id)s AND state = 'MANUAL_REVIEW'
ORDER BY review_deadline_us, operation_id LIMIT %(limit)s;

-- name: operations_ready
-- READY operations of one destination, oldest first (for executors that recheck before claiming).
SELECT tenant_id, operation_id, requester_id FROM operations
WHERE state = 'READY'
  AND destination_account = %(destination_account)s
  AND destination_endpoint = %(destination_endpoint)s
ORDER BY created_us, tenant_id, operation_id
LIMIT %(limit)s;

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

-- name: operations_ready_batch
-- Up to :limit READY operations of one destination after a position in the queue, oldest
-- first, with every column their claims check: what a batch claimer rechecks before its claim
-- transaction (bounded by the limit and the partial index of READY operations).
SELECT * FROM operations
WHERE state = 'READY'
  AND destination_account = %(destination_account)s
  AND destination_endpoint = %(destination_endpoint)s
  AND (created_us, tenant_id, operation_id)
      > (%(after_us)s, %(after_tenant)s, %(after_operation)s)
ORDER BY created_us, tenant_id, operation_id
LIMIT %(limit)s;

-- name: operations_lock_ready_batch
-- The operations of a batch claim (:keys, a JSON array of [tenant_id, operation_id]) that are
-- still READY and that no other executor holds, locked in queue order: one another claimer has
-- locked is skipped, never waited for.
SELECT * FROM operations
WHERE (tenant_id, operation_id) IN (
        SELECT key ->> 0, key ->> 1 FROM jsonb_array_elements(%(keys)s::jsonb) AS key)
  AND state = 'READY'
ORDER BY created_us, tenant_id, operation_id
FOR UPDATE SKIP LOCKED;

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
        SELECT key ->> 0, key ->> 1 FROM jsonb_array_elements(%(keys)s::jsonb) AS key)
ORDER BY e.tenant_id, e.operation_id, e.sequence;

-- name: proposals_for_batch
-- proposal_get for each proposal of a batch (:keys, a JSON array of [tenant_id, proposal_id]).
SELECT * FROM proposals
WHERE (tenant_id, proposal_id) IN (
        SELECT key ->> 0, key ->> 1 FROM jsonb_array_elements(%(keys)s::jsonb) AS key);

-- name: approvals_for_batch
-- approval_get for each approval of a batch (:keys, a JSON array of [tenant_id, approval_id]).
SELECT * FROM approvals
WHERE (tenant_id, approval_id) IN (
        SELECT key ->> 0, key ->> 1 FROM jsonb_array_elements(%(keys)s::jsonb) AS key);

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

-- name: attempts_for_operation
SELECT * FROM attempts WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
ORDER BY prepared_us, attempt_id;

-- name: attempt_reschedule
UPDATE attempts SET recover_after_us = %(recover_after_us)s
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND attempt_id = %(attempt_id)s;

-- name: attempts_due_lock
-- Due attempts that no other recovery worker holds. Both rows are locked, so a row that another
-- worker reserved just before is re-checked on its new recover_after and left out.
SELECT a.tenant_id, a.operation_id, a.attempt_id
FROM attempts AS a
JOIN operations AS o
  ON o.tenant_id = a.tenant_id AND o.operation_id = a.operation_id
 AND o.active_attempt_id = a.attempt_id
WHERE a.recover_after_us <= %(now_us)s AND o.state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')
  AND a.destination_account = %(destination_account)s
  AND a.destination_endpoint = %(destination_endpoint)s
ORDER BY a.recover_after_us
LIMIT %(limit)s
FOR UPDATE OF a, o SKIP LOCKED;

-- name: event_insert
INSERT INTO audit_events (
    event_id, tenant_id, operation_id, attempt_id, sequence, actor, event_type, recorded_us,
    evidence_reference, details_json, observation_id, prev_hash, event_hash, trail_tag
) VALUES (
    %(event_id)s, %(tenant_id)s, %(operation_id)s, %(attempt_id)s, %(sequence)s, %(actor)s,
    %(event_type)s, %(recorded_us)s, %(evidence_reference)s, %(details_json)s,
    %(observation_id)s, %(prev_hash)s, %(event_hash)s, %(trail_tag)s
);

-- name: events_for_operation
-- An operation's events in sequence order, each with the leaf the log sealed at its position
-- (sealed_leaf, NULL while it waits for the sealer): a sealed event is compared with its leaf, not
-- trusted, and an event written at a position sealed for another is not the sealed one. Every
-- row carries sealed_through, the highest position of the operation the log sealed: a trail
-- shorter than that lost sealed events.
SELECT e.*, l.leaf_hash AS sealed_leaf,
       (SELECT max(s.sequence) FROM log_entries AS s
        WHERE s.tenant_id = %(tenant_id)s AND s.operation_id = %(operation_id)s) AS sealed_through
FROM audit_events AS e
LEFT JOIN log_entries AS l
  ON l.tenant_id = e.tenant_id AND l.operation_id = e.operation_id AND l.sequence = e.sequence
WHERE e.tenant_id = %(tenant_id)s AND e.operation_id = %(operation_id)s
ORDER BY e.sequence;

-- name: event_head
SELECT sequence, event_hash FROM audit_events
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
ORDER BY sequence DESC LIMIT 1;

-- name: event_present
-- Whether the event a write computed was stored (read back after a lost COMMIT acknowledgement).
SELECT 1 AS present FROM audit_events
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s AND event_hash = %(event_hash)s;

-- name: event_by_observation
SELECT event_id FROM audit_events
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s
  AND observation_id = %(observation_id)s;

-- Authority: proposals, approvals, consumption, capacity.

-- name: proposal_insert
INSERT INTO proposals (
    tenant_id, proposal_id, operation_id, proposer_id, action, contract_version, target,
    resource_version, arguments_json, units, pool, destination_account, destination_endpoint,
    policy_version, expires_us, correlation_json, digest, created_us,
    stated_reason
) VALUES (
    %(tenant_id)s, %(proposal_id)s, %(operation_id)s, %(proposer_id)s, %(action)s, %(contract_version)s, %(target)s,
    %(resource_version)s, %(arguments_json)s, %(units)s, %(pool)s, %(destination_account)s,
    %(destination_endpoint)s, %(policy_version)s, %(expires_us)s, %(correlation_json)s, %(digest)s, %(created_us)s,
    %(stated_reason)s
);

-- name: proposal_get
SELECT * FROM proposals WHERE tenant_id = %(tenant_id)s AND proposal_id = %(proposal_id)s;

-- name: proposal_for_operation
SELECT * FROM proposals WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s;

-- name: proposal_replay
-- A perform's first read: the proposal, the operation admitted for it, if any, and the head of
-- the operation's trail (``head``: the type of the event at its ``event_sequence`` if that
-- event's hash is the row's ``last_event_hash``, with ``+reference`` after it if its details
-- name the row's provider reference as the canonical text of one that needs no escape). A
-- repeated perform ends here, its recorded result checked against that head; a first one admits
-- the proposal read here. The digest comes as its stored bytes (``stored_digest``, not a hash
-- column's name): a replay never reads it, and an admission turns it into its string once.
SELECT p.tenant_id, p.proposal_id, p.operation_id, p.proposer_id, p.action, p.contract_version,
       p.target, p.resource_version, p.arguments_json, p.units, p.pool, p.destination_account,
       p.destination_endpoint, p.policy_version, p.expires_us, p.correlation_json, p.created_us,
       p.digest AS stored_digest,
       o.requester_id, o.state, o.provider_reference, o.active_attempt_id, o.approval_id,
       CASE WHEN h.event_hash = o.last_event_hash THEN h.event_type || CASE
           WHEN position(('"provider_reference":"' || o.provider_reference || '"') IN h.details_json) > 0
           THEN '+reference' ELSE '' END END AS head
FROM proposals AS p
LEFT JOIN operations AS o ON o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
LEFT JOIN audit_events AS h
  ON h.tenant_id = o.tenant_id AND h.operation_id = o.operation_id AND h.sequence = o.event_sequence
WHERE p.tenant_id = %(tenant_id)s AND p.proposal_id = %(proposal_id)s;

-- name: proposal_decision
-- For a perform that names no approval: whether the proposal's operation id is admitted, else
-- the decision recorded on its digest (the first denial, or the latest grant). The admission
-- checks whatever is chosen here again, under its locks.
SELECT EXISTS (
           SELECT 1 FROM operations AS o
           WHERE o.tenant_id = %(tenant_id)s AND o.operation_id = %(operation_id)s
       ) AS admitted,
       (
           SELECT d.approval_id FROM approvals AS d
           WHERE d.tenant_id = %(tenant_id)s AND d.proposal_id = %(proposal_id)s
             AND d.digest = %(digest)s AND d.kind = 'approval' AND d.decision = 'denied'
           ORDER BY d.decided_us, d.approval_id LIMIT 1
       ) AS denied,
       (
           SELECT g.approval_id FROM approvals AS g
           WHERE g.tenant_id = %(tenant_id)s AND g.proposal_id = %(proposal_id)s
             AND g.digest = %(digest)s AND g.kind = 'approval' AND g.decision = 'granted'
           ORDER BY g.decided_us DESC, g.approval_id DESC LIMIT 1
       ) AS granted;

-- name: proposal_denial
-- A denial closes its proposal: the first one recorded, if any.
SELECT approval_id, approver_id, reason FROM approvals
WHERE tenant_id = %(tenant_id)s AND proposal_id = %(proposal_id)s AND decision = 'denied'
ORDER BY decided_us, approval_id LIMIT 1;

-- name: proposal_grants
-- The granted, unconsumed approvals of a proposal (for policies that need several approvers).
SELECT a.* FROM approvals AS a
WHERE a.tenant_id = %(tenant_id)s AND a.proposal_id = %(proposal_id)s AND a.decision = 'granted'
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
-- An empty filter matches every value.
SELECT p.*,
       (
           SELECT count(DISTINCT g.approver_id) FROM approvals AS g
           WHERE g.tenant_id = p.tenant_id AND g.proposal_id = p.proposal_id
             AND g.digest = p.digest AND g.kind = 'approval' AND g.decision = 'granted'
             AND g.expires_us > %(now_us)s
       ) AS approvers,
       EXISTS (
           SELECT 1 FROM approvals AS m
           WHERE m.tenant_id = p.tenant_id AND m.proposal_id = p.proposal_id
             AND m.approver_id = %(reviewer_id)s AND m.decision = 'granted'
             AND m.expires_us > %(now_us)s
       ) AS reviewer_approved
FROM proposals AS p
WHERE p.tenant_id = %(tenant_id)s AND p.expires_us > %(now_us)s AND p.expires_us < %(expiring_before)s
  AND (p.expires_us, p.proposal_id) > (%(after_us)s, %(after_id)s)
  AND (%(action)s = '' OR p.action = %(action)s)
  AND (%(pool)s = '' OR p.pool = %(pool)s)
  AND (%(proposer_id)s = '' OR p.proposer_id = %(proposer_id)s)
  AND NOT EXISTS (
      SELECT 1 FROM operations AS o
      WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
  )
  AND NOT EXISTS (
      SELECT 1 FROM approvals AS d
      WHERE d.tenant_id = p.tenant_id AND d.proposal_id = p.proposal_id AND d.decision = 'denied'
  )
ORDER BY p.expires_us, p.proposal_id
LIMIT %(limit)s;

-- name: proposals_pending_newest
-- The reviewer's queue, newest first: as proposals_pending_expiring, walking back from the
-- cursor (creation time, id). The cursors are row values: SQLite walks the index from them
-- and stops after a page, where an OR of the two columns made it read every live proposal.
SELECT p.*,
       (
           SELECT count(DISTINCT g.approver_id) FROM approvals AS g
           WHERE g.tenant_id = p.tenant_id AND g.proposal_id = p.proposal_id
             AND g.digest = p.digest AND g.kind = 'approval' AND g.decision = 'granted'
             AND g.expires_us > %(now_us)s
       ) AS approvers,
       EXISTS (
           SELECT 1 FROM approvals AS m
           WHERE m.tenant_id = p.tenant_id AND m.proposal_id = p.proposal_id
             AND m.approver_id = %(reviewer_id)s AND m.decision = 'granted'
             AND m.expires_us > %(now_us)s
       ) AS reviewer_approved
FROM proposals AS p
WHERE p.tenant_id = %(tenant_id)s
  AND (p.created_us, p.proposal_id) < (%(after_us)s, %(after_id)s)
  AND p.expires_us > %(now_us)s AND p.expires_us < %(expiring_before)s
  AND (%(action)s = '' OR p.action = %(action)s)
  AND (%(pool)s = '' OR p.pool = %(pool)s)
  AND (%(proposer_id)s = '' OR p.proposer_id = %(proposer_id)s)
  AND NOT EXISTS (
      SELECT 1 FROM operations AS o
      WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
  )
  AND NOT EXISTS (
      SELECT 1 FROM approvals AS d
      WHERE d.tenant_id = p.tenant_id AND d.proposal_id = p.proposal_id AND d.decision = 'denied'
  )
ORDER BY p.created_us DESC, p.proposal_id DESC
LIMIT %(limit)s;

-- name: proposal_review
-- Where one proposal stands for a reviewer: admitted, its first denial (who and why), the
-- distinct approvers with a live grant of its digest, and whether the reviewer is one of them.
SELECT EXISTS (
           SELECT 1 FROM operations AS o
           WHERE o.tenant_id = %(tenant_id)s AND o.operation_id = %(operation_id)s
       ) AS admitted,
       (
           SELECT d.approver_id FROM approvals AS d
           WHERE d.tenant_id = %(tenant_id)s AND d.proposal_id = %(proposal_id)s
             AND d.decision = 'denied'
           ORDER BY d.decided_us, d.approval_id LIMIT 1
       ) AS denied_by,
       (
           SELECT r.reason FROM approvals AS r
           WHERE r.tenant_id = %(tenant_id)s AND r.proposal_id = %(proposal_id)s
             AND r.decision = 'denied'
           ORDER BY r.decided_us, r.approval_id LIMIT 1
       ) AS denial_reason,
       (
           SELECT count(DISTINCT g.approver_id) FROM approvals AS g
           WHERE g.tenant_id = %(tenant_id)s AND g.proposal_id = %(proposal_id)s
             AND g.digest = %(digest)s AND g.kind = 'approval' AND g.decision = 'granted'
             AND g.expires_us > %(now_us)s
       ) AS approvers,
       EXISTS (
           SELECT 1 FROM approvals AS m
           WHERE m.tenant_id = %(tenant_id)s AND m.proposal_id = %(proposal_id)s
             AND m.approver_id = %(reviewer_id)s AND m.decision = 'granted'
             AND m.expires_us > %(now_us)s
       ) AS reviewer_approved;

-- name: approval_insert
INSERT INTO approvals (
    tenant_id, approval_id, proposal_id, digest, decision, kind, approver_id, policy_version,
    reason, decided_us, expires_us
) VALUES (
    %(tenant_id)s, %(approval_id)s, %(proposal_id)s, %(digest)s, %(decision)s, %(kind)s, %(approver_id)s,
    %(policy_version)s, %(reason)s, %(decided_us)s, %(expires_us)s
);

-- name: admission_approval
-- What an admission needs to know, in one read once its trail is held: whether the operation
-- was admitted already (``admitted``, and for which proposal), the first denial of the proposal
-- (if any), the presented approval's row (all NULL if there is none or no id was given), whether
-- that approval was already consumed, and the head of the operation's trail (``head_sequence``
-- and ``head_hash``, the stored bytes of its event hash; NULL before its first event).
SELECT EXISTS (
           SELECT 1 FROM operations AS o
           WHERE o.tenant_id = %(tenant_id)s AND o.operation_id = %(operation_id)s
       ) AS admitted,
       (
           SELECT o.proposal_id FROM operations AS o
           WHERE o.tenant_id = %(tenant_id)s AND o.operation_id = %(operation_id)s
       ) AS admitted_proposal_id,
       (
           SELECT d.approver_id FROM approvals AS d
           WHERE d.tenant_id = %(tenant_id)s AND d.proposal_id = %(proposal_id)s
             AND d.decision = 'denied'
           ORDER BY d.decided_us, d.approval_id LIMIT 1
       ) AS denied_by,
       a.*,
       EXISTS (
           SELECT 1 FROM approval_consumptions AS c
           WHERE c.tenant_id = %(tenant_id)s AND c.approval_id = %(approval_id)s
       ) AS consumed,
       (
           SELECT h.sequence FROM audit_events AS h
           WHERE h.tenant_id = %(tenant_id)s AND h.operation_id = %(operation_id)s
           ORDER BY h.sequence DESC LIMIT 1
       ) AS head_sequence,
       (
           SELECT h.event_hash FROM audit_events AS h
           WHERE h.tenant_id = %(tenant_id)s AND h.operation_id = %(operation_id)s
           ORDER BY h.sequence DESC LIMIT 1
       ) AS head_hash
FROM (SELECT 1 AS one) AS request
LEFT JOIN approvals AS a ON a.tenant_id = %(tenant_id)s AND a.approval_id = %(approval_id)s;

-- name: decisions_page
-- The desk's history: a tenant's decisions (approvals and denials by people), newest first, a
-- page at a time, filtered by decider, action, outcome, time and a target or id searched for.
SELECT a.approval_id, a.proposal_id, a.decision, a.approver_id, a.reason, a.decided_us,
       p.action, p.target, p.operation_id, p.proposer_id
FROM approvals AS a
JOIN proposals AS p ON p.tenant_id = a.tenant_id AND p.proposal_id = a.proposal_id
WHERE a.tenant_id = %(tenant_id)s AND a.kind = 'approval'
  AND (%(decider)s::text IS NULL OR a.approver_id = %(decider)s)
  AND (%(action)s::text IS NULL OR p.action = %(action)s)
  AND (%(decision)s::text IS NULL OR a.decision = %(decision)s)
  AND (%(since_us)s::bigint IS NULL OR a.decided_us >= %(since_us)s)
  AND (%(until_us)s::bigint IS NULL OR a.decided_us < %(until_us)s)
  AND (%(search)s::text IS NULL OR p.target = %(search)s OR p.proposal_id = %(search)s
       OR p.operation_id = %(search)s)
  AND (%(before_us)s::bigint IS NULL
       OR a.decided_us < %(before_us)s
       OR (a.decided_us = %(before_us)s AND a.approval_id < %(before_id)s))
ORDER BY a.decided_us DESC, a.approval_id DESC
LIMIT %(limit)s;

-- name: approval_get
SELECT * FROM approvals WHERE tenant_id = %(tenant_id)s AND approval_id = %(approval_id)s;

-- name: consumption_get
SELECT * FROM approval_consumptions WHERE tenant_id = %(tenant_id)s AND approval_id = %(approval_id)s;

-- name: consumption_insert
INSERT INTO approval_consumptions (tenant_id, approval_id, operation_id, consumed_us)
VALUES (%(tenant_id)s, %(approval_id)s, %(operation_id)s, %(now_us)s);

-- name: preauthorized_units_since
SELECT coalesce(sum(p.units), 0) AS units
FROM approvals AS a
JOIN proposals AS p ON p.tenant_id = a.tenant_id AND p.proposal_id = a.proposal_id
WHERE a.tenant_id = %(tenant_id)s AND a.kind = 'preauthorization' AND a.decision = 'granted'
  AND p.action = %(action)s AND a.decided_us >= %(since_us)s;

-- name: capacity_limit_get
SELECT limit_units FROM capacity_limits WHERE tenant_id = %(tenant_id)s AND pool = %(pool)s;

-- name: capacity_limit_lock
-- Admissions to one pool serialize on this row lock until their transaction ends.
SELECT limit_units FROM capacity_limits WHERE tenant_id = %(tenant_id)s AND pool = %(pool)s
FOR UPDATE;

-- name: capacity_limit_set
INSERT INTO capacity_limits (tenant_id, pool, limit_units, updated_us)
VALUES (%(tenant_id)s, %(pool)s, %(limit_units)s, %(now_us)s)
ON CONFLICT (tenant_id, pool) DO UPDATE SET
    limit_units = excluded.limit_units, updated_us = excluded.updated_us;

-- name: capacity_usage
-- The pool's running totals (migration 14), summed over its shards: one key read.
SELECT coalesce(sum(held), 0) AS held, coalesce(sum(committed), 0) AS committed,
       coalesce(sum(freed), 0) AS freed
FROM capacity_totals WHERE tenant_id = %(tenant_id)s AND pool = %(pool)s;

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
-- Holds off every writer of operations until the rebuild commits (they wait, none fails).
LOCK TABLE operations, capacity_totals IN SHARE ROW EXCLUSIVE MODE;

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

-- Evidence: Merkle log, checkpoints, export

-- name: event_get
SELECT * FROM audit_events
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s AND event_id = %(event_id)s;

-- name: event_at_sequence
SELECT * FROM audit_events
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s AND sequence = %(sequence)s;

-- name: event_sealed_at_sequence
-- One event of an operation, with the leaf the log sealed it as (NULL while it is pending).
SELECT e.*, l.leaf_hash AS sealed_leaf
FROM audit_events AS e
LEFT JOIN log_entries AS l
  ON l.tenant_id = e.tenant_id AND l.operation_id = e.operation_id AND l.sequence = e.sequence
WHERE e.tenant_id = %(tenant_id)s AND e.operation_id = %(operation_id)s
  AND e.sequence = %(sequence)s;

-- name: log_head_ensure
INSERT INTO log_heads (tenant_id, size, root_hash, frontier, checkpoint_seq, updated_us)
VALUES (%(tenant_id)s, 0, %(root_hash)s, '', 0, %(now_us)s)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: log_head_lock
-- Held until the seal transaction ends: concurrent sealers of one tenant queue here.
SELECT * FROM log_heads WHERE tenant_id = %(tenant_id)s FOR UPDATE;

-- name: log_head_get
SELECT * FROM log_heads WHERE tenant_id = %(tenant_id)s;

-- name: log_head_advance
UPDATE log_heads SET
    size = %(size)s,
    root_hash = %(root_hash)s,
    frontier = %(frontier)s,
    checkpoint_seq = %(checkpoint_seq)s,
    updated_us = %(now_us)s
WHERE tenant_id = %(tenant_id)s AND size = %(old_size)s AND checkpoint_seq = %(old_checkpoint_seq)s;

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
WHERE p.tenant_id = %(tenant_id)s
ORDER BY p.pending_id
LIMIT %(limit)s;

-- name: log_pending_delete
DELETE FROM log_pending WHERE pending_id = %(pending_id)s;

-- name: log_pending_oldest
SELECT count(*) AS pending, min(recorded_us) AS oldest_us
FROM log_pending WHERE tenant_id = %(tenant_id)s;

-- name: log_pending_oldest_by_tenant
-- Per tenant, the events waiting to be sealed and the oldest one's time (gauges).
SELECT tenant_id, count(*) AS pending, min(recorded_us) AS oldest_us
FROM log_pending GROUP BY tenant_id;

-- name: log_entry_insert
INSERT INTO log_entries (tenant_id, position, event_id, leaf_hash, sealed_us, operation_id, sequence)
VALUES (%(tenant_id)s, %(position)s, %(event_id)s, %(leaf_hash)s, %(now_us)s, %(operation_id)s,
        %(sequence)s);

-- name: log_entry_at_position
-- The entry that sealed a trail position already, if any: the sealer seals each position once.
SELECT event_id, position FROM log_entries
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s AND sequence = %(sequence)s;

-- name: log_entries_from
SELECT l.position, l.event_id AS entry_event_id, l.leaf_hash,
       e.event_id, e.tenant_id, e.operation_id, e.attempt_id, e.sequence, e.actor,
       e.event_type, e.recorded_us, e.evidence_reference, e.details_json, e.observation_id,
       e.prev_hash, e.event_hash
FROM log_entries AS l
LEFT JOIN audit_events AS e ON e.event_id = l.event_id
WHERE l.tenant_id = %(tenant_id)s AND l.position >= %(position)s
ORDER BY l.position
LIMIT %(limit)s;

-- name: log_entry_for_event
SELECT l.position, l.event_id AS entry_event_id, l.leaf_hash,
       e.event_id, e.tenant_id, e.operation_id, e.attempt_id, e.sequence, e.actor,
       e.event_type, e.recorded_us, e.evidence_reference, e.details_json, e.observation_id,
       e.prev_hash, e.event_hash
FROM log_entries AS l
JOIN audit_events AS e ON e.event_id = l.event_id
WHERE l.tenant_id = %(tenant_id)s AND l.event_id = %(event_id)s;

-- name: log_leaves_from
SELECT position, leaf_hash FROM log_entries
WHERE tenant_id = %(tenant_id)s AND position >= %(position)s AND position < %(size)s
ORDER BY position
LIMIT %(limit)s;

-- name: log_checkpoint_insert
INSERT INTO log_checkpoints (
    tenant_id, seq, size, root_hash, previous_size, consistency_proof, note, signed_us
) VALUES (
    %(tenant_id)s, %(seq)s, %(size)s, %(root_hash)s, %(previous_size)s, %(consistency_proof)s, %(note)s, %(now_us)s
);

-- name: log_checkpoint_latest
SELECT * FROM log_checkpoints WHERE tenant_id = %(tenant_id)s ORDER BY seq DESC LIMIT 1;

-- name: log_checkpoints_after
SELECT * FROM log_checkpoints WHERE tenant_id = %(tenant_id)s AND seq > %(seq)s
ORDER BY seq
LIMIT %(limit)s;

-- name: export_cursor_get
SELECT * FROM export_cursors WHERE exporter_id = %(exporter_id)s AND tenant_id = %(tenant_id)s;

-- name: export_cursor_insert
INSERT INTO export_cursors (
    exporter_id, tenant_id, position, checkpoint_seq, file_offset, updated_us
) VALUES (%(exporter_id)s, %(tenant_id)s, 0, 0, %(file_offset)s, %(now_us)s);

-- name: export_cursor_advance
UPDATE export_cursors SET
    position = %(position)s,
    checkpoint_seq = %(checkpoint_seq)s,
    file_offset = %(file_offset)s,
    updated_us = %(now_us)s
WHERE exporter_id = %(exporter_id)s AND tenant_id = %(tenant_id)s AND file_offset = %(old_offset)s;

-- name: evidence_blob_insert
-- Content-addressed: an identical answer already stored for the tenant is kept as it is.
INSERT INTO evidence_blobs (tenant_id, sha256, media_type, size_bytes, content, stored_us)
VALUES (%(tenant_id)s, %(sha256)s, %(media_type)s, %(size_bytes)s, %(content)s, %(now_us)s)
ON CONFLICT (tenant_id, sha256) DO NOTHING;

-- name: evidence_blob_get
SELECT * FROM evidence_blobs WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s;

-- name: store_ping
-- Whether the store answers and its schema is in place (the HTTP API's readiness).
SELECT max(version) AS schema_version FROM schema_migrations;

-- name: ledger_has_events
-- Whether any audit event was ever written (a ledger without one gets its keys on migrate).
SELECT EXISTS (SELECT 1 FROM audit_events) AS found;

-- name: api_key_insert
INSERT INTO api_keys (key_id, secret_hash, tenant_id, actor_id, roles_json, created_us)
VALUES (%(key_id)s, %(secret_hash)s, %(tenant_id)s, %(actor_id)s, %(roles_json)s, %(now_us)s);

-- name: api_key_get
SELECT * FROM api_keys WHERE key_id = %(key_id)s;

-- name: api_key_revoke
-- Revokes a live key; a key already revoked keeps its first revocation time (no row changes).
UPDATE api_keys SET revoked_us = %(now_us)s WHERE key_id = %(key_id)s AND revoked_us IS NULL;

-- name: api_keys_list
SELECT * FROM api_keys ORDER BY created_us, key_id LIMIT %(limit)s;

-- name: api_keys_list_tenant
SELECT * FROM api_keys WHERE tenant_id = %(tenant_id)s ORDER BY created_us, key_id
LIMIT %(limit)s;

-- name: checkpoint_cosignature_insert
INSERT INTO checkpoint_cosignatures (
    tenant_id, seq, witness_key, size, root_hash, cosignature, cosigned_us
) VALUES (
    %(tenant_id)s, %(seq)s, %(witness_key)s, %(size)s, %(root_hash)s, %(cosignature)s, %(now_us)s
)
ON CONFLICT (tenant_id, seq, witness_key) DO NOTHING;

-- name: checkpoint_cosignatures_of
SELECT c.witness_key, c.cosignature FROM checkpoint_cosignatures c
JOIN log_checkpoints l
  ON l.tenant_id = c.tenant_id AND l.seq = c.seq AND l.size = c.size AND l.root_hash = c.root_hash
WHERE c.tenant_id = %(tenant_id)s AND c.seq = %(seq)s
ORDER BY c.witness_key;

-- name: checkpoint_cosigned_latest
SELECT l.seq, l.size, l.root_hash, l.note FROM checkpoint_cosignatures c
JOIN log_checkpoints l
  ON l.tenant_id = c.tenant_id AND l.seq = c.seq AND l.size = c.size AND l.root_hash = c.root_hash
WHERE c.tenant_id = %(tenant_id)s AND c.witness_key = %(witness_key)s
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
    WHERE p.expires_us > %(now_us)s AND NOT EXISTS (
        SELECT 1 FROM operations AS o
        WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
    )
) AS t
WHERE (%(tenant_id)s = '' OR tenant_id = %(tenant_id)s)
  AND (tenant_id > %(after_tenant)s OR (tenant_id = %(after_tenant)s AND operation_id > %(after_operation)s))
ORDER BY tenant_id, operation_id
LIMIT %(limit)s;

-- name: trails_in_flight_count
-- How many trails trails_in_flight lists in all (the progress of audit retag).
SELECT count(*) AS trails FROM (
    SELECT tenant_id, operation_id FROM operations
    WHERE state IN ('READY', 'IN_PROGRESS', 'RETRY_PENDING', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW')
    UNION
    SELECT p.tenant_id, p.operation_id FROM proposals AS p
    WHERE p.expires_us > %(now_us)s AND NOT EXISTS (
        SELECT 1 FROM operations AS o
        WHERE o.tenant_id = p.tenant_id AND o.operation_id = p.operation_id
    )
) AS t
WHERE (%(tenant_id)s = '' OR tenant_id = %(tenant_id)s);

-- name: operation_trace_insert
-- The trace an operation was admitted in (migration 17), in its admission's transaction.
INSERT INTO operation_traces (tenant_id, operation_id, traceparent)
VALUES (%(tenant_id)s, %(operation_id)s, %(traceparent)s)
ON CONFLICT (tenant_id, operation_id) DO NOTHING;

-- name: operation_trace_get
-- The trace an operation was admitted in, for a later span's link.
SELECT traceparent FROM operation_traces
WHERE tenant_id = %(tenant_id)s AND operation_id = %(operation_id)s;

-- name: sealed_traces
-- The admission traces of the operations whose events hold log positions [first, end) of a
-- tenant's log, for the seal's links; at most the limit of them.
SELECT DISTINCT t.traceparent FROM log_entries AS l
JOIN operation_traces AS t ON t.tenant_id = l.tenant_id AND t.operation_id = l.operation_id
WHERE l.tenant_id = %(tenant_id)s AND l.position >= %(first)s AND l.position < %(end)s
LIMIT %(limit)s;
