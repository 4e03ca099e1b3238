"""Corrections: the append-only trail is corrected by a new event, never rewritten."""

from __future__ import annotations

from effectledger.errors import InvalidInput, NotFound, NotPermitted
from effectledger.events.record import event_from_row
from effectledger.ledger.settings import AUDITOR_ROLE, LedgerParts
from effectledger.ledger.trail import key, now_us, write_transition
from effectledger.ledger.validation import reference
from effectledger.model.operations import AuditEvent, Context, Row, validate_identifier
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = ["check_correction", "correct_event", "correct_event_in"]


def check_correction(context: Context, operation_id: str, event_id: str, reason: str) -> None:
    """Refuse a correction the context may not make, or one with malformed arguments."""
    if AUDITOR_ROLE not in context.roles:
        raise NotPermitted(f"correcting the audit trail needs the {AUDITOR_ROLE!r} role")
    validate_identifier(operation_id, "operation_id")
    validate_identifier(event_id, "event_id")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("a correction needs a reason", field="reason")
    reference(reason, "reason")


def correct_event_in(
    tx: Transaction,
    ledger: LedgerParts,
    context: Context,
    operation_id: str,
    *,
    event_id: str,
    reason: str,
) -> Row:
    """Append the ``AuditCorrection`` of ``event_id`` in ``tx``; the event row written."""
    operation = key(context.tenant_id, operation_id)
    row = tx.one("operation_get", operation)
    if row is None:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    if tx.one("event_get", {**operation, "event_id": event_id}) is None:
        raise NotFound(f"operation {operation_id} has no event {event_id}", event_id=event_id)
    updated = write_transition(
        tx,
        row,
        actor=context.actor_id,
        event_type=EventType.AUDIT_CORRECTION,
        now_us=now_us(ledger.clock),
        keys=ledger.settings.trail_keys,
        details={"corrects": event_id, "reason": reason},
    )
    written = tx.one("event_at_sequence", {**operation, "sequence": updated["event_sequence"]})
    if written is None:  # pragma: no cover - written in this transaction
        raise NotFound("the correction vanished")
    return written


def correct_event(
    ledger: LedgerParts, context: Context, operation_id: str, *, event_id: str, reason: str
) -> AuditEvent:
    """Correct ``event_id`` in its own transaction (see :meth:`Ledger.correct_event`)."""
    check_correction(context, operation_id, event_id, reason)
    row = ledger.store.write(
        lambda tx: correct_event_in(
            tx, ledger, context, operation_id, event_id=event_id, reason=reason
        ),
        label="correct_event",
    )
    return event_from_row(row)
