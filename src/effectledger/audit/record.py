"""The canonical bytes of an audit event: what the hash chain and the Merkle log commit to.

An event's **canonical bytes** are the ``effectledger-canonical/1`` encoding
(:mod:`effectledger.canonical`) of its chain body, the twelve-field object of
:func:`effectledger.audit.chain.event_body`::

    {"actor":…,"attempt_id":…,"details":{…},"event_id":…,"event_type":…,
     "evidence_reference":…,"observation_id":…,"operation_id":…,"prev_hash":…,
     "recorded_us":…,"sequence":…,"tenant_id":…}

From those bytes ``B`` everything else follows, with SHA-256 and nothing else:

* ``event_hash = hex(SHA-256("effectledger/event/v1\\n" ‖ B))`` — the hash chain link stored in the
  event and in the ``prev_hash`` of the operation's next event;
* the Merkle **leaf entry** is ``B`` itself, so ``leaf_hash = SHA-256(0x00 ‖ B)`` (RFC 9162 §2.1.1).

The leaf commits to ``prev_hash`` and so, transitively, to the operation's whole chain up to the
event; ``event_hash`` is a function of ``B`` and needs no separate commitment.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from effectledger.audit.chain import event_body
from effectledger.canonical import canonical_bytes, encode
from effectledger.errors import InvalidInput
from effectledger.model import AuditEvent, from_micros, to_micros

__all__ = [
    "EVENT_DOMAIN",
    "body_from_event",
    "body_from_row",
    "entry_bytes",
    "entry_from_row",
    "event_from_body",
    "event_from_row",
    "hash_of_entry",
    "leaf_of_entry",
    "stored_entry",
]

EVENT_DOMAIN: Final = b"effectledger/event/v1\n"
"""The domain prefix of an event hash (see :func:`effectledger.canonical.digest`)."""

_sha256 = hashlib.sha256


def body_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The chain body of a stored ``audit_events`` row (its details parsed from JSON)."""
    return event_body(
        event_id=row["event_id"],
        tenant_id=row["tenant_id"],
        operation_id=row["operation_id"],
        attempt_id=row["attempt_id"],
        sequence=int(row["sequence"]),
        actor=row["actor"],
        event_type=row["event_type"],
        recorded_us=int(row["recorded_us"]),
        evidence_reference=row["evidence_reference"],
        details=json.loads(row["details_json"]),
        observation_id=row["observation_id"],
        prev_hash=row["prev_hash"],
    )


def body_from_event(event: AuditEvent) -> dict[str, Any]:
    """The chain body of an :class:`~effectledger.model.AuditEvent`."""
    return event_body(
        event_id=event.event_id,
        tenant_id=event.tenant_id,
        operation_id=event.operation_id,
        attempt_id=event.attempt_id,
        sequence=event.sequence,
        actor=event.actor,
        event_type=event.event_type,
        recorded_us=to_micros(event.recorded_at),
        evidence_reference=event.evidence_reference,
        details=event.details,
        observation_id=event.observation_id,
        prev_hash=event.prev_hash,
    )


def entry_bytes(body: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a chain body: the event's Merkle leaf entry."""
    return canonical_bytes(body)


def _text(value: Any) -> str:
    return "null" if value is None else encode(value)


def entry_from_row(row: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a stored row, splicing its stored ``details_json`` as it is.

    The ledger stores ``details_json`` in canonical form, so this equals
    ``entry_bytes(body_from_row(row))`` for every row it wrote, about four times faster. A row
    whose ``details_json`` was rewritten gives other bytes, so callers compare the result's hash
    with the stored ``event_hash`` (the sealer does) or leave that to verification (the exporter).
    """
    return (
        f'{{"actor":{_text(row["actor"])},"attempt_id":{_text(row["attempt_id"])},'
        f'"details":{row["details_json"]},"event_id":{_text(row["event_id"])},'
        f'"event_type":{_text(row["event_type"])},'
        f'"evidence_reference":{_text(row["evidence_reference"])},'
        f'"observation_id":{_text(row["observation_id"])},'
        f'"operation_id":{_text(row["operation_id"])},"prev_hash":{_text(row["prev_hash"])},'
        f'"recorded_us":{int(row["recorded_us"])},"sequence":{int(row["sequence"])},'
        f'"tenant_id":{_text(row["tenant_id"])}}}'
    ).encode()


def hash_of_entry(entry: bytes) -> str:
    """The hex ``event_hash`` of an event given its canonical bytes."""
    return _sha256(EVENT_DOMAIN + entry).hexdigest()


def leaf_of_entry(entry: bytes) -> bytes:
    """The RFC 9162 leaf hash ``SHA-256(0x00 ‖ entry)`` of an event's canonical bytes."""
    return _sha256(b"\x00" + entry).digest()


def event_from_body(body: Mapping[str, Any], event_hash: str) -> AuditEvent:
    """An :class:`~effectledger.model.AuditEvent` from a chain body and its hash."""
    return AuditEvent(
        event_id=body["event_id"],
        tenant_id=body["tenant_id"],
        operation_id=body["operation_id"],
        attempt_id=body["attempt_id"],
        sequence=int(body["sequence"]),
        actor=body["actor"],
        event_type=body["event_type"],
        recorded_at=from_micros(int(body["recorded_us"])),
        evidence_reference=body["evidence_reference"],
        details=body["details"],
        observation_id=body["observation_id"],
        prev_hash=body["prev_hash"],
        event_hash=event_hash,
    )


def event_from_row(row: Mapping[str, Any]) -> AuditEvent:
    """An :class:`~effectledger.model.AuditEvent` from a stored ``audit_events`` row."""
    return event_from_body(body_from_row(row), row["event_hash"])


def stored_entry(row: Mapping[str, Any]) -> bytes:
    """A stored row's entry bytes as they hash to its stored ``event_hash`` if at all possible.

    Tries the fast splice of :func:`entry_from_row`, then a full re-encoding (for a
    ``details_json`` that was merely reformatted); if neither reproduces the stored hash the row
    was changed, and the spliced bytes are returned as they are, for the caller to judge.
    """
    entry = entry_from_row(row)
    if hash_of_entry(entry) == row["event_hash"]:
        return entry
    try:
        canonical = entry_bytes(body_from_row(row))
    except (ValueError, InvalidInput):
        return entry
    return canonical if hash_of_entry(canonical) == row["event_hash"] else entry
