"""The event types of an operation's trail and the state each one leaves the operation in.

The trail is the truth and the ``operations`` row is a cache of it (docs/design.md, invariant 13):
the
state an operation is in is the one its chained events imply. :func:`implied_state` folds a trail
into that state, so the executor can refuse to dispatch an operation whose row was set to READY
by anything other than the ledger.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from effectledger.errors import InvalidTransition
from effectledger.model.operations import OperationState

__all__ = [
    "AUDIT_ONLY",
    "COMMITTING",
    "FREEING",
    "HOLDING",
    "STATE_AFTER",
    "TRANSITIONS",
    "EventType",
    "Transition",
    "implied_state",
    "render_markdown",
    "transition",
]


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
    TRAIL_RETAGGED = "TrailRetagged"
    CAPACITY_LIMIT_SET = "CapacityLimitSet"


S = OperationState
_ADMITTED = frozenset(S)
_OWNING = frozenset({S.IN_PROGRESS, S.OUTCOME_UNKNOWN, S.MANUAL_REVIEW})
_RECOVERABLE = frozenset({S.IN_PROGRESS, S.OUTCOME_UNKNOWN})
_BEFORE = frozenset({None})
_ANY: frozenset[OperationState | None] = frozenset({None, *S})


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """One row of the state machine: from which states a step may be taken, and where it goes.

    ``to_state`` ``None`` means the step changes no state (an audit-only event); ``from_states``
    holds ``None`` where the step happens before the operation exists.
    """

    step: str
    event: EventType
    from_states: frozenset[OperationState | None]
    to_state: OperationState | None
    actor: str
    meaning: str


TRANSITIONS: tuple[Transition, ...] = (
    Transition(
        step="propose",
        event=EventType.PROPOSAL_RECORDED,
        from_states=_BEFORE,
        to_state=None,
        actor="proposer",
        meaning="the model's proposal was validated and stored immutably with its digest",
    ),
    Transition(
        step="approve",
        event=EventType.APPROVAL_GRANTED,
        from_states=_ANY,
        to_state=None,
        actor="approver",
        meaning="an approver approved exactly the digest they were shown",
    ),
    Transition(
        step="deny",
        event=EventType.APPROVAL_DENIED,
        from_states=_BEFORE,
        to_state=None,
        actor="approver",
        meaning="an approver denied the proposal; the decision is final",
    ),
    Transition(
        step="preauthorize",
        event=EventType.PREAUTHORIZATION_APPLIED,
        from_states=_BEFORE,
        to_state=None,
        actor="policy",
        meaning="a bounded standing decision covered the proposal",
    ),
    Transition(
        step="refuse admission",
        event=EventType.ADMISSION_DENIED,
        from_states=_ANY,
        to_state=None,
        actor="requester",
        meaning="an admission was refused; nothing was spent",
    ),
    Transition(
        step="admit",
        event=EventType.OPERATION_ADMITTED,
        from_states=_BEFORE,
        to_state=S.READY,
        actor="requester",
        meaning="the operation was admitted: approval consumed, capacity held",
    ),
    Transition(
        step="release",
        event=EventType.OPERATION_RELEASED,
        from_states=frozenset({S.READY}),
        to_state=S.RELEASED,
        actor="requester",
        meaning="the dispatch-time recheck failed; released before any contact",
    ),
    Transition(
        step="claim",
        event=EventType.ATTEMPT_PREPARED,
        from_states=frozenset({S.READY}),
        to_state=S.IN_PROGRESS,
        actor="dispatch-worker",
        meaning="a worker committed its claim and attempt before contacting the destination",
    ),
    Transition(
        step="record accepted",
        event=EventType.PROVIDER_ACCEPTANCE_CONFIRMED,
        from_states=_OWNING,
        to_state=S.SUCCEEDED,
        actor="dispatch-worker",
        meaning="the destination confirmed it accepted the attempt",
    ),
    Transition(
        step="reconcile accepted",
        event=EventType.PROVIDER_ACCEPTANCE_RECONCILED,
        from_states=_OWNING,
        to_state=S.SUCCEEDED,
        actor="recovery-worker",
        meaning="a lookup by the persisted key found the destination had accepted it",
    ),
    Transition(
        step="record permanent rejection",
        event=EventType.PERMANENT_REJECTION,
        from_states=_OWNING,
        to_state=S.REJECTED,
        actor="dispatch-worker",
        meaning="the destination permanently rejected it; no effect",
    ),
    Transition(
        step="record retryable rejection",
        event=EventType.RETRYABLE_REJECTION,
        from_states=_OWNING,
        to_state=S.RETRY_PENDING,
        actor="dispatch-worker",
        meaning="the destination rejected it as retryable, proving nothing was done",
    ),
    Transition(
        step="record unknown",
        event=EventType.SUBMISSION_OUTCOME_UNKNOWN,
        from_states=_RECOVERABLE,
        to_state=S.OUTCOME_UNKNOWN,
        actor="dispatch-worker",
        meaning="whether the destination acted could not be established",
    ),
    Transition(
        step="record unknown in review",
        event=EventType.SUBMISSION_OUTCOME_UNKNOWN,
        from_states=frozenset({S.MANUAL_REVIEW}),
        to_state=None,
        actor="recovery-worker",
        meaning="an inconclusive answer leaves a manual review where it is",
    ),
    Transition(
        step="record late observation",
        event=EventType.LATE_ACCEPTED_OBSERVATION,
        from_states=_ADMITTED,
        to_state=None,
        actor="dispatch-worker",
        meaning="an acceptance arrived after it no longer decided the state",
    ),
    Transition(
        step="record late observation",
        event=EventType.LATE_PERMANENT_REJECTION_OBSERVATION,
        from_states=_ADMITTED,
        to_state=None,
        actor="dispatch-worker",
        meaning="a permanent rejection arrived after it no longer decided the state",
    ),
    Transition(
        step="record late observation",
        event=EventType.LATE_RETRYABLE_REJECTION_OBSERVATION,
        from_states=_ADMITTED,
        to_state=None,
        actor="dispatch-worker",
        meaning="a retryable rejection arrived after it no longer decided the state",
    ),
    Transition(
        step="record late observation",
        event=EventType.LATE_UNKNOWN_OBSERVATION,
        from_states=_ADMITTED,
        to_state=None,
        actor="dispatch-worker",
        meaning="an inconclusive answer arrived after it no longer decided the state",
    ),
    Transition(
        step="reserve lookup",
        event=EventType.RECONCILIATION_STARTED,
        from_states=_RECOVERABLE,
        to_state=None,
        actor="recovery-worker",
        meaning="a lookup slot was reserved and the next check pushed forward",
    ),
    Transition(
        step="escalate",
        event=EventType.MANUAL_REVIEW_ASSIGNED,
        from_states=_RECOVERABLE,
        to_state=S.MANUAL_REVIEW,
        actor="recovery-worker",
        meaning="the outcome went to a person, with an owner and a deadline",
    ),
    Transition(
        step="authorize retry",
        event=EventType.RETRY_AUTHORIZED,
        from_states=frozenset({S.RETRY_PENDING}),
        to_state=S.READY,
        actor="retry policy",
        meaning="an explicit retry policy returned it to READY with the same key",
    ),
    Transition(
        step="correct",
        event=EventType.AUDIT_CORRECTION,
        from_states=_ANY,
        to_state=None,
        actor="auditor",
        meaning="an auditor appended a correction of an earlier event",
    ),
    Transition(
        step="re-tag",
        event=EventType.TRAIL_RETAGGED,
        from_states=frozenset(
            {None, S.READY, S.IN_PROGRESS, S.RETRY_PENDING, S.OUTCOME_UNKNOWN, S.MANUAL_REVIEW}
        ),
        to_state=None,
        actor="key rotation",
        meaning="the trail so far was checked and vouched for under the current trail key",
    ),
    Transition(
        step="set capacity limit",
        event=EventType.CAPACITY_LIMIT_SET,
        from_states=_BEFORE,
        to_state=None,
        actor="capacity admin",
        meaning="a pool's capacity limit changed (on the pool's own trail)",
    ),
)
"""The state machine, written once: the ledger enforces it, explain and the docs read it."""

_BY_EVENT: dict[tuple[EventType, OperationState | None], Transition] = {
    (row.event, state): row for row in TRANSITIONS for state in row.from_states
}

HOLDING = frozenset({S.READY, S.IN_PROGRESS, S.RETRY_PENDING, S.OUTCOME_UNKNOWN, S.MANUAL_REVIEW})
"""States whose operations hold their capacity units (an explicit retry may still act)."""
COMMITTING = frozenset({S.SUCCEEDED})
"""States whose operations commit their units: the effect happened."""
FREEING = frozenset({S.REJECTED, S.RELEASED})
"""States whose operations free their units: no effect happened."""

STATE_AFTER: dict[EventType, OperationState] = {
    row.event: row.to_state for row in TRANSITIONS if row.to_state is not None
}
"""The state an event leaves its operation in (events that change the state)."""

AUDIT_ONLY = frozenset(
    event
    for event in EventType
    if all(row.to_state is None for row in TRANSITIONS if row.event is event)
)
"""Events that never change the operation's state."""


