"""A deterministic, plain-language account of one operation, every sentence citing its event.

:func:`explain` turns an operation's audit events (from the database or from a verified bundle)
into :class:`Sentence` values. Each sentence rests on exactly one event and names it by sequence
number and event id; the same events always give the same text. Known event types get a specific
sentence; any other type is described generically from its recorded fields, and still cited.

The last sentence states where the operation stands as of its latest state-changing event. An
operation that is IN_PROGRESS, OUTCOME_UNKNOWN or MANUAL_REVIEW is stated as **unresolved**: the
destination may or may not have performed the effect (docs/design.md, invariant 12).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from effectledger.audit.bundles.blobs import require_blobs
from effectledger.display import printable
from effectledger.errors import AuditVerificationFailed, InvalidInput, InvalidTransition, NotFound
from effectledger.events.authentication import TrailKeys
from effectledger.events.authenticity import unauthentic
from effectledger.events.chain import verify_chain, verify_sealed
from effectledger.events.record import event_from_row
from effectledger.model.operations import (
    AuditEvent,
    OperationState,
    Row,
    from_micros,
    validate_identifier,
)
from effectledger.model.states import EventType, transition
from effectledger.store import Store, Transaction

__all__ = ["Sentence", "explain", "explain_stored", "refuse_unauthentic", "render"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sentence:
    """One sentence of an explanation and the event it rests on."""

    text: str
    sequence: int
    event_id: str

    def render(self) -> str:
        """The sentence with its citation: ``text [event <sequence>, <event id>]``."""
        return f"{self.text} [event {self.sequence}, {printable(self.event_id)}]"


def _when(moment: datetime) -> str:
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + " UTC"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _evidence(event: AuditEvent) -> str:
    parts = []
    if event.evidence_reference:
        parts.append(f"evidence {event.evidence_reference}")
    if event.observation_id:
        parts.append(f"observation id {event.observation_id}")
    return f" ({', '.join(parts)})" if parts else ""


def _attempt(event: AuditEvent) -> str:
    return f"attempt {event.attempt_id}" if event.attempt_id else "its attempt"


def _describe(event: AuditEvent, sequences: Mapping[str, int]) -> str:
    at, actor, details = _when(event.recorded_at), event.actor, event.details
    kind = event.event_type
    if kind == EventType.OPERATION_ADMITTED:
        return (
            f"At {at}, {actor} admitted operation {event.operation_id} (revision "
            f"{_value(details.get('revision', '?'))}, command fingerprint "
            f"{_value(details.get('fingerprint', '?'))}) on the authority of "
            f"{event.evidence_reference or 'an unrecorded decision'}."
        )
    if kind in (EventType.PROVIDER_ACCEPTANCE_CONFIRMED, EventType.PROVIDER_ACCEPTANCE_RECONCILED):
        how = (
            "a lookup by the persisted idempotency key found that the destination had accepted"
            if kind == EventType.PROVIDER_ACCEPTANCE_RECONCILED
            else "the destination confirmed it accepted"
        )
        return (
            f"At {at}, {how} {_attempt(event)} with provider reference "
            f"{_value(details.get('provider_reference', 'none'))}{_evidence(event)}."
        )
    if kind == EventType.SUBMISSION_OUTCOME_UNKNOWN:
        unrecordable = details.get("unrecordable")
        reply = ""
        if unrecordable is not None:
            reply = (
                f"; the destination's {_value(details.get('reported_outcome', 'reply'))} reply "
                f"could not be recorded ({_value(unrecordable)})"
            )
        return (
            f"At {at}, {actor} could not establish whether the destination performed "
            f"{_attempt(event)}{_evidence(event)}{reply}: the outcome became unknown."
        )
    if kind.startswith("Late") and kind.endswith("Observation"):
        return (
            f"At {at}, a late {_value(details.get('outcome', kind[4:-11]))} observation for "
            f"{_attempt(event)} arrived after it no longer decided the state{_evidence(event)}; "
            "it was recorded and changed nothing."
        )
    if kind == EventType.RECONCILIATION_STARTED:
        due = details.get("next_check_us")
        then = ""
        if isinstance(due, int):
            then = f"; the next check is due at {_when(from_micros(due))}"
        return f"At {at}, {actor} reserved a lookup of {_attempt(event)} at the destination{then}."
    if kind == EventType.MANUAL_REVIEW_ASSIGNED:
        deadline = details.get("deadline_us")
        due = f", due by {_when(from_micros(deadline))}" if isinstance(deadline, int) else ""
        return (
            f"At {at}, {actor} escalated it to manual review by "
            f"{_value(details.get('owner', 'an unnamed owner'))}{due}, because "
            f"{_value(details.get('reason', 'no reason was recorded'))}."
        )
    if kind == EventType.OPERATION_RELEASED:
        reason = details.get("reason")
        why = f" because {_value(reason)}" if reason is not None else ""
        return (
            f"At {at}, {actor} released it before any contact with the destination{why}; its "
            "capacity was freed."
        )
    if kind == EventType.AUDIT_CORRECTION:
        target = _value(details.get("corrects", "?"))
        cited = f"event {target}"
        if target in sequences:
            cited = f"event {sequences[target]} ({target})"
        return (
            f"At {at}, {actor} recorded a correction of {cited}: "
            f"{_value(details.get('reason', 'no reason was recorded'))}. The corrected event "
            "itself is unchanged."
        )
    return _templated(event, at) or _generic(event, at)


def _state_after(event_type: str, state: OperationState | None) -> OperationState | None:
    """The state the transition table says ``event_type`` leads to from ``state``, if it moves.

    An event the table does not allow there (a trail from elsewhere, a newer version) is
    described but moves nothing: explain states what the events say, and verify judges them.
    """
    try:
        return transition(event_type, state).to_state
    except InvalidTransition:
        return None


# The sentences that are one template. ``{at}``, ``{actor}``, ``{attempt}`` and ``{evidence}``
# come from the event; every other field is its detail of that name ("?" when it is missing).
_SENTENCES: dict[str, str] = {
    EventType.ATTEMPT_PREPARED: (
        "At {at}, {actor} claimed it for {attempt} and committed the claim before contacting the "
        "destination."
    ),
    EventType.PERMANENT_REJECTION: (
        "At {at}, the destination permanently rejected {attempt}{evidence}; the effect did not "
        "happen."
    ),
    EventType.RETRYABLE_REJECTION: (
        "At {at}, the destination rejected {attempt} as retryable{evidence}; the effect did not "
        "happen and a retry needs explicit authorization."
    ),
    EventType.RETRY_AUTHORIZED: (
        "At {at}, {actor} authorized retry {retry} of {max_retries}; the operation returned to "
        "READY with the same idempotency key."
    ),
    EventType.PROPOSAL_RECORDED: (
        "At {at}, {actor} proposed it as proposal {proposal_id} with digest {digest} for {units} "
        "unit(s){evidence}; nothing was authorized by proposing."
    ),
    EventType.APPROVAL_GRANTED: (
        "At {at}, {actor} approved exactly the proposal with digest {digest} "
        "(approval {approval_id})."
    ),
    EventType.APPROVAL_DENIED: (
        "At {at}, {actor} denied the proposal with digest {digest} "
        "(decision {approval_id}); a denial is final."
    ),
    EventType.PREAUTHORIZATION_APPLIED: (
        "At {at}, the standing decision {actor} covered the proposal with digest {digest} "
        "(approval {approval_id}); no person approved it."
    ),
    EventType.ADMISSION_DENIED: (
        "At {at}, {actor} asked to admit it and was refused because {reason}; nothing was spent."
    ),
    EventType.TRAIL_RETAGGED: (
        "At {at}, {actor} checked the trail through event {through} and vouched for it under "
        "trail key {key_id} (replacing {replaces}); no event was changed."
    ),
    EventType.CAPACITY_LIMIT_SET: (
        "At {at}, {actor} set the limit of pool {pool} to {limit_units} unit(s) "
        "(before: {previous_units})."
    ),
}
_MISSING_DETAILS: dict[str, Any] = {
    "units": 0,
    "reason": "no reason was recorded",
    "previous_units": None,
}


class _Fields(dict[str, str]):
    """An event's fields for a sentence template, its details filled in as they are asked for."""

    def __init__(self, event: AuditEvent, at: str) -> None:
        super().__init__(
            at=at, actor=event.actor, attempt=_attempt(event), evidence=_evidence(event)
        )
        self._details = event.details

    def __missing__(self, name: str) -> str:
        return _value(self._details.get(name, _MISSING_DETAILS.get(name, "?")))


