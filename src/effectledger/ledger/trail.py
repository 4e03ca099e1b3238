"""The trail kernel: locks, ids, and the one way an event joins an operation's trail.

Every event is hash-linked to the one before it under the same operation id. A step that changes
an admitted operation goes through :func:`write_transition`, which updates the row under its
version (a stale writer changes nothing) and appends exactly one event in the same transaction;
what happens around admission goes through :func:`append_event`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from effectledger.clock import Clock
from effectledger.errors import ConcurrentModification, InvalidInput, InvalidTransition
from effectledger.events.authentication import TrailKeys
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import hash_event_stored
from effectledger.ledger.settings import LedgerParts
from effectledger.model.operations import (
    OperationState,
    Row,
    validate_identifier,
)
from effectledger.model.states import EventType, transition
from effectledger.store import Transaction

__all__ = [
    "RESERVED_PREFIXES",
    "append_event",
    "key",
    "lock_scope",
    "lock_trail",
    "new_id",
    "now_us",
    "validate_operation_id",
    "write_event",
    "write_transition",
]

_EVENT_TEXT = {member: member.value for member in EventType}
"""Each event type's name as a plain ``str`` (what the fast canonical encoder takes)."""

RESERVED_PREFIXES = ("pool:",)
"""Operation ids the ledger keeps for trails of its own (a pool's limit changes)."""

_ROW_FIELDS = (
    "state",
    "active_attempt_id",
    "provider_reference",
    "inconclusive_lookups",
    "retries_authorized",
    "review_owner",
    "review_deadline_us",
)

_FIELD_SET = frozenset(_ROW_FIELDS)
_row_fields = itemgetter(*_ROW_FIELDS)
"""The values of ``_ROW_FIELDS`` in a row, read in C."""
_STATES = {state.value: state for state in OperationState}
"""Each state by its stored name: a dictionary read where ``OperationState(...)`` is calls."""


_urandom = os.urandom


def new_id() -> str:
    """A fresh random identifier (32 lower-case hex digits)."""
    return _urandom(16).hex()


def key(tenant_id: str, operation_id: str) -> dict[str, Any]:
    """The parameters naming one operation of one tenant in every named query."""
    return {"tenant_id": tenant_id, "operation_id": operation_id}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def now_us(clock: Clock) -> int:
    """The clock's time in microseconds since the epoch, as events record it."""
    # to_micros, spelled out: every step of an operation reads the clock here.
    moment = clock.now()
    if moment.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def lock_scope(tx: Transaction, tenant_id: str, scope: str) -> None:
    """Hold ``scope`` of ``tenant_id`` until ``tx`` ends (one writer at a time reads-then-writes).

    Scopes: ``operation:<id>`` (an operation's trail, before and after admission),
    ``budget:<action>`` (a pre-authorization budget), ``pool:<pool>`` (a capacity pool). A
    transaction takes them in that order, so two transactions never wait for each other in a
    cycle. SQLite's ``BEGIN IMMEDIATE`` already serializes every writer.
    """
    # Nobody reads the lock's answer: it goes to the server with the statement after it.
    tx.queue("advisory_lock", {"tenant_id": tenant_id, "scope": scope})


def lock_trail(tx: Transaction, tenant_id: str, operation_id: str) -> None:
    """Hold the trail of ``operation_id`` until ``tx`` ends (see :func:`lock_scope`)."""
    lock_scope(tx, tenant_id, f"operation:{operation_id}")


def validate_operation_id(value: object) -> str:
    """``value`` if it is a well-formed operation id outside the reserved prefixes."""
    operation_id = validate_identifier(value, "operation_id")
    if operation_id.startswith(RESERVED_PREFIXES):
        raise InvalidInput(
            f"operation ids starting with {', '.join(RESERVED_PREFIXES)} are reserved",
            field="operation_id",
        )
    return operation_id


