"""The evidence bundle: JSON Lines that a reviewer verifies offline (docs/evidence.md).

Every line is one canonical JSON object (``effectledger-canonical/1``) with a ``type``:

``bundle``
    the first line: ``format`` (:data:`FORMAT`), ``kind`` (``log``: every event of the log from
    position 0; ``receipt``: chosen events with inclusion proofs), ``origin``, ``tenant_id``.
``event``
    ``entry`` (the event's canonical bytes, see :mod:`effectledger.audit.record`), ``event_hash``
    and ``leaf_hash`` (hex, as the ledger stored them) and the log ``position``.
``checkpoint``
    ``note`` (the signed C2SP checkpoint) and ``seq`` (its number in the tenant's log).
``consistency``
    ``old_size``, ``new_size`` and ``proof`` (hex hashes, RFC 9162 §2.1.4) between two checkpoints.
``inclusion``
    ``event_id``, ``position``, ``size`` and ``proof`` (hex hashes, RFC 9162 §2.1.3) of one event in
    the tree of the checkpoint of that size.

Because the canonical encoding of an object contains the canonical encoding of each value, an
event line is byte for byte ``{"entry":`` ‖ canonical bytes ‖ ``,"event_hash":"…",…}``; a verifier
hashes that slice directly and re-encodes only lines that are not canonical.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from effectledger.audit.keys import origin_for
from effectledger.audit.record import EVENT_DOMAIN, event_from_body, hash_of_entry, leaf_of_entry
from effectledger.canonical import canonical_bytes
from effectledger.errors import InvalidInput
from effectledger.model import AuditEvent

__all__ = [
    "FORMAT",
    "KIND_LOG",
    "KIND_RECEIPT",
    "EventLine",
    "checkpoint_line",
    "consistency_line",
    "event_line",
    "header_line",
    "inclusion_line",
    "parse_event_line",
    "parse_line",
    "read_events",
    "scan_event_line",
]

FORMAT: Final = "effectledger-evidence/1"
KIND_LOG: Final = "log"
KIND_RECEIPT: Final = "receipt"

_EVENT_START: Final = b'{"entry":{'
_SUFFIX_START: Final = b',"event_hash":"'
_SUFFIX = re.compile(
    rb',"event_hash":"([0-9a-f]{64})","leaf_hash":"([0-9a-f]{64})",'
    rb'"position":(0|[1-9][0-9]{0,18}),"type":"event"}'
)
_TAIL_START: Final = b',"operation_id":"'
_TAIL = re.compile(
    rb',"operation_id":"([^"\\]*)","prev_hash":"([0-9a-f]{64})",'
    rb'"recorded_us":-?(?:0|[1-9][0-9]{0,18}),"sequence":([1-9][0-9]{0,18}),'
    rb'"tenant_id":"([^"\\]*)"}'
)
_EVENT_ID_START: Final = b',"event_id":"'
_BODY_KEYS: Final = frozenset(
    {
        "actor",
        "attempt_id",
        "details",
        "event_id",
        "event_type",
        "evidence_reference",
        "observation_id",
        "operation_id",
        "prev_hash",
        "recorded_us",
        "sequence",
        "tenant_id",
    }
)
_EVENT_KEYS: Final = frozenset({"entry", "event_hash", "leaf_hash", "position", "type"})


def _line(value: dict[str, Any]) -> bytes:
    return canonical_bytes(value, limit=1 << 24) + b"\n"


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


def event_line(entry: bytes, event_hash: str, leaf_hash: bytes, position: int) -> bytes:
    """The line of one event (``entry`` must be its canonical bytes)."""
    return b"".join(
        (
            b'{"entry":',
            entry,
            b',"event_hash":"',
            event_hash.encode("ascii"),
            b'","leaf_hash":"',
            leaf_hash.hex().encode("ascii"),
            b'","position":',
            str(position).encode("ascii"),
            b',"type":"event"}\n',
        )
    )


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


@dataclass(slots=True)
class EventLine:
    """One parsed event line: the stated values and the hashes recomputed from its bytes."""

    entry: bytes
    position: int
    stated_event_hash: str
    stated_leaf_hash: str
    event_hash: str
    leaf_hash: bytes
    event_id: str
    tenant_id: str
    operation_id: str
    sequence: int
    prev_hash: str

    def body(self) -> dict[str, Any]:
        """The event's chain body, parsed from its canonical bytes."""
        value: dict[str, Any] = json.loads(self.entry)
        return value


def _fast(line: bytes) -> EventLine | None:
    """Parse a canonical event line by slicing; ``None`` if it is not in canonical shape."""
    if not line.startswith(_EVENT_START):
        return None
    cut = line.rfind(_SUFFIX_START)
    suffix = _SUFFIX.fullmatch(line, cut) if cut > 0 else None
    if suffix is None:
        return None
    entry = line[9:cut]
    at = entry.rfind(_TAIL_START)
    tail = _TAIL.fullmatch(entry, at) if at > 0 else None
    start = entry.rfind(_EVENT_ID_START, 0, at) + len(_EVENT_ID_START)
    end = entry.find(b'"', start)
    if tail is None or start < len(_EVENT_ID_START) or end < 0 or b"\\" in entry[start:end]:
        return None
    return EventLine(
        entry=entry,
        position=int(suffix[3]),
        stated_event_hash=suffix[1].decode("ascii"),
        stated_leaf_hash=suffix[2].decode("ascii"),
        event_hash=hash_of_entry(entry),
        leaf_hash=leaf_of_entry(entry),
        event_id=entry[start:end].decode("utf-8"),
        tenant_id=tail[4].decode("utf-8"),
        operation_id=tail[1].decode("utf-8"),
        sequence=int(tail[3]),
        prev_hash=tail[2].decode("ascii"),
    )