def transition(event_type: str, state: OperationState | None) -> Transition:
    """The row that lets ``event_type`` be written in ``state``.

    Raises :class:`~effectledger.errors.InvalidTransition` if no row allows it (an unknown event
    type included).
    """
    # A member, or its stored name: a StrEnum hashes and compares as its value.
    if type(event_type) is EventType or type(event_type) is str:
        key = (event_type, state)
        if key in _BY_EVENT:
            return _BY_EVENT[key]
    try:
        return _BY_EVENT[(EventType(event_type), state)]
    except (KeyError, ValueError):
        raise InvalidTransition(
            f"{event_type} cannot be recorded for an operation in state {state}",
            event_type=event_type,
            state=None if state is None else state.value,
        ) from None


def implied_state(event_types: Iterable[str]) -> OperationState | None:
    """The state a trail of event types (in sequence order) leaves its operation in.

    ``None`` before the operation was admitted. Raises ``ValueError`` for an event the table does
    not allow where it stands (an unknown event type included): such a trail cannot be trusted.
    """
    state: OperationState | None = None
    by_event = _BY_EVENT
    for name in event_types:
        try:  # the stored name of a known event: looked up in place (a StrEnum hashes as it)
            row = by_event[(name, state)]  # type: ignore[index]
        except (KeyError, TypeError):
            try:
                row = transition(name, state)
            except InvalidTransition as exc:
                raise ValueError(exc.message) from None
        if row.to_state is not None:
            state = row.to_state
    return state


