"""The event types of an operation's trail and the state each one leaves the operation in.

The trail is the truth and the ``operations`` row is a cache of it (DESIGN.md invariant 13): the
state an operation is in is the one its chained events imply. :func:`implied_state` folds a trail
into that state, so the executor can refuse to dispatch an operation whose row was set to READY
by anything other than the ledger.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from effectledger.model import OperationState

__all__ = ["AUDIT_ONLY", "STATE_AFTER", "EventType", "implied_state"]


class EventType(enum.StrEnum):
    """Every event type the ledger writes."""

    PROPOSAL_RECORDED = "ProposalRecorded"
    APPROVAL_GRANTED = "ApprovalGranted"
    APPROVAL_DENIED = "ApprovalDenied"
    PREAUTHORIZATION_APPLIED = "PreauthorizationApplied"
    ADMISSION_DENIED = "AdmissionDenied"
    OPERATION_ADMITTED = "OperationAdmitted"
    OPERATION_RELEASED = "OperationReleased"
    ATTEMPT_PREPARED = "AttemptPrepared"
    PROVIDER_ACCEPTANCE_CONFIRMED = "ProviderAcceptanceConfirmed"
    PROVIDER_ACCEPTANCE_RECONCILED = "ProviderAcceptanceReconciled"
    PERMANENT_REJECTION = "PermanentRejection"
    RETRYABLE_REJECTION = "RetryableRejection"
    SUBMISSION_OUTCOME_UNKNOWN = "SubmissionOutcomeUnknown"
    LATE_ACCEPTED_OBSERVATION = "LateAcceptedObservation"
    LATE_PERMANENT_REJECTION_OBSERVATION = "LatePermanentRejectionObservation"
    LATE_RETRYABLE_REJECTION_OBSERVATION = "LateRetryableRejectionObservation"
    LATE_UNKNOWN_OBSERVATION = "LateUnknownObservation"
    RECONCILIATION_STARTED = "ReconciliationStarted"
    MANUAL_REVIEW_ASSIGNED = "ManualReviewAssigned"
    RETRY_AUTHORIZED = "RetryAuthorized"
    AUDIT_CORRECTION = "AuditCorrection"
    CAPACITY_LIMIT_SET = "CapacityLimitSet"


STATE_AFTER: dict[EventType, OperationState] = {
    EventType.OPERATION_ADMITTED: OperationState.READY,
    EventType.OPERATION_RELEASED: OperationState.RELEASED,
    EventType.ATTEMPT_PREPARED: OperationState.IN_PROGRESS,
    EventType.PROVIDER_ACCEPTANCE_CONFIRMED: OperationState.SUCCEEDED,
    EventType.PROVIDER_ACCEPTANCE_RECONCILED: OperationState.SUCCEEDED,
    EventType.PERMANENT_REJECTION: OperationState.REJECTED,
    EventType.RETRYABLE_REJECTION: OperationState.RETRY_PENDING,
    EventType.SUBMISSION_OUTCOME_UNKNOWN: OperationState.OUTCOME_UNKNOWN,
    EventType.MANUAL_REVIEW_ASSIGNED: OperationState.MANUAL_REVIEW,
    EventType.RETRY_AUTHORIZED: OperationState.READY,
}
"""The state an event leaves its operation in (events that change the state)."""

AUDIT_ONLY = frozenset(EventType) - STATE_AFTER.keys()
"""Events that record something without changing the operation's state."""


def implied_state(event_types: Iterable[str]) -> OperationState | None:
    """The state a trail of event types (in sequence order) leaves its operation in.

    ``None`` before the operation was admitted. An Unknown observation leaves MANUAL_REVIEW as it
    is (only an authoritative answer resolves it). Raises ``ValueError`` for an event type the
    ledger never writes: an unknown event cannot be trusted to mean nothing.
    """
    state: OperationState | None = None
    for name in event_types:
        kind = EventType(name)
        after = STATE_AFTER.get(kind)
        if after is None:
            continue
        if kind is EventType.SUBMISSION_OUTCOME_UNKNOWN and state is OperationState.MANUAL_REVIEW:
            continue
        state = after
    return state
