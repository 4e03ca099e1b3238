"""Outcomes: what a destination said about one attempt, recorded with its event.

Only the active attempt of an unresolved operation changes the state; any other observation is
kept as ``Late<Outcome>Observation`` and changes nothing. A reply the ledger cannot store as it
stands is recorded as Unknown, with the reason, for recovery to look up.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import replace
from typing import Any

from effectledger._failpoints import crash_point
from effectledger.errors import CommitUncertain, ConcurrentModification, NotFound
from effectledger.ledger.evidence import store_evidence
from effectledger.ledger.settings import LedgerParts
from effectledger.ledger.stored import result_from_row
from effectledger.ledger.trail import key, now_us, write_transition
from effectledger.ledger.uncertain_commit import landed
from effectledger.ledger.validation import recordable
from effectledger.model.operations import (
    Attempt,
    DispatchResult,
    Observation,
    OperationState,
    Outcome,
    PreparedAttempt,
)
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = ["record", "record_in"]

log = logging.getLogger("effectledger.ledger")
_SETTLE_PASSES = 2  # writes of one record whose COMMIT was lost and proven not to have landed
_OWNING_STATES = (
    OperationState.IN_PROGRESS.value,
    OperationState.OUTCOME_UNKNOWN.value,
    OperationState.MANUAL_REVIEW.value,
)
_MANUAL_REVIEW = OperationState.MANUAL_REVIEW.value  # looked up once: ``.value`` is two calls
_OUTCOME_NAMES = {outcome: outcome.value for outcome in Outcome}
"""Each outcome's stored name, looked up (an enum's ``.value`` is two Python calls)."""
_STATE_BY_OUTCOME = {
    Outcome.ACCEPTED: OperationState.SUCCEEDED,
    Outcome.PERMANENT_REJECTION: OperationState.REJECTED,
    Outcome.RETRYABLE_REJECTION: OperationState.RETRY_PENDING,
    Outcome.UNKNOWN: OperationState.OUTCOME_UNKNOWN,
}


def _event_type(outcome: Outcome, *, owns_state: bool, reconciled: bool) -> EventType:
    if not owns_state:
        return EventType(f"Late{outcome.value}Observation")
    if outcome is Outcome.ACCEPTED:
        return (
            EventType.PROVIDER_ACCEPTANCE_RECONCILED
            if reconciled
            else EventType.PROVIDER_ACCEPTANCE_CONFIRMED
        )
    if outcome is Outcome.UNKNOWN:
        return EventType.SUBMISSION_OUTCOME_UNKNOWN
    return EventType(outcome.value)  # PermanentRejection, RetryableRejection


def _details(observation: Observation, problem: str | None, reported: object) -> dict[str, Any]:
    details: dict[str, Any] = {"outcome": _OUTCOME_NAMES[observation.outcome]}
    if observation.provider_reference is not None:
        details["provider_reference"] = observation.provider_reference
    if problem is not None:
        details["unrecordable"] = problem
        if isinstance(reported, Outcome):
            details["reported_outcome"] = reported.value
    return details


def record_in(
    tx: Transaction,
    ledger: LedgerParts,
    attempt: PreparedAttempt | Attempt,
    observation: Observation,
    written: list[tuple[str, DispatchResult]],
    *,
    actor: str,
    reconciled: bool,
    problem: str | None,
    reported: object,
) -> DispatchResult:
    """Record a recordable ``observation`` of ``attempt`` in ``tx``; the recorded state.

    ``problem`` and ``reported`` describe a reply recorded as Unknown in its stead. The event's
    hash and the result are put in ``written``, so a lost COMMIT can be read back.
    """
    written.clear()
    operation = key(attempt.tenant_id, attempt.operation_id)
    attempt_key = {**operation, "attempt_id": attempt.attempt_id}
    # One read: the row, its attempt, and who else holds the reference an acceptance reports.
    reference = observation.provider_reference if observation.outcome is Outcome.ACCEPTED else None
    row = tx.one("operation_with_attempt", {**attempt_key, "provider_reference": reference})
    if row is None or not row["attempt_present"]:
        raise NotFound("no such operation attempt", **attempt_key)
    if observation.observation_id is not None and tx.one(
        "event_by_observation", {**operation, "observation_id": observation.observation_id}
    ):
        return result_from_row(row)  # this very observation is already recorded
    if observation.evidence is not None:
        store_evidence(tx, attempt.tenant_id, observation.evidence, now_us=now_us(ledger.clock))
    owns_state = row["active_attempt_id"] == attempt.attempt_id and row["state"] in _OWNING_STATES
    if owns_state and observation.outcome is Outcome.ACCEPTED:
        holder = row["reference_holder"]
        if holder is not None:
            # Two operations settled by one effect: flagged and left uncertain for a person,
            # never silently shared.
            log.warning(
                "provider reference of %s/%s is already held by %s: recorded as Unknown",
                attempt.tenant_id,
                attempt.operation_id,
                holder,
            )
            observation = replace(
                observation, outcome=Outcome.UNKNOWN, provider_reference=None, observation_id=None
            )
            problem, reported = f"provider_reference_held_by:{holder}", Outcome.ACCEPTED
    changes: dict[str, Any] = {}
    observed: dict[str, Any] | None = None  # stored on the attempt with the step, if it owns it
    if owns_state:
        new_state = _STATE_BY_OUTCOME[observation.outcome]
        if row["state"] == _MANUAL_REVIEW and observation.outcome is Outcome.UNKNOWN:
            new_state = OperationState.MANUAL_REVIEW
        changes["state"] = str(new_state)  # a StrEnum's str is its value
        if observation.outcome is Outcome.ACCEPTED:
            changes["provider_reference"] = observation.provider_reference
        if reconciled and observation.outcome is Outcome.UNKNOWN:
            changes["inconclusive_lookups"] = int(row["inconclusive_lookups"]) + 1
        observed = {
            "observation": _OUTCOME_NAMES[observation.outcome],
            "observed_reference": observation.provider_reference,
        }
    updated = write_transition(
        tx,
        row,
        actor=actor,
        event_type=_event_type(observation.outcome, owns_state=owns_state, reconciled=reconciled),
        now_us=now_us(ledger.clock),
        keys=ledger.settings.trail_keys,
        attempt_id=attempt.attempt_id,
        evidence_reference=observation.evidence_reference,
        details=_details(observation, problem, reported),
        observation_id=observation.observation_id,
        observed=observed,
        **changes,
    )
    crash_point("inside_record")
    result = result_from_row(updated)
    written.append((updated["last_event_hash"], result))
    return result


def record(
    ledger: LedgerParts,
    attempt: PreparedAttempt | Attempt,
    observation: Observation,
    *,
    actor: str,
    reconciled: bool,
) -> DispatchResult:
    """Record what the destination said about ``attempt`` (see :meth:`Ledger.record`)."""
    observation, problem, reported = recordable(observation)
    if problem is not None:
        log.warning(
            "unrecordable reply for %s/%s recorded as Unknown: %s",
            attempt.tenant_id,
            attempt.operation_id,
            problem,
        )
    written: list[tuple[str, DispatchResult]] = []
    body = functools.partial(
        record_in,
        ledger=ledger,
        attempt=attempt,
        observation=observation,
        written=written,
        actor=actor,
        reconciled=reconciled,
        problem=problem,
        reported=reported,
    )
    budget = ledger.settings.record_budget
    deadline = None if budget is None else time.monotonic() + budget.total_seconds()
    for settling in range(_SETTLE_PASSES):
        left = None if deadline is None else deadline - time.monotonic()
        try:
            # A row that moved on is read again and decided again: the store's own re-run,
            # on the one retry budget it keeps for this write.
            return ledger.store.write(
                body, label="record", budget_s=left, rerun_on=(ConcurrentModification,)
            )
        except CommitUncertain as uncertain:
            if not written:  # pragma: no cover - the body ran to its end before COMMIT
                raise
            event_hash, result = written[0]
            if landed(
                ledger.store, uncertain, key(attempt.tenant_id, attempt.operation_id), [event_hash]
            ):
                return result
            if settling + 1 == _SETTLE_PASSES or (
                deadline is not None and time.monotonic() >= deadline
            ):
                raise
    raise AssertionError("unreachable")  # pragma: no cover
