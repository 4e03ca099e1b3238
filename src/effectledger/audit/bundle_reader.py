"""Reading an evidence bundle's lines (:mod:`effectledger.audit.bundle`): strictly, and fast.

Every line must be exactly the canonical encoding of what it carries: a line with a duplicate key,
a byte order mark, a carriage return, other spacing or escaping is refused (``ValueError``, which
verification reports as ``bundle_malformed``), so no reader can see bytes no hash covers. An event
line is byte for byte ``{"entry":`` ‖ ``B`` ‖ ``,"event_hash":"…",…}``; the verifier's fast path
(:func:`scan_event_line`) matches that shape with one pattern generated from the field tuples
(:data:`effectledger.events.record.EVENT_FIELDS`,
:data:`~effectledger.audit.bundle.EVENT_LINE_FIELDS`) and hashes ``B`` in place.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Final

from effectledger.audit.bundle import ENTRY_START, EVENT_LINE_FIELDS, LINE_LIMIT
from effectledger.errors import InvalidInput
from effectledger.events.record import (
    AFTER_KEY,
    EVENT_DOMAINS,
    EVENT_FIELDS,
    FIRST_KEY,
    TAIL_FIELDS,
    event_from_body,
    event_version,
    hash_of_entry,
    leaf_of_entry,
)
from effectledger.model.canonical import canonical_bytes, decode_canonical, encode
from effectledger.model.operations import AuditEvent

__all__ = [
    "EventLine",
    "ScannedEvent",
    "parse_event_line",
    "parse_line",
    "read_events",
    "scan_event_line",
    "text_bytes",
]


_EVENT_START: Final = ENTRY_START + FIRST_KEY
_ENTRY_AT: Final = len(ENTRY_START)
_KEYS: Final = {name: b',"' + name.encode() + b'":' for name, _ in EVENT_LINE_FIELDS[1:]}
# The fixed-shape suffix after the entry: the stated hashes (64 hex digits, or "v2:" and 64),
# the position's digits and the type, found at offsets computed from the keys.
_HASH_KEY: Final = _KEYS["event_hash"] + b'"'
_LEAF_KEY: Final = b'"' + _KEYS["leaf_hash"] + b'"'
_POSITION_KEY: Final = b'"' + _KEYS["position"]
_TYPE_END: Final = _KEYS["type"] + b'"event"}'
_MARK_V2: Final = b"v2:"


def _key(name: str, *, quoted_before: bool, quoted_after: bool) -> bytes:
    """``,"name":`` with the closing quote of the value before and the opening quote of its own."""
    return (
        (b'"' if quoted_before else b"")
        + b',"'
        + name.encode()
        + b'":'
        + (b'"' if quoted_after else b"")
    )


# The scanner reads these tail fields, found by their keys (built from the field list). The
# layout it relies on is checked here, so a field added among them fails at import rather than
# mis-scanning; a field added anywhere else needs nothing.
_SCANNED: Final = ("operation_id", "prev_hash", "recorded_us", "sequence", "tenant_id")
if tuple(field.name for field in TAIL_FIELDS[-len(_SCANNED) :]) != _SCANNED or [
    field.kind for field in TAIL_FIELDS[-len(_SCANNED) :]
] != ["text", "hash", "micros", "count", "text"]:
    raise AssertionError(f"the event scanner expects the body to end with {_SCANNED}")
_OPERATION_KEY: Final = _key("operation_id", quoted_before=False, quoted_after=True)
_PREV_KEY: Final = _key("prev_hash", quoted_before=True, quoted_after=True)
_RECORDED_KEY: Final = _key("recorded_us", quoted_before=True, quoted_after=False)
_SEQUENCE_KEY: Final = _key("sequence", quoted_before=False, quoted_after=False)
_TENANT_KEY: Final = _key("tenant_id", quoted_before=False, quoted_after=True)
_EVENT_ID_KEY: Final = AFTER_KEY + b'"'
_EVENT_ID_END: Final = _key(TAIL_FIELDS[1].name, quoted_before=True, quoted_after=False)
if TAIL_FIELDS[0].name != "event_id" or TAIL_FIELDS[0].kind != "text":
    raise AssertionError("the event scanner expects event_id right after the details")
_BODY_KEYS: Final = frozenset(field.name for field in EVENT_FIELDS)
_EVENT_KEYS: Final = frozenset(name for name, _ in EVENT_LINE_FIELDS)
_OTHER_TYPES: Final = ("bundle", "checkpoint", "consistency", "inclusion")


def text_bytes(text: str) -> bytes:
    """A string's canonical text without its quotes, as the fast scanner returns ids."""
    return encode(text)[1:-1].encode()


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