def render_markdown() -> str:
    """The state diagram and the event list as Markdown, generated from :data:`TRANSITIONS`.

    ``docs/states.md`` holds exactly this text between its markers (a test compares them).
    """
    lines = ["```mermaid", "stateDiagram-v2"]
    seen: set[tuple[str, str, str]] = set()
    for row in TRANSITIONS:
        if row.to_state is None:
            continue
        for state in sorted(row.from_states, key=lambda s: "" if s is None else s.value):
            edge = ("[*]" if state is None else state.value, row.to_state.value, row.step)
            if edge not in seen:
                seen.add(edge)
                lines.append(f"    {edge[0]} --> {edge[1]}: {edge[2]}")
    lines += ["```", "", "| event | step | from | to | by | meaning |", "|---|---|---|---|---|---|"]
    for row in TRANSITIONS:
        origin = ", ".join(
            "(before admission)" if state is None else state.value
            for state in sorted(row.from_states, key=lambda s: "" if s is None else s.value)
        )
        if row.from_states == frozenset({None, *OperationState}):
            origin = "any"
        elif row.from_states == frozenset(OperationState):
            origin = "any admitted state"
        target = "unchanged" if row.to_state is None else row.to_state.value
        lines.append(
            f"| `{row.event.value}` | {row.step} | {origin} | {target} | {row.actor} | "
            f"{row.meaning} |"
        )
    lines += [
        "",
        "Capacity: "
        + ", ".join(sorted(s.value for s in HOLDING))
        + " hold their units; "
        + ", ".join(sorted(s.value for s in COMMITTING))
        + " commits them; "
        + ", ".join(sorted(s.value for s in FREEING))
        + " free them.",
    ]
    return "\n".join(lines) + "\n"