def write_event(
    tx: Transaction,
    *,
    tenant_id: str,
    operation_id: str,
    sequence: int,
    prev_hash: str,
    actor: str,
    event_type: EventType,
    now_us: int,
    attempt_id: str | None = None,
    evidence_reference: str | None = None,
    details: Mapping[str, Any] | None = None,
    observation_id: str | None = None,
    insert: bool = True,
    keys: TrailKeys | None,
) -> dict[str, Any]:
    """The event at ``sequence`` after ``prev_hash``, hashed, tagged under ``keys`` (when the
    ledger holds trail keys), and inserted unless ``insert`` is false (the caller inserts it
    once the row's guarded update has succeeded, with ``stored_hash``, the stored bytes of its
    ``event_hash``, as the hash)."""
    # A plain str, what the fast canonical encoder takes (a member is looked up, not called).
    text = _EVENT_TEXT[event_type] if type(event_type) is EventType else EventType(event_type).value
    # event_body's value, written out in its canonical key order (its fields are named here,
    # so there is nothing for it to check); the id is new_id's.
    body: dict[str, Any] = {
        "actor": actor,
        "attempt_id": attempt_id,
        "details": dict(details) if details else {},
        "event_id": _urandom(16).hex(),
        "event_type": text,
        "evidence_reference": evidence_reference,
        "observation_id": observation_id,
        "operation_id": operation_id,
        "prev_hash": prev_hash,
        "recorded_us": now_us,
        "sequence": sequence,
        "tenant_id": tenant_id,
    }
    # The body is encoded once: the hash, its stored bytes and the stored details text all
    # come from it.
    body["event_hash"], body["details_json"], stored = hash_event_stored(body)
    body["trail_tag"] = None if keys is None else keys.tag(body["event_hash"])
    body["stored_hash"] = stored
    if insert:
        tx.run("event_insert", {**body, "event_hash": stored})
    return body


def write_transition(
    tx: Transaction,
    row: Row,
    *,
    actor: str,
    event_type: EventType,
    now_us: int,
    attempt_id: str | None = None,
    evidence_reference: str | None = None,
    details: Mapping[str, Any] | None = None,
    observation_id: str | None = None,
    observed: Mapping[str, Any] | None = None,
    keys: TrailKeys | None,
    **changes: Any,
) -> dict[str, Any]:
    """Apply ``changes`` to the operation under its version and append one event; the new row.

    ``observed`` (``observation`` and ``observed_reference``) is the active attempt's answer,
    stored on the attempt in the same statement (``operation_step_observed``). ``keys``: the
    ledger's trail keys, which tag the event (``None``: untagged).

    The update is guarded by the operation's ``version`` (its concurrency token, which moves
    only when ``changes`` change something) and by its ``event_sequence`` (the head of its
    trail). When only audit-only events were appended since ``row`` was read, the decision
    taken on ``row`` still holds: the row is read again, locked so that it cannot move further,
    and the event is chained after its new head (once: no retry loop). When the version moved,
    :class:`ConcurrentModification` is raised and the transaction must roll back.
    """
    # The row's fields with the changes applied, in loops and lookups rather than calls: every
    # step of every operation comes through here.
    fields = dict(zip(_ROW_FIELDS, _row_fields(row), strict=True))
    stored_state = row["state"]
    current = _STATES[stored_state] if stored_state in _STATES else OperationState(stored_state)
    allowed = transition(event_type, current)  # InvalidTransition unless the table allows it
    for name in changes:
        if name not in _FIELD_SET:  # pragma: no cover - a programming error
            raise TypeError(f"unknown operation fields {sorted(changes.keys() - _FIELD_SET)}")
        fields[name] = changes[name]
    # A StrEnum equals its value: no conversion either way.
    if fields["state"] != (allowed.to_state or current):  # pragma: no cover
        raise InvalidTransition(
            f"{event_type} leaves an operation {allowed.to_state or current}, "
            f"not {fields['state']}",
            operation_id=row["operation_id"],
        )
    new_version = int(row["version"]) + 1 if changes else int(row["version"])
    said = {
        "actor": actor,
        "event_type": event_type,
        "now_us": now_us,
        "attempt_id": attempt_id,
        "evidence_reference": evidence_reference,
        "details": details,
        "observation_id": observation_id,
        "keys": keys,
    }
    # One statement moves the row under its guards and appends the event only if it moved.
    event, params = _chained(tx, row, fields, new_version, said)
    step = "operation_step"
    if observed is not None:
        step = "operation_step_observed"
        for name in observed:
            params[name] = observed[name]
    if tx.run(step, params) != 1:
        # Nothing was written: the row moved since it was read. Read its head again, locked
        # so that nothing moves it further, and chain after it if only its trail grew.
        row = _locked_head(tx, row)
        event, params = _chained(tx, row, fields, new_version, said)
        if tx.run("operation_step", params) != 1:  # pragma: no cover - the row is locked
            raise ConcurrentModification(
                "the operation changed while this step ran; reload it",
                operation_id=row["operation_id"],
            )
    updated = {**row, **fields}
    updated["version"] = new_version
    updated["event_sequence"] = params["new_sequence"]
    updated["last_event_hash"] = event["event_hash"]
    return updated


