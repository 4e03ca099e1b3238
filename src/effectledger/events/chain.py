"""The per-operation hash chain.

Every audit event stores ``prev_hash`` (the ``event_hash`` of the previous event of the same
operation, or :data:`GENESIS_HASH` for the first) and its own ``event_hash``, the digest of its
chain body in domain ``event`` (:mod:`effectledger.events.record` defines the body and its bytes;
the hash string says its encoding version). Editing, dropping, inserting or reordering an event
of an operation breaks the chain from that point on; a deleted whole operation is caught by the
Merkle log, not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from effectledger.canonical import CURRENT_VERSION
from effectledger.errors import ChainBreak, InvalidInput
from effectledger.events.record import (
    GENESIS_HASH,
    body_from_event,
    entry_bytes,
    event_body,
    event_version,
    hash_event,
    hash_of_entry,
)
from effectledger.model import AuditEvent

__all__ = [
    "GENESIS_HASH",
    "ChainBreak",
    "event_body",
    "event_hash",
    "hash_event",
    "verify_chain",
]


def event_hash(body: Mapping[str, Any], version: int = CURRENT_VERSION) -> str:
    """The ``event_hash`` string of an event body built by :func:`event_body`."""
    return hash_of_entry(entry_bytes(body, version), version)


def _matches(event: AuditEvent) -> bool:
    version = event_version(event.event_hash)
    try:
        return event_hash(body_from_event(event), version) == event.event_hash
    except InvalidInput:  # not encodable under the version its hash names
        return False


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
        if not _matches(event):
            raise ChainBreak(f"event {event.event_id} was altered after it was written", **where)
        previous = event.event_hash
    if head is not None and head != previous:
        raise ChainBreak("the operation's latest event hash is not the end of its chain")
