"""Reading an evidence bundle's lines (:mod:`effectledger.audit.bundles.format`): strictly, and
fast.

Every line must be exactly the canonical encoding of what it carries: a line with a duplicate key,
a byte order mark, a carriage return, other spacing or escaping is refused (``ValueError``, which
verification reports as ``bundle_malformed``), so no reader can see bytes no hash covers. An event
line is byte for byte ``{"entry":`` ‖ ``B`` ‖ ``,"event_hash":"…",…}``; the verifier's fast path
(:func:`scan_event_line`) matches that shape with one pattern generated from the field tuples
(:data:`effectledger.events.record.EVENT_FIELDS`,
:data:`~effectledger.audit.bundles.format.EVENT_LINE_FIELDS`) and hashes ``B`` in place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Final

from effectledger.audit.bundles.format import ENTRY_START, EVENT_LINE_FIELDS, LINE_LIMIT
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
    "BLOB_MARK",
    "ENTRY_END",
    "EVENT_START",
    "REFERENCE_KEY",
    "SCAN_PATTERN",
    "TAIL_PATTERN",
    "EventLine",
    "ScannedEvent",
    "cited_blob",
    "match_event_line",
    "parse_event_line",
    "parse_line",
    "read_events",
    "scan_event_line",
    "text_bytes",
]


_ENTRY_AT: Final = len(ENTRY_START)
_KEYS: Final = {name: b',"' + name.encode() + b'":' for name, _ in EVENT_LINE_FIELDS[1:]}
# The fixed-shape suffix after the entry: the stated hashes (64 hex digits, or "v2:" and 64),
# the position's digits and the type, found at offsets computed from the keys.
_HASH_KEY: Final = _KEYS["event_hash"] + b'"'
_LEAF_KEY: Final = b'"' + _KEYS["leaf_hash"] + b'"'
_POSITION_KEY: Final = b'"' + _KEYS["position"]
_TYPE_END: Final = _KEYS["type"] + b'"event"}'


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
_OTHER_TYPES: Final = ("blob", "bundle", "checkpoint", "consistency", "inclusion")


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


# The canonical event line's tail, from the body's ``,"evidence_reference":`` key to the end, as
# one pattern generated from the same keys: the body's last seven fields, ``}`` and the
# fixed-shape suffix. The body's own key is the *last* ``,"evidence_reference":`` of the line
# (``rfind``): every field after the details is a scalar, and in canonical JSON ``,"`` with an
# unescaped quote occurs only as structure. Ids are their canonical text (no unescaped quote);
# the hashes are taken loosely because the caller compares each with the hash it computes (or
# the chain's), and the position, outside the entry, must be a canonical integer. Groups: the
# SHA-256 of the evidence blob the event cites (or ``None``), operation, prev hash, sequence,
# tenant, stated event hash, its ``v2:`` mark (or ``None``), its digits, leaf hash, position;
# the entry ends :data:`ENTRY_END` bytes before group 6.
if tuple(field.name for field in TAIL_FIELDS[-7:-5]) != ("evidence_reference", "observation_id"):
    raise AssertionError("the event scanner expects evidence_reference, observation_id last")
_STRING: Final = rb'([^"\\]*(?:\\.[^"\\]*)*)'
_LOOSE: Final = rb'([^"]*)'
_COUNT: Final = b"(0|[1-9][0-9]*)"
_REFERENCE_KEY: Final = _key("evidence_reference", quoted_before=False, quoted_after=False)
_OBSERVATION_KEY: Final = _key("observation_id", quoted_before=False, quoted_after=False)
_UNCAPTURED: Final = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
EVENT_START: Final = ENTRY_START + FIRST_KEY
"""How a canonical event line starts: ``{"entry":{"actor":``."""
REFERENCE_KEY: Final = _REFERENCE_KEY
"""Where :data:`TAIL_PATTERN` matches: the body's last ``,"evidence_reference":``."""
TAIL_PATTERN: Final = re.compile(
    re.escape(_REFERENCE_KEY)
    + rb'(?:null|"evidence_blobs/sha256:([0-9a-f]{64})"|'
    + _UNCAPTURED
    + b")"
    + re.escape(_OBSERVATION_KEY)
    + b"(?:null|"
    + _UNCAPTURED
    + b")"
    + re.escape(_OPERATION_KEY)
    + _STRING
    + re.escape(_PREV_KEY)
    + _LOOSE
    + re.escape(_RECORDED_KEY)
    + b"[^,]*"
    + re.escape(_SEQUENCE_KEY)
    + _COUNT
    + re.escape(_TENANT_KEY)
    + _STRING
    + re.escape(b'"}' + _HASH_KEY)
    + b'((v2:)?([^"]*))'
    + re.escape(_LEAF_KEY)
    + _LOOSE
    + re.escape(_POSITION_KEY)
    + _COUNT
    + re.escape(_TYPE_END),
    re.DOTALL,
)
"""The tail of an event line in the canonical shape (see the comment above)."""
SCAN_PATTERN: Final = re.compile(
    TAIL_PATTERN.pattern.replace(_STRING, _LOOSE).replace(_UNCAPTURED, b'"[^"]*"'),
    re.DOTALL,
)
""":data:`TAIL_PATTERN` for ids without an escaped quote: the verifier's loop takes the line
with this one (a little faster) and leaves any other line to :func:`parse_event_line`."""
ENTRY_END: Final = len(_HASH_KEY)
"""How far before the event hash's group (:data:`TAIL_PATTERN` group 6) the entry ends."""


def match_event_line(line: bytes) -> re.Match[bytes] | None:
    """The :data:`TAIL_PATTERN` match of a line in the canonical event shape, else ``None``.

    The entry is ``line[len(ENTRY_START) : match.start(6) - ENTRY_END]``.
    """
    if not line.startswith(EVENT_START):
        return None
    return TAIL_PATTERN.fullmatch(line, line.rfind(_REFERENCE_KEY))


def _fast(line: bytes) -> EventLine | None:
    """Parse an event line in canonical shape by its pattern; ``None`` if it is not."""
    found = match_event_line(line)
    if found is None:
        return None
    entry = line[_ENTRY_AT : found.start(6) - ENTRY_END]
    _, operation, prev_hash, sequence, tenant, stated, _, _, leaf, digits = found.groups()
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
    :func:`~effectledger.audit.bundles.scan.scan_bundle` inlines the same steps.
    """
    found = match_event_line(line)
    if found is None:
        return None
    entry = line[_ENTRY_AT : found.start(6) - ENTRY_END]
    _, operation, prev_hash, sequence, tenant, stated, mark, digest, stated_leaf, digits = (
        found.groups()
    )
    domain = _DOMAIN_V1 if mark is None else _DOMAIN_V2
    leaf = _sha256(b"\x00" + entry).digest()
    if _sha256(domain + entry).hexdigest().encode() != digest or leaf.hex().encode() != stated_leaf:
        return None
    return (leaf, stated, int(digits), operation, prev_hash, int(sequence), tenant)


BLOB_MARK: Final = b'"evidence_reference":"evidence_blobs/sha256:'
"""In every entry that cites an evidence blob (and, rarely, in one whose details spell it)."""
_CITED: Final = re.compile(re.escape(_REFERENCE_KEY) + rb'"evidence_blobs/sha256:([0-9a-f]{64})"')
if TAIL_FIELDS[2].name != "evidence_reference" or TAIL_FIELDS[2].kind != "optional_text":
    raise AssertionError("the blob scanner expects evidence_reference among the scalar fields")


def cited_blob(entry: bytes) -> str | None:
    """The SHA-256 (hex) of the evidence blob an event's canonical bytes cite, if they cite one.

    The body's own ``evidence_reference`` is the last ``,"evidence_reference":`` key of the
    entry (the fields after the details are scalars); its value cites a blob when it is exactly
    ``evidence_blobs/sha256:<64 hex digits>``
    (:data:`~effectledger.model.evidence.EVIDENCE_REFERENCE`).
    """
    if BLOB_MARK not in entry:
        return None
    found = _CITED.match(entry, entry.rfind(_REFERENCE_KEY))
    return None if found is None else found.group(1).decode("ascii")


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