def _chained(
    tx: Transaction,
    row: Row,
    fields: Mapping[str, Any],
    new_version: int,
    said: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The event ``said`` after the head of ``row``'s trail, and the parameters of the step
    (``operation_step``: the guarded update and the event, written together)."""
    sequence = int(row["event_sequence"])
    event = write_event(
        tx,
        tenant_id=row["tenant_id"],
        operation_id=row["operation_id"],
        sequence=sequence + 1,
        prev_hash=row["last_event_hash"],
        insert=False,
        **said,
    )
    params = {
        **event,
        **fields,
        "tenant_id": row["tenant_id"],
        "operation_id": row["operation_id"],
        "version": int(row["version"]),
        "new_version": new_version,
        "sequence": sequence,
        "new_sequence": sequence + 1,
        "event_hash": event["stored_hash"],
        "now_us": said["now_us"],
    }
    return event, params


def _locked_head(tx: Transaction, row: Row) -> Row:
    """``row`` read again and locked, if only its trail grew since it was read.

    Audit-only events leave the version alone, so the decision taken on ``row`` still holds and
    the event is chained after the new head. If the version moved, the decision is stale:
    :class:`ConcurrentModification`, and the transaction must roll back.
    """
    fresh = tx.one("operation_lock", key(row["tenant_id"], row["operation_id"]))
    if fresh is None or int(fresh["version"]) != int(row["version"]):
        raise ConcurrentModification(
            "the operation changed while this step ran; reload it",
            operation_id=row["operation_id"],
        )
    return fresh


def append_event(
    tx: Transaction,
    ledger: LedgerParts,
    *,
    tenant_id: str,
    operation_id: str,
    actor: str,
    event_type: EventType,
    evidence_reference: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Append one event to the trail of ``operation_id`` inside ``tx``, changing no state.

    Used for what happens around admission (proposal, approval, a denied admission, a pool's
    limit). The trail is held first (:func:`lock_trail`), so concurrent appends chain one after
    another. If the operation exists the event goes through its guarded update without moving
    its version, so the trail and the row stay in step; otherwise it continues the trail
    written so far under the id.
    """
    trail = key(tenant_id, operation_id)
    lock_trail(tx, tenant_id, operation_id)
    row = tx.one("operation_get", trail)
    if row is not None:
        return write_transition(
            tx,
            row,
            actor=actor,
            event_type=event_type,
            now_us=now_us(ledger.clock),
            evidence_reference=evidence_reference,
            details=details,
            keys=ledger.settings.trail_keys,
        )
    transition(event_type, None)  # only what the table allows before admission
    head = tx.one("event_head", trail)
    return write_event(
        tx,
        **trail,
        sequence=1 if head is None else int(head["sequence"]) + 1,
        prev_hash=GENESIS_HASH if head is None else head["event_hash"],
        actor=actor,
        event_type=event_type,
        now_us=now_us(ledger.clock),
        evidence_reference=evidence_reference,
        details=details,
        keys=ledger.settings.trail_keys,
    )