def _text(raw: bytes) -> str:
    if b"\\" not in raw:
        return raw.decode("utf-8")
    value: str = json.loads(b'"' + raw + b'"')
    return value


Cut = tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]


def _cut(line: bytes) -> Cut | None:
    """``(entry, event hash, leaf hash, position, operation, prev hash, sequence, tenant)``.

    The stated values as bytes, strings as their canonical text, cut by key: in canonical JSON
    ``,"`` with an unescaped quote occurs only as structure, and the fields after the details
    are scalars, so the last key of each is the body's own. ``None`` if the line is not in this
    shape. Whatever it cuts from a body that is not canonical never reaches a verdict: such a
    body was never sealed, so its leaf fails the signed root and the full parse judges it.
    """
    if not line.startswith(_EVENT_START) or not line.endswith(_TYPE_END):
        return None
    cut = line.rfind(_HASH_KEY)
    hashed = cut + len(_HASH_KEY)
    width = 67 if line[hashed : hashed + 3] == _MARK_V2 else 64
    leaf_at = hashed + width + len(_LEAF_KEY)
    digits = line[leaf_at + 64 + len(_POSITION_KEY) : -len(_TYPE_END)]
    if (
        cut < _ENTRY_AT
        or line[hashed + width : leaf_at] != _LEAF_KEY
        or line[leaf_at + 64 : leaf_at + 64 + len(_POSITION_KEY)] != _POSITION_KEY
        or not digits.isdigit()
        or (digits[0] == 48 and len(digits) > 1)
        or line[cut - 2 : cut] != b'"}'
    ):
        return None
    at = line.rfind(_OPERATION_KEY, _ENTRY_AT, cut)
    prev = line.find(_PREV_KEY, at, cut) if at > 0 else -1
    recorded = line.find(_RECORDED_KEY, prev, cut) if prev > 0 else -1
    seq = line.find(_SEQUENCE_KEY, recorded, cut) if recorded > 0 else -1
    tenant = line.find(_TENANT_KEY, seq, cut) if seq > 0 else -1
    sequence = line[seq + len(_SEQUENCE_KEY) : tenant]
    if tenant < 0 or not sequence.isdigit():
        return None
    return (
        line[_ENTRY_AT:cut],
        line[hashed : hashed + width],
        line[leaf_at : leaf_at + 64],
        digits,
        line[at + len(_OPERATION_KEY) : prev],
        line[prev + len(_PREV_KEY) : recorded],
        sequence,
        line[tenant + len(_TENANT_KEY) : cut - 2],
    )


def _fast(line: bytes) -> EventLine | None:
    """Parse an event line in canonical shape by cutting; ``None`` if it is not."""
    found = _cut(line)
    if found is None:
        return None
    entry, stated, leaf, digits, operation, prev_hash, sequence, tenant = found
    start = line.rfind(_EVENT_ID_KEY, _ENTRY_AT) + len(_EVENT_ID_KEY)
    end = line.find(_EVENT_ID_END, start)
    if start < len(_EVENT_ID_KEY) or end < 0:
        return None
    text = stated.decode("ascii")
    return EventLine(
        entry=entry,
        position=int(digits),
        stated_event_hash=text,
        stated_leaf_hash=leaf.decode("ascii"),
        event_hash=hash_of_entry(entry, event_version(text)),
        leaf_hash=leaf_of_entry(entry),
        event_id=_text(line[start:end]),
        tenant_id=_text(tenant),
        operation_id=_text(operation),
        sequence=int(sequence),
        prev_hash=_text(prev_hash),
    )


def _slow(line: bytes) -> EventLine:
    """Parse an event line that is canonical JSON but not in the fast shape (or fails it)."""
    value = _decode_event_line(line)
    if not isinstance(value, dict) or set(value) != _EVENT_KEYS or value["type"] != "event":
        raise ValueError("not an event line")
    body = value["entry"]
    if not isinstance(body, dict) or set(body) != _BODY_KEYS:
        raise ValueError("the entry is not an event body")
    strings = (body["event_id"], body["tenant_id"], body["operation_id"], body["prev_hash"])
    if not all(isinstance(field, str) for field in (*strings, *_stated(value))):
        raise ValueError("an event line field has the wrong type")
    for number in (body["sequence"], value["position"]):
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValueError("sequence and position are non-negative integers")
    version = event_version(value["event_hash"])
    entry = canonical_bytes(body, version=version, limit=LINE_LIMIT)
    return EventLine(
        entry=entry,
        position=value["position"],
        stated_event_hash=value["event_hash"],
        stated_leaf_hash=value["leaf_hash"],
        event_hash=hash_of_entry(entry, version),
        leaf_hash=leaf_of_entry(entry),
        event_id=body["event_id"],
        tenant_id=body["tenant_id"],
        operation_id=body["operation_id"],
        sequence=body["sequence"],
        prev_hash=body["prev_hash"],
    )


