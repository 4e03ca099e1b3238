"""The per-operation hash chain.

Every audit event stores ``prev_hash`` (the ``event_hash`` of the previous event of the same
operation, or :data:`GENESIS_HASH` for the first) and its own ``event_hash``, the digest of its
chain body in domain ``event`` (:mod:`effectledger.events.record` defines the body and its bytes;
the hash string says its encoding version). Editing, dropping, inserting or reordering an event
of an operation breaks the chain from that point on; a deleted whole operation is caught by the
Merkle log, not here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from effectledger.errors import ChainBreak, InvalidInput
from effectledger.events.record import (
    EVENT_DOMAINS,
    GENESIS_HASH,
    body_from_event,
    entry_bytes,
    entry_from_row,
    event_body,
    event_version,
    hash_event,
    hash_of_entry,
    leaf_of_entry,
    stored_entry,
)
from effectledger.model.canonical import CURRENT_VERSION
from effectledger.model.operations import AuditEvent

__all__ = [
    "GENESIS_HASH",
    "ChainBreak",
    "event_body",
    "event_hash",
    "hash_event",
    "sealed_edit",
    "verify_chain",
    "verify_sealed",
    "verify_stored_chain",
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


def _stored_matches(row: Mapping[str, Any]) -> bool:
    # The stored bytes are tried first (hashed once), then the re-encoded value: what _matches
    # accepts.
    stored: str = row["event_hash"]
    version = event_version(stored)
    if hash_of_entry(entry_from_row(row), version) == stored:
        return True
    return hash_of_entry(stored_entry(row), version) == stored


def _link(event: AuditEvent) -> tuple[int, str, str, str]:
    return event.sequence, event.event_id, event.prev_hash, event.event_hash


def _stored_link(row: Mapping[str, Any]) -> tuple[int, str, str, str]:
    return int(row["sequence"]), row["event_id"], row["prev_hash"], row["event_hash"]


def verify_chain(events: Sequence[AuditEvent], *, head: str | None = None) -> None:
    """Check that ``events`` (one operation, in sequence order) form an unbroken chain.

    ``head``, when given, is the hash the operation row says is the latest; a chain that stops
    short of it has lost events at the end. Raises :class:`ChainBreak` naming the first bad event.
    """
    _walk(events, _link, _matches, head)


def verify_stored_chain(rows: Sequence[Mapping[str, Any]], *, head: str | None = None) -> None:
    """:func:`verify_chain` over stored ``audit_events`` rows, without building the events.

    Each row's stored bytes are hashed as they are (the fast splice the sealer uses), and
    re-encoded only when that does not reproduce the stored hash: the same rows pass and fail.
    The walk is :func:`_walk`'s, spelled out for rows (a claim's hot path); any row it does not
    pass is walked again by :func:`_walk`, which names what broke.
    """
    previous = GENESIS_HASH
    domain = EVENT_DOMAINS[2]
    for expected_sequence, row in enumerate(rows, start=1):
        own_hash = row["event_hash"]
        # A version-2 row's hash is recomputed from its spliced bytes in place: a claim checks
        # every event of its trail here.
        if (
            row["sequence"] != expected_sequence
            or row["prev_hash"] != previous
            or type(own_hash) is not str
            or own_hash[:3] != "v2:"
            or "v2:" + _sha256(domain + entry_from_row(row)).hexdigest() != own_hash
        ):
            # An older version, or a row this walk does not pass: the full walk decides (it
            # raises naming what broke, or passes every row and the head).
            _walk(rows, _stored_link, _stored_matches, head)
            return
        previous = own_hash
    if head is not None and head != previous:
        raise ChainBreak("the operation's latest event hash is not the end of its chain")


_sha256 = hashlib.sha256


def _walk(
    items: Sequence[Any],
    link: Callable[[Any], tuple[int, str, str, str]],
    matches: Callable[[Any], bool],
    head: str | None,
) -> None:
    previous = GENESIS_HASH
    for expected_sequence, item in enumerate(items, start=1):
        sequence, event_id, prev_hash, own_hash = link(item)
        where = {"sequence": sequence, "event_id": event_id}
        if sequence != expected_sequence:
            raise ChainBreak(
                f"event {event_id} has sequence {sequence}, "
                f"expected {expected_sequence}: an event is missing or out of order",
                **where,
            )
        if prev_hash != previous:
            raise ChainBreak(f"event {event_id} does not link to the event before it", **where)
        if not matches(item):
            raise ChainBreak(f"event {event_id} was altered after it was written", **where)
        previous = own_hash
    if head is not None and head != previous:
        raise ChainBreak("the operation's latest event hash is not the end of its chain")


def sealed_edit(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first stored row that differs from the leaf the log sealed it as, or ``None``.

    Rows carry ``sealed_leaf`` (the hex leaf hash of their ``log_entries`` row, ``None`` while
    pending). Sealed is final: an event edited after sealing, even with its hash and every later
    link recomputed, no longer gives its sealed leaf, ``SHA-256(0x00 ‖ entry)``.
    """
    for row in rows:
        sealed = row["sealed_leaf"]
        if sealed is not None and leaf_of_entry(stored_entry(row)).hex() != sealed:
            return row
    return None


def verify_sealed(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise :class:`ChainBreak` naming the first row that no longer gives its sealed leaf."""
    edited = sealed_edit(rows)
    if edited is not None:
        raise ChainBreak(
            f"event {edited['event_id']} was changed after the log sealed it",
            sequence=int(edited["sequence"]),
            event_id=edited["event_id"],
        )