def _templated(event: AuditEvent, at: str) -> str | None:
    """The sentence of an event whose kind has a template, or ``None`` for other kinds."""
    template = _SENTENCES.get(event.event_type)
    return None if template is None else template.format_map(_Fields(event, at))


def _generic(event: AuditEvent, at: str) -> str:
    parts = [f"At {at}, {event.actor} recorded an event of type {event.event_type}"]
    if event.attempt_id:
        parts.append(f" for attempt {event.attempt_id}")
    if event.details:
        fields = ", ".join(f"{key} {_value(event.details[key])}" for key in sorted(event.details))
        parts.append(f" with {fields}")
    return "".join(parts) + _evidence(event) + "."


def _standing(state: OperationState | None, last: AuditEvent, reference: str | None) -> str:
    if state is None:
        return "The operation has not been admitted; no effect has been attempted."
    if state is OperationState.SUCCEEDED:
        return (
            "The outcome is resolved: the operation SUCCEEDED and the destination holds the "
            f"effect under provider reference {reference or 'unrecorded'}."
        )
    if state is OperationState.REJECTED:
        return "The outcome is resolved: the operation was REJECTED and no effect happened."
    if state is OperationState.RELEASED:
        return "The outcome is resolved: the operation was RELEASED before any contact."
    if state is OperationState.READY:
        return "The operation is READY: admitted, not yet dispatched; no effect was attempted."
    if state is OperationState.RETRY_PENDING:
        return (
            "The operation is RETRY_PENDING: no effect happened so far, and it is only retried "
            "if a retry policy authorizes it."
        )
    if state is OperationState.IN_PROGRESS:
        return (
            f"The outcome is unresolved: the operation is IN_PROGRESS with {_attempt(last)} "
            "claimed and no answer recorded, so the destination may or may not have performed "
            "the effect."
        )
    if state is OperationState.MANUAL_REVIEW:
        return (
            "The outcome is unresolved: the operation awaits MANUAL_REVIEW, and the destination "
            "may or may not have performed the effect."
        )
    return (
        "The outcome is unresolved: the operation is OUTCOME_UNKNOWN, so the destination may or "
        "may not have performed the effect until a lookup or a reviewer settles it."
    )