def _stated(value: dict[str, Any]) -> tuple[Any, Any]:
    return value["event_hash"], value["leaf_hash"]


def _decode_event_line(line: bytes) -> Any:
    """The value of an event line that is canonical under the version its hash names."""
    refusal: InvalidInput | None = None
    for version in (2, 1):  # a version 1 event's line may differ from its version 2 spelling
        try:
            value = decode_canonical(line, version=version, limit=LINE_LIMIT)
        except InvalidInput as exc:
            refusal = refusal or exc
            continue
        stated = value.get("event_hash") if isinstance(value, dict) else None
        named = event_version(stated) if isinstance(stated, str) else version
        if named == version or canonical_bytes(value, version=named, limit=LINE_LIMIT) == line:
            return value
        refusal = refusal or InvalidInput("not canonical JSON under the version its hash names")
    message = refusal.message if refusal is not None else "not canonical JSON"
    raise ValueError(message) from refusal


_sha256 = hashlib.sha256
_DOMAIN_V1, _DOMAIN_V2 = EVENT_DOMAINS[1], EVENT_DOMAINS[2]
ScannedEvent = tuple[bytes, bytes, int, bytes, bytes, int, bytes]


def scan_event_line(line: bytes) -> ScannedEvent | None:
    """The verifier's fast path for a canonical event line whose stated hashes hold.

    Returns ``(leaf_hash, event_hash, position, operation_id, prev_hash, sequence, tenant_id)``
    with the hashes as their stated bytes and the ids as their canonical text (see
    :func:`text_bytes`), or ``None`` whenever the line is not in the canonical shape or a
    stated hash differs (the caller then uses :func:`parse_event_line`).
    """
    found = _cut(line)
    if found is None:
        return None
    entry, stated, stated_leaf, digits, operation, prev_hash, sequence, tenant = found
    if len(stated) == 67:  # "v2:" and the digest (_cut checked the mark)
        matches = _sha256(_DOMAIN_V2 + entry).hexdigest().encode() == stated[3:]
    else:
        matches = _sha256(_DOMAIN_V1 + entry).hexdigest().encode() == stated
    leaf = _sha256(b"\x00" + entry).digest()
    if not matches or leaf.hex().encode() != stated_leaf:
        return None
    return (leaf, stated, int(digits), operation, prev_hash, int(sequence), tenant)


def parse_event_line(line: bytes) -> EventLine:
    """Parse an event line (without its newline); raise :class:`ValueError` if malformed.

    A line in the canonical shape whose stated hashes hold is taken by its pattern; any other
    line must be canonical JSON (so a duplicate key, other spacing or escaping is refused) and
    is then judged by its hashes.
    """
    parsed = _fast(line)
    if (
        parsed is not None
        and parsed.event_hash == parsed.stated_event_hash
        and parsed.leaf_hash.hex() == parsed.stated_leaf_hash
    ):
        return parsed
    return _slow(line)


def parse_line(line: bytes) -> tuple[str, Any]:
    """Parse any bundle line into ``(type, value)``: an :class:`EventLine` or a ``dict``.

    Raises :class:`ValueError` for a line that is not the canonical encoding of a JSON object
    with a known ``type``.
    """
    if line.startswith(ENTRY_START):
        return "event", parse_event_line(line)
    try:
        value = decode_canonical(line, limit=LINE_LIMIT)
    except InvalidInput as exc:
        raise ValueError(exc.message) from exc
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ValueError("a bundle line is a JSON object with a type")
    kind = value["type"]
    if kind == "event":
        raise ValueError("an event line starts with its entry")
    if kind not in _OTHER_TYPES:
        raise ValueError(f"unknown line type {kind!r}")
    return kind, value


def read_events(path: str | os.PathLike[str], operation_id: str) -> list[AuditEvent]:
    """The events of ``operation_id`` in a bundle file, in file order (verify it first)."""
    events: list[AuditEvent] = []
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.startswith(ENTRY_START):
                continue
            event = parse_event_line(raw.rstrip(b"\n"))
            if event.operation_id == operation_id:
                events.append(event_from_body(event.body(), event.event_hash))
    return events
