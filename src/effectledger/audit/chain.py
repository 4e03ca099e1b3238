"""The per-operation hash chain.

Every audit event stores ``prev_hash`` (the ``event_hash`` of the previous event of the same
operation, or :data:`GENESIS_HASH` for the first) and its own ``event_hash``::

    event_hash = digest("event", {
        "actor", "attempt_id", "details", "event_id", "event_type", "evidence_reference",
        "observation_id", "operation_id", "prev_hash", "recorded_us", "sequence", "tenant_id",
    })

using the canonical encoding of :mod:`effectledger.canonical` (domain ``event``). ``recorded_us``
is microseconds since the Unix epoch. Editing, dropping, inserting or reordering an event of an
operation breaks the chain from that point on; a deleted whole operation is caught by the Merkle
log, not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from effectledger.canonical import canonical_bytes, digest, digest_bytes
from effectledger.errors import ChainBreak
from effectledger.model import AuditEvent, to_micros

__all__ = [
    "GENESIS_HASH",
    "ChainBreak",
    "event_body",
    "event_hash",
    "hash_event",
    "verify_chain",
]

GENESIS_HASH = "0" * 64
_DETAILS_KEY = b',"details":'
_EVENT_ID_KEY = b',"event_id":'


def event_body(
    *,
    event_id: str,
    tenant_id: str,
    operation_id: str,
    attempt_id: str | None,
    sequence: int,
    actor: str,
    event_type: str,
    recorded_us: int,
    evidence_reference: str | None,
    details: Mapping[str, Any],
    observation_id: str | None,
    prev_hash: str,
) -> dict[str, Any]:
    """The exact value whose canonical digest is an event's hash."""
    return {
        "actor": actor,
        "attempt_id": attempt_id,
        "details": dict(details),
        "event_id": event_id,
        "event_type": event_type,
        "evidence_reference": evidence_reference,
        "observation_id": observation_id,
        "operation_id": operation_id,
        "prev_hash": prev_hash,
        "recorded_us": recorded_us,
        "sequence": sequence,
        "tenant_id": tenant_id,
    }


def event_hash(body: Mapping[str, Any]) -> str:
    """The hex hash of an event body built by :func:`event_body`."""
    return digest("event", body)


def hash_event(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(event_hash, details_json)`` of a body built by :func:`event_body`, encoding it once.

    ``event_hash`` equals :func:`event_hash` and ``details_json`` equals the canonical text of
    ``body["details"]``, which is stored beside the hash. The canonical text of an object is the
    concatenation of its members' texts, so the details are cut out of the body's text instead
    of being encoded a second time. The cut is unambiguous: a ``"`` inside a string literal is
    always escaped, so ``,"`` only occurs between the items of an object or an array; the
    members before ``details`` (``actor``, ``attempt_id``) and after it are scalars, so the first
    ``,"details":`` and the last ``,"event_id":`` are the body's own keys, whatever the details
    hold.
    """
    data = canonical_bytes(body)
    start = data.index(_DETAILS_KEY) + len(_DETAILS_KEY)
    end = data.rindex(_EVENT_ID_KEY)
    return digest_bytes("event", data), data[start:end].decode("utf-8")


def _body_of(event: AuditEvent, observation_id: str | None) -> dict[str, Any]:
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
        observation_id=observation_id,
        prev_hash=event.prev_hash,
    )


def verify_chain(events: Sequence[AuditEvent], *, head: str | None = None) -> None:
    """Check that ``events`` (one operation, in sequence order) form an unbroken chain.

    ``head``, when given, is the hash the operation row says is the latest; a chain that stops
    short of it has lost events at the end. Raises :class:`ChainBreak` naming the first bad event.
    """
    previous = GENESIS_HASH
    for expected_sequence, event in enumerate(events, start=1):
        where = {"sequence": event.sequence, "event_id": event.event_id}
        if event.sequence != expected_sequence:
            raise ChainBreak(
                f"event {event.event_id} has sequence {event.sequence}, "
                f"expected {expected_sequence}: an event is missing or out of order",
                **where,
            )
        if event.prev_hash != previous:
            raise ChainBreak(
                f"event {event.event_id} does not link to the event before it", **where
            )
        if event_hash(_body_of(event, event.observation_id)) != event.event_hash:
            raise ChainBreak(f"event {event.event_id} was altered after it was written", **where)
        previous = event.event_hash
    if head is not None and head != previous:
        raise ChainBreak("the operation's latest event hash is not the end of its chain")