def explain(events: Sequence[AuditEvent]) -> list[Sentence]:
    """Explain one operation's events: one cited sentence per event, then its standing.

    ``events`` must belong to one operation (any order; they are taken in sequence order).
    Raises :class:`~effectledger.errors.InvalidInput` for no events or several operations.
    """
    if not events:
        raise InvalidInput("there are no events to explain")
    if len({(event.tenant_id, event.operation_id) for event in events}) != 1:
        raise InvalidInput("explain one operation's events at a time")
    ordered = sorted(events, key=lambda event: event.sequence)
    sequences = {event.event_id: event.sequence for event in ordered}
    sentences: list[Sentence] = []
    state: OperationState | None = None
    deciding: AuditEvent | None = None
    reference: str | None = None
    for event in ordered:
        sentences.append(
            Sentence(
                # Everything recorded may hold text from outside: shown, never obeyed.
                text=printable(_describe(event, sequences)),
                sequence=event.sequence,
                event_id=event.event_id,
            )
        )
        new_state = _state_after(event.event_type, state)
        if new_state is not None:
            state, deciding = new_state, event
            if new_state is OperationState.SUCCEEDED:
                found = event.details.get("provider_reference")
                reference = found if isinstance(found, str) else None
    cited = deciding or ordered[-1]
    sentences.append(
        Sentence(
            text=printable(_standing(state, cited, reference)),
            sequence=cited.sequence,
            event_id=cited.event_id,
        )
    )
    return sentences


