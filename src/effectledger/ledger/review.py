"""Manual review, settled: the review owner records what the destination's own records show."""

from __future__ import annotations

import effectledger.ledger.reads as reads
import effectledger.ledger.recording as recording
from effectledger.errors import InvalidInput, InvalidTransition, NotFound, NotPermitted
from effectledger.ledger.settings import LedgerParts
from effectledger.model.operations import (
    Context,
    DispatchResult,
    Observation,
    OperationState,
    Outcome,
)

__all__ = ["resolve"]


def resolve(
    ledger: LedgerParts, context: Context, operation_id: str, observation: Observation
) -> DispatchResult:
    """Settle a MANUAL_REVIEW operation of ``context``'s tenant with an authoritative answer.

    Only the review owner (as actor or role) may resolve, and only with ``Accepted`` (with its
    references) or ``PermanentRejection``; the answer is recorded as a reconciled observation
    of the active attempt, appended to the trail like any other.
    """
    found = reads.get(ledger.store, context, operation_id)
    if found.state is not OperationState.MANUAL_REVIEW:
        raise InvalidTransition(
            f"only a MANUAL_REVIEW operation is resolved here; it is {found.state.value}",
            operation_id=found.operation_id,
        )
    owner = found.review_owner
    if owner is None or (context.actor_id != owner and owner not in context.roles):
        raise NotPermitted(f"only the review owner {owner!r} may resolve this operation")
    if observation.outcome not in (Outcome.ACCEPTED, Outcome.PERMANENT_REJECTION):
        raise InvalidInput("a manual review is resolved by Accepted or PermanentRejection")
    attempts = reads.attempts(ledger.store, context, found.operation_id)
    active = [a for a in attempts if a.attempt_id == found.active_attempt_id]
    if not active:
        raise NotFound("the operation has no active attempt", operation_id=found.operation_id)
    return recording.record(ledger, active[0], observation, actor=context.actor_id, reconciled=True)
