"""The evidence bundle: JSON Lines that a reviewer verifies offline (docs/evidence.md).

Every line is one canonical JSON object (``effectledger-canonical/1``) with a ``type``:

``bundle``
    the first line: ``format`` (:data:`FORMAT`), ``kind`` (``log``: every event of the log from
    position 0; ``receipt``: chosen events with inclusion proofs), ``origin``, ``tenant_id``.
``event``
    ``entry`` (the event's canonical bytes, see :mod:`effectledger.events.record`), ``event_hash``
    and ``leaf_hash`` (hex, as the ledger stored them) and the log ``position``.
``checkpoint``
    ``note`` (the signed C2SP checkpoint) and ``seq`` (its number in the tenant's log).
``consistency``
    ``old_size``, ``new_size`` and ``proof`` (hex hashes, RFC 9162 §2.1.4) between two checkpoints.
``inclusion``
    ``event_id``, ``position``, ``size`` and ``proof`` (hex hashes, RFC 9162 §2.1.3) of one event in
    the tree of the checkpoint of that size.
``blob``
    ``content`` (base64, RFC 4648 with padding) and ``sha256`` (hex) of an evidence blob an event
    line after it cites (:mod:`effectledger.audit.bundles.blobs`).

This module writes the lines; :mod:`effectledger.audit.bundles.reader` reads them back. Because
the canonical encoding of an object contains the canonical encoding of each value, an event line
is byte for byte ``{"entry":`` ‖ ``B`` ‖ ``,"event_hash":"…",…}``: :func:`event_line` splices
the stored bytes in place, with the keys of :data:`EVENT_LINE_FIELDS`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Final

from effectledger.audit.log.origins import origin_for
from effectledger.model.canonical import canonical_bytes

__all__ = [
    "ENTRY_START",
    "EVENT_LINE_FIELDS",
    "FORMAT",
    "KIND_LOG",
    "KIND_RECEIPT",
    "LINE_LIMIT",
    "blob_line",
    "checkpoint_line",
    "consistency_line",
    "event_line",
    "header_line",
    "inclusion_line",
]

FORMAT: Final = "effectledger-evidence/1"
KIND_LOG: Final = "log"
KIND_RECEIPT: Final = "receipt"
LINE_LIMIT: Final = 1 << 24
"""The longest line a bundle may hold, in bytes."""

EVENT_LINE_FIELDS: Final = (
    ("entry", "object"),
    ("event_hash", "hash"),
    ("leaf_hash", "leaf"),
    ("position", "index"),
    ("type", "event"),
)
"""The keys of an event line in canonical order, with their kinds (``entry`` is the body)."""

ENTRY_START: Final = b'{"' + EVENT_LINE_FIELDS[0][0].encode() + b'":'
"""How every event line starts, and no other line does: ``{"entry":``."""


def _line(value: dict[str, Any]) -> bytes:
    return canonical_bytes(value, limit=LINE_LIMIT) + b"\n"


def header_line(tenant_id: str, kind: str = KIND_LOG) -> bytes:
    """The first line of a bundle of ``tenant_id``'s log."""
    return _line(
        {
            "format": FORMAT,
            "kind": kind,
            "origin": origin_for(tenant_id),
            "tenant_id": tenant_id,
            "type": "bundle",
        }
    )


_LINE_KEYS: Final = [b',"' + name.encode() + b'":' for name, _ in EVENT_LINE_FIELDS[1:]]


def event_line(entry: bytes, event_hash: str, leaf_hash: bytes, position: int) -> bytes:
    """The line of one event (``entry`` must be its canonical bytes)."""
    values = (
        b'"' + event_hash.encode("ascii") + b'"',
        b'"' + leaf_hash.hex().encode("ascii") + b'"',
        str(position).encode("ascii"),
        b'"event"',
    )
    parts = [ENTRY_START, entry]
    for key, value in zip(_LINE_KEYS, values, strict=True):
        parts += (key, value)
    parts.append(b"}\n")
    return b"".join(parts)


def checkpoint_line(seq: int, note: str) -> bytes:
    """The line of one signed checkpoint."""
    return _line({"note": note, "seq": seq, "type": "checkpoint"})


def consistency_line(old_size: int, new_size: int, proof: Sequence[bytes]) -> bytes:
    """The line of a consistency proof between the checkpoints of two sizes."""
    return _line(
        {
            "new_size": new_size,
            "old_size": old_size,
            "proof": [node.hex() for node in proof],
            "type": "consistency",
        }
    )


def blob_line(digest: str, content: bytes) -> bytes:
    """The line of an evidence blob an event cites by ``digest``, carrying ``content`` as stored.

    ``digest`` is the hash the event commits to, not one recomputed here: a blob whose stored
    bytes were changed travels as it is, and verification names it (``evidence_edited``).
    """
    return _line(
        {"content": base64.b64encode(content).decode("ascii"), "sha256": digest, "type": "blob"}
    )


def inclusion_line(event_id: str, position: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The line of an inclusion proof of one event in the tree of ``size`` leaves."""
    return _line(
        {
            "event_id": event_id,
            "position": position,
            "proof": [node.hex() for node in proof],
            "size": size,
            "type": "inclusion",
        }
    )