def explain_stored(
    store: Store, tenant_id: str, operation_id: str, *, trail_keys: TrailKeys | None = None
) -> list[Sentence]:
    """Explain an operation from the database, after verifying its whole hash chain (and, with
    ``trail_keys``, every event's trail tag).

    The events and the operation row are read in one snapshot; the chain must be unbroken and
    end at the operation's recorded latest hash (so deleting its last events is noticed), or
    :class:`~effectledger.errors.ChainBreak` is raised and nothing is explained. An operation
    that has only a proposal's events so far has no row, and its chain is checked without a
    head. An event changed after the log sealed it (even re-hashed, its later links too) raises
    :class:`~effectledger.errors.ChainBreak` as well, and an event citing an evidence blob the
    store no longer holds :class:`~effectledger.errors.EvidenceMissing`. With ``trail_keys``,
    an event they do not authenticate (untagged, or tagged by no key of theirs: written by
    someone without the key) raises :class:`~effectledger.errors.AuditVerificationFailed`
    (``event_not_authentic``) naming each such event, and nothing is told as fact. Raises
    :class:`~effectledger.errors.NotFound` for an operation with no events.
    """
    key = {
        "tenant_id": validate_identifier(tenant_id, "tenant_id"),
        "operation_id": validate_identifier(operation_id, "operation_id"),
    }

    def read(tx: Transaction) -> tuple[list[Row], Row | None]:
        rows = tx.all("events_for_operation", key)
        require_blobs(tx, key["tenant_id"], rows)  # a cited blob that vanished is not told
        return rows, tx.one("operation_get", key)

    rows, operation = store.read(read)
    events = [event_from_row(row) for row in rows]
    if not events:
        raise NotFound(f"no events of operation {operation_id}", operation_id=operation_id)
    verify_chain(events, head=None if operation is None else operation["last_event_hash"])
    verify_sealed(rows)  # a story rewritten after sealing is not told
    if trail_keys is not None:
        refuse_unauthentic(rows, trail_keys)
    return explain(events)


def refuse_unauthentic(rows: Sequence[Row], trail_keys: TrailKeys) -> None:
    """Raise ``event_not_authentic`` naming every stored event of ``rows`` that ``trail_keys``
    do not authenticate (its sequence, id, type and why); nothing when all are authentic."""
    found: list[dict[str, Any]] = []
    for row in rows:
        problem = unauthentic(trail_keys, row)
        if problem is not None:
            found.append(
                {
                    "sequence": int(row["sequence"]),
                    "event_id": str(row["event_id"]),
                    "event_type": str(row["event_type"]),
                    "problem": problem,
                }
            )
    if not found:
        return
    named = ", ".join(
        f"{item['sequence']} ({printable(str(item['event_type']))}, {item['problem']})"
        for item in found
    )
    operation = printable(str(rows[0]["operation_id"]))
    raise AuditVerificationFailed(
        f"operation {operation}: event(s) {named} are not authenticated by the ledger's trail "
        "key; they were not written by the ledger and are not told as fact",
        reason="event_not_authentic",
        operation_id=str(rows[0]["operation_id"]),
        events=found,
    )


def render(sentences: Sequence[Sentence]) -> str:
    """The explanation as text, one cited sentence per line."""
    return "".join(sentence.render() + "\n" for sentence in sentences)
