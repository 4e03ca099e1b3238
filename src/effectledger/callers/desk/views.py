"""What the operation, review and capacity pages show, read through the one object.

Each function takes the :class:`EffectLedger` and the reviewer's context and returns plain
values for a template: no page reads beneath the object's methods, so each applies the same
access rule as every other caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from effectledger.app import EffectLedger
from effectledger.errors import EffectLedgerError
from effectledger.events.chain import verify_chain
from effectledger.model import AuditEvent, Context, Operation, OperationState
from effectledger.model.review import ProposalReview, ReviewState
from effectledger.model.states import TRANSITIONS, EventType, transition

__all__ = [
    "Decision",
    "MachineRow",
    "OperationView",
    "ProposalOutcome",
    "capacity_view",
    "manual_reviews",
    "operation_view",
    "proposal_outcome",
]

_UNRESOLVED = frozenset(
    {OperationState.IN_PROGRESS, OperationState.OUTCOME_UNKNOWN, OperationState.MANUAL_REVIEW}
)
MAX_REVIEWS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineRow:
    """One state-changing row of the transition table, and whether this operation took it."""

    step: str
    event: str
    from_states: tuple[str, ...]
    to_state: str
    meaning: str
    taken: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationView:
    """Everything the operation page shows."""

    operation: Operation
    events: list[AuditEvent]
    sentences: list[Any]
    chain_ok: bool
    chain_message: str
    path: list[str]
    machine: list[MachineRow]
    states: list[tuple[str, bool, bool]] = field(default_factory=list)
    unresolved: bool = False
    next_check: datetime | None = None
    owner: str | None = None
    may_resolve: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One recorded decision on a proposal, as its trail has it: who, which way, when."""

    actor: str
    granted: bool
    at: datetime
    sequence: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalOutcome:
    """What a proposal's page shows of its outcome, and which decisions it still offers.

    ``may_approve`` and ``may_deny`` are true only when that decision would be accepted now
    (:meth:`~effectledger.model.review.ProposalReview.refusal_to`): a denied, expired or
    admitted proposal offers neither, one with every approval it needs offers only a denial.
    """

    decisions: list[Decision]
    operation: Operation | None
    admitted_at: datetime | None
    may_approve: bool
    may_deny: bool


_DECISIONS = {EventType.APPROVAL_GRANTED.value: True, EventType.APPROVAL_DENIED.value: False}


def proposal_outcome(
    ledger: EffectLedger, context: Context, review: ProposalReview
) -> ProposalOutcome:
    """The decisions on the reviewed proposal, its operation once admitted, and what it offers."""
    proposal = review.proposal
    events = ledger.events(context, proposal.operation_id)
    decisions = [
        Decision(
            actor=event.actor,
            granted=_DECISIONS[event.event_type],
            at=event.recorded_at,
            sequence=event.sequence,
        )
        for event in events
        if event.event_type in _DECISIONS
    ]
    admitted_at = next(
        (e.recorded_at for e in events if e.event_type == EventType.OPERATION_ADMITTED.value),
        None,
    )
    operation = None
    if review.state is ReviewState.ADMITTED:
        operation = ledger.operation(context, proposal.operation_id)
    return ProposalOutcome(
        decisions=decisions,
        operation=operation,
        admitted_at=admitted_at,
        may_approve=review.refusal_to(granting=True) is None,
        may_deny=review.refusal_to(granting=False) is None,
    )


def operation_view(ledger: EffectLedger, context: Context, operation_id: str) -> OperationView:
    """The operation, its trail as a timeline, its path through the table and its chain check."""
    operation = ledger.operation(context, operation_id)
    events = ledger.events(context, operation_id)
    sentences = ledger.explain(context, operation_id)
    try:
        verify_chain(events, head=operation.last_event_hash)
        chain_ok, chain_message = (
            True,
            (
                f"verified: {len(events)} events, each linked to the hash of the one before, "
                "ending at the operation's latest hash"
            ),
        )
    except EffectLedgerError as exc:
        chain_ok, chain_message = False, f"broken: {exc.message}"
    taken: set[tuple[str, str | None]] = set()
    path: list[str] = []
    state: OperationState | None = None
    for event in events:
        try:
            row = transition(event.event_type, state)
        except EffectLedgerError:
            break
        if row.to_state is not None:
            taken.add((row.event.value, row.to_state.value))
            state = row.to_state
            path.append(state.value)
    machine = [
        MachineRow(
            step=row.step,
            event=row.event.value,
            from_states=tuple(sorted(s.value for s in row.from_states if s is not None))
            or ("(new)",),
            to_state=row.to_state.value,
            meaning=row.meaning,
            taken=(row.event.value, row.to_state.value) in taken,
        )
        for row in TRANSITIONS
        if row.to_state is not None
    ]
    visited = set(path)
    states = [(s.value, s.value in visited, s is operation.state) for s in OperationState]
    unresolved = operation.state in _UNRESOLVED
    next_check = None
    if unresolved and operation.state is not OperationState.MANUAL_REVIEW:
        attempts = ledger.ledger.attempts(context, operation_id)
        active = [a for a in attempts if a.attempt_id == operation.active_attempt_id]
        next_check = active[0].recover_after if active else None
    owner = operation.review_owner
    if unresolved and owner is None:
        owner = "the recovery worker"
    may_resolve = operation.state is OperationState.MANUAL_REVIEW and (
        operation.review_owner is not None
        and (operation.review_owner == context.actor_id or operation.review_owner in context.roles)
    )
    return OperationView(
        operation=operation,
        events=events,
        sentences=list(sentences),
        chain_ok=chain_ok,
        chain_message=chain_message,
        path=path,
        machine=machine,
        states=states,
        unresolved=unresolved,
        next_check=next_check,
        owner=owner,
        may_resolve=may_resolve,
    )


def manual_reviews(ledger: EffectLedger, context: Context) -> list[dict[str, Any]]:
    """The tenant's operations in MANUAL_REVIEW, soonest deadline first, with their evidence."""
    entries = []
    for op in ledger.manual_reviews(context, limit=MAX_REVIEWS):
        events = ledger.events(context, op.operation_id)
        evidence = [e.evidence_reference for e in events if e.evidence_reference]
        entries.append(
            {
                "operation": op,
                "lookups": op.inconclusive_lookups,
                "evidence": evidence[-3:],
                "mine": op.review_owner == context.actor_id or op.review_owner in context.roles,
            }
        )
    return entries


def capacity_view(ledger: EffectLedger, context: Context) -> list[dict[str, Any]]:
    """Held, committed and free units of each pool the application's actions draw on."""
    pools = sorted({action.pool for action in ledger.registry})
    shown = []
    for pool in pools:
        usage = ledger.capacity(context, pool)
        total = usage.limit if usage.limit is not None else max(usage.held + usage.committed, 1)
        free = usage.available

        def share(units: int, total: int = total) -> int:
            return min(max(round(300 * units / total), 0), 300) if total else 0

        shown.append(
            {
                "pool": pool,
                "usage": usage,
                "free": free,
                "held_width": share(usage.held),
                "committed_width": share(usage.committed),
                "free_width": share(free or 0),
            }
        )
    return shown