def _slow(line: bytes) -> EventLine:
    """Parse any JSON event line, re-encoding its entry canonically."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict) or set(value) != _EVENT_KEYS or value["type"] != "event":
        raise ValueError("not an event line")
    body = value["entry"]
    if not isinstance(body, dict) or set(body) != _BODY_KEYS:
        raise ValueError("the entry is not an event body")
    fields = (
        body["event_id"],
        body["tenant_id"],
        body["operation_id"],
        body["prev_hash"],
        value["event_hash"],
        value["leaf_hash"],
    )
    if not all(isinstance(field, str) for field in fields):
        raise ValueError("an event line field has the wrong type")
    for number in (body["sequence"], value["position"]):
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValueError("sequence and position are non-negative integers")
    try:
        entry = canonical_bytes(body)
    except InvalidInput as exc:
        raise ValueError(f"the entry has no canonical form: {exc.message}") from exc
    return EventLine(
        entry=entry,
        position=value["position"],
        stated_event_hash=value["event_hash"],
        stated_leaf_hash=value["leaf_hash"],
        event_hash=hash_of_entry(entry),
        leaf_hash=leaf_of_entry(entry),
        event_id=body["event_id"],
        tenant_id=body["tenant_id"],
        operation_id=body["operation_id"],
        sequence=body["sequence"],
        prev_hash=body["prev_hash"],
    )


_sha256 = hashlib.sha256
_TYPE_END: Final = b',"type":"event"}'
ScannedEvent = tuple[bytes, bytes, int, bytes, bytes, int, bytes]


def scan_event_line(line: bytes) -> ScannedEvent | None:
    """The verifier's fast path for a canonical event line whose stated hashes hold.

    Returns ``(leaf_hash, event_hash, position, operation_id, prev_hash, sequence, tenant_id)``
    with the hashes as hex bytes and the ids as their UTF-8 bytes, or ``None`` whenever the line
    is not in exactly the canonical shape or a stated hash differs (the caller then uses
    :func:`parse_event_line`). Fields are found by fixed offsets and by searching for ``","key":``,
    which in canonical JSON occurs only as structure (a quote inside a string is escaped).
    """
    if not line.startswith(_EVENT_START) or not line.endswith(_TYPE_END):
        return None
    cut = line.rfind(_SUFFIX_START)
    hashed = cut + 15
    leaf_at = hashed + 79
    digits = line[leaf_at + 77 : -16]
    if (
        cut < 12
        or line[hashed + 64 : leaf_at] != b'","leaf_hash":"'
        or line[leaf_at + 64 : leaf_at + 77] != b'","position":'
        or not digits.isdigit()
        or (digits[0] == 48 and len(digits) > 1)
        or line[cut - 2 : cut] != b'"}'
    ):
        return None
    entry = line[9:cut]
    event_hash = _sha256(EVENT_DOMAIN + entry).hexdigest().encode()
    leaf = _sha256(b"\x00" + entry).digest()
    if (
        event_hash != line[hashed : hashed + 64]
        or leaf.hex().encode() != line[leaf_at : leaf_at + 64]
    ):
        return None
    at = line.rfind(_TAIL_START, 9, cut)
    end = line.find(b'","prev_hash":"', at, cut) if at > 0 else -1
    seq_at = line.find(b',"sequence":', end, cut) if end > 0 else -1
    tenant_at = line.find(b',"tenant_id":"', seq_at, cut) if seq_at > 0 else -1
    if tenant_at < 0 or line[end + 79 : end + 95] != b'","recorded_us":':
        return None
    operation, tenant = line[at + 17 : end], line[tenant_at + 14 : cut - 2]
    sequence = line[seq_at + 12 : tenant_at]
    if not sequence.isdigit() or b"\\" in operation or b"\\" in tenant:
        return None
    return (
        leaf,
        event_hash,
        int(digits),
        operation,
        line[end + 15 : end + 79],
        int(sequence),
        tenant,
    )


def parse_event_line(line: bytes) -> EventLine:
    """Parse an event line (without its newline); raise :class:`ValueError` if malformed.

    Canonical lines are sliced, not parsed; a line whose slice does not reproduce its stated
    hashes is re-parsed and re-encoded, so a merely re-formatted line still verifies.
    """
    parsed = _fast(line)
    if (
        parsed is not None
        and parsed.event_hash == parsed.stated_event_hash
        and parsed.leaf_hash.hex() == parsed.stated_leaf_hash
    ):
        return parsed
    try:
        return _slow(line)
    except ValueError:
        if parsed is not None:
            return parsed
        raise


def parse_line(line: bytes) -> tuple[str, Any]:
    """Parse any bundle line into ``(type, value)``: an :class:`EventLine` or a ``dict``.

    Raises :class:`ValueError` for a line that is not a JSON object with a known ``type``.
    """
    if line.startswith(b'{"entry":'):
        return "event", parse_event_line(line)
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ValueError("a bundle line is a JSON object with a type")
    kind = value["type"]
    if kind == "event":
        return "event", _slow(line)
    if kind not in ("bundle", "checkpoint", "consistency", "inclusion"):
        raise ValueError(f"unknown line type {kind!r}")
    return kind, value


def read_events(path: str | os.PathLike[str], operation_id: str) -> list[AuditEvent]:
    """The events of ``operation_id`` in a bundle file, in file order (verify it first)."""
    events: list[AuditEvent] = []
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.startswith(b'{"entry":'):
                continue
            event = parse_event_line(raw.rstrip(b"\n"))
            if event.operation_id == operation_id:
                events.append(event_from_body(event.body(), event.event_hash))
    return events
