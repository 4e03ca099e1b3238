"""The event format: one field tuple from which every encoder and parser of an event is built.

An event's **chain body** is the object of the fields of :data:`EVENT_FIELDS`, in that order
(which is the canonical key order: the names are ASCII, so UTF-8 and UTF-16 order agree)::

    {"actor":…,"attempt_id":…,"details":{…},"event_id":…,"event_type":…,
     "evidence_reference":…,"observation_id":…,"operation_id":…,"prev_hash":…,
     "recorded_us":…,"sequence":…,"tenant_id":…}

Its **canonical bytes** ``B`` are the body's canonical encoding
(:mod:`effectledger.model.canonical`) under the event's version. From ``B`` everything else
follows, with SHA-256 and nothing else:

* ``event_hash``: version 2 (every event written now) is ``"v2:" ‖ hex(SHA-256(
  "effectledger/event/v2\\n" ‖ B))`` with ``B`` in RFC 8785 form; version 1 (events written
  before) is ``hex(SHA-256("effectledger/event/v1\\n" ‖ B))``. The hash string says its version;
  the next event of the operation stores it as its ``prev_hash``;
* the Merkle **leaf entry** is ``B`` itself, so ``leaf_hash = SHA-256(0x00 ‖ B)`` (RFC 9162 §2.1.1).

The body, the row splice, the details cut, the bundle's event line and its fast scanner
(:mod:`effectledger.audit.bundles.format`, :mod:`effectledger.audit.bundles.reader`) are all
generated from :data:`EVENT_FIELDS`; adding a field is one line here (with its ``audit_events``
column and its :class:`~effectledger.model.AuditEvent` attribute).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from effectledger.errors import InvalidInput
from effectledger.model.canonical import (
    CURRENT_VERSION,
    MAX_CANONICAL_BYTES,
    MAX_SAFE_INTEGER,
    canonical_bytes,
    decode_canonical,
    encode,
    is_plain,
    plain_chunks,
)
from effectledger.model.operations import AuditEvent, from_micros, to_micros

__all__ = [
    "EVENT_DOMAINS",
    "EVENT_FIELDS",
    "GENESIS_HASH",
    "TAIL_FIELDS",
    "EventField",
    "body_from_event",
    "body_from_row",
    "canonical_entry",
    "entry_bytes",
    "entry_from_row",
    "event_body",
    "event_from_body",
    "event_from_row",
    "event_version",
    "hash_event",
    "hash_event_stored",
    "hash_of_entry",
    "leaf_of_entry",
    "stored_entry",
]

GENESIS_HASH: Final = "0" * 64
"""The ``prev_hash`` of an operation's first event."""

EVENT_DOMAINS: Final = {1: b"effectledger/event/v1\n", 2: b"effectledger/event/v2\n"}
"""The domain prefix of an event hash, per encoding version."""
_MARKS: Final = {1: "", 2: "v2:"}


@dataclass(frozen=True, slots=True)
class EventField:
    """One field of the chain body: its key, kind, ``audit_events`` column and model attribute."""

    name: str
    kind: str  # text | optional_text | object | hash | micros | count
    attribute: str = ""
    stored_as: str = ""

    @property
    def column(self) -> str:
        """The ``audit_events`` column holding the field."""
        return self.stored_as or self.name

    @property
    def model_name(self) -> str:
        """The :class:`~effectledger.model.AuditEvent` attribute holding the field."""
        return self.attribute or self.name


EVENT_FIELDS: Final = (
    EventField("actor", "text"),
    EventField("attempt_id", "optional_text"),
    EventField("details", "object", stored_as="details_json"),
    EventField("event_id", "text"),
    EventField("event_type", "text"),
    EventField("evidence_reference", "optional_text"),
    EventField("observation_id", "optional_text"),
    EventField("operation_id", "text"),
    EventField("prev_hash", "hash"),
    EventField("recorded_us", "micros", attribute="recorded_at"),
    EventField("sequence", "count"),
    EventField("tenant_id", "text"),
)
"""The chain body's fields in canonical order: the one definition of the event format."""

_NAMES: Final = tuple(field.name for field in EVENT_FIELDS)
_NAME_SET: Final = frozenset(_NAMES)
_OBJECT: Final = next(i for i, field in enumerate(EVENT_FIELDS) if field.kind == "object")


def _check_layout() -> None:
    """The encoders below rely on this layout; a field added out of order fails at import."""
    if list(_NAMES) != sorted(_NAMES) or not all(name.isascii() for name in _NAMES):
        raise AssertionError("EVENT_FIELDS must be ASCII names in canonical order")
    if [field.kind for field in EVENT_FIELDS].count("object") != 1 or _OBJECT in (
        0,
        len(EVENT_FIELDS) - 1,
    ):
        raise AssertionError("EVENT_FIELDS needs one object field between scalar fields")


_check_layout()

# The details object is cut out of (and spliced into) the body's text between these two keys.
# Unambiguous: a '"' inside a string literal is always escaped, so ',"' occurs only between
# items; the fields around the object are scalars, so the first OBJECT_KEY and the last
# AFTER_KEY are the body's own keys, whatever the details hold.
OBJECT_KEY: Final = b',"' + _NAMES[_OBJECT].encode() + b'":'
AFTER_KEY: Final = b',"' + _NAMES[_OBJECT + 1].encode() + b'":'
FIRST_KEY: Final = b'{"' + _NAMES[0].encode() + b'":'
TAIL_FIELDS: Final = EVENT_FIELDS[_OBJECT + 1 :]
"""The scalar fields after the object field, which fast scanners find by their keys."""

_sha256 = hashlib.sha256


def event_body(**fields: Any) -> dict[str, Any]:
    """The exact value whose canonical bytes an event's hash and leaf commit to."""
    if fields.keys() != _NAME_SET:
        missing = sorted(_NAME_SET - fields.keys())
        extra = sorted(fields.keys() - _NAME_SET)
        raise TypeError(f"event_body: missing {missing}, unexpected {extra}")
    body = {name: fields[name] for name in _NAMES}
    body[_NAMES[_OBJECT]] = dict(fields[_NAMES[_OBJECT]])
    return body


_FROM_ROW: Final[dict[str, Callable[[Any], Any]]] = {
    "object": json.loads,
    "micros": int,
    "count": int,
}


def body_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The chain body of a stored ``audit_events`` row (its details parsed from JSON)."""
    return {
        field.name: _FROM_ROW.get(field.kind, _same)(row[field.column]) for field in EVENT_FIELDS
    }


def _same(value: Any) -> Any:
    return value


def body_from_event(event: AuditEvent) -> dict[str, Any]:
    """The chain body of an :class:`~effectledger.model.AuditEvent`."""
    body = {field.name: getattr(event, field.model_name) for field in EVENT_FIELDS}
    for field in EVENT_FIELDS:
        if field.kind == "micros":
            body[field.name] = to_micros(body[field.name])
        elif field.kind == "object":
            body[field.name] = dict(body[field.name])
    return body


def event_from_body(body: Mapping[str, Any], event_hash: str) -> AuditEvent:
    """An :class:`~effectledger.model.AuditEvent` from a chain body and its hash."""
    values = {field.model_name: body[field.name] for field in EVENT_FIELDS}
    for field in EVENT_FIELDS:
        if field.kind == "micros":
            values[field.model_name] = from_micros(int(body[field.name]))
        elif field.kind == "count":
            values[field.model_name] = int(body[field.name])
    return AuditEvent(**values, event_hash=event_hash)


def event_from_row(row: Mapping[str, Any]) -> AuditEvent:
    """An :class:`~effectledger.model.AuditEvent` from a stored ``audit_events`` row."""
    return event_from_body(body_from_row(row), row["event_hash"])


def event_version(event_hash: str) -> int:
    """The encoding version an event hash string was written with (``v2:`` + hex, else 1)."""
    return 2 if event_hash.startswith("v2:") else 1


def entry_bytes(body: Mapping[str, Any], version: int = CURRENT_VERSION) -> bytes:
    """The canonical bytes of a chain body: the event's Merkle leaf entry."""
    return canonical_bytes(body, version=version)


def hash_of_entry(entry: bytes, version: int = CURRENT_VERSION) -> str:
    """The ``event_hash`` string of an event given its canonical bytes and version."""
    return _MARKS[version] + _sha256(EVENT_DOMAINS[version] + entry).hexdigest()


def leaf_of_entry(entry: bytes) -> bytes:
    """The RFC 9162 leaf hash ``SHA-256(0x00 ‖ entry)`` of an event's canonical bytes."""
    return _sha256(b"\x00" + entry).digest()


def hash_event(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(event_hash, details_json)`` of a new event's body (current version), encoding it once.

    ``details_json`` is the canonical text of the body's object field, stored beside the hash;
    it is cut out of the body's text (see :data:`OBJECT_KEY`) instead of encoded a second time.
    """
    event_hash, details_json, _ = hash_event_stored(body)
    return event_hash, details_json


_STORED_TAG: Final = {1: b"", 2: b"\x02"}
"""What the stored bytes of a hash put before its digest, per version (``store.hashes``)."""


_SCALAR_NAMES: Final = tuple(name for name in _NAMES if name != _NAMES[_OBJECT])
_OBJECT_TEXT: Final = OBJECT_KEY.decode()
_OBJECT_TEXT_SIZE: Final = len(_OBJECT_TEXT)
_AFTER_TEXT: Final = AFTER_KEY.decode()
_FIELD_COUNT: Final = len(EVENT_FIELDS)


def hash_event_stored(body: Mapping[str, Any]) -> tuple[str, str, bytes]:
    """:func:`hash_event`, and the hash's stored bytes (``store.hashes``), from one digest.

    ``body`` is a chain body (:func:`event_body`'s fields). Every event the ledger writes comes
    through here, so the body's shape is used: its scalar fields are checked in place (text,
    null, or an integer within version 2's bound), its details by :func:`is_plain`, and the C
    encoder then writes the canonical text at once, as :func:`canonical_bytes` would. Any other
    body goes through :func:`canonical_bytes`, which encodes it or says why it cannot.
    """
    data: bytes | None = None
    text = ""
    if plain_chunks is not None and len(body) == _FIELD_COUNT:
        for name in _SCALAR_NAMES:
            value = body[name]
            kind = type(value)
            if not (
                kind is str
                or value is None
                or (kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
            ):
                break
        else:
            # Version 2 (CURRENT_VERSION), whose integer bound MAX_SAFE_INTEGER is.
            details = body[_NAMES[_OBJECT]]
            if is_plain(details, 1, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, CURRENT_VERSION):
                text = "".join(plain_chunks(body, 0))
                try:
                    data = text.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate: canonical_bytes names where
                    data = None
    if data is None or len(data) > MAX_CANONICAL_BYTES:
        data = canonical_bytes(body)  # raises for a body too large, or not encodable
        text = data.decode("utf-8")
    # The details' text, cut out of the body's (see OBJECT_KEY) instead of encoded again.
    start = text.index(_OBJECT_TEXT) + _OBJECT_TEXT_SIZE
    end = text.rindex(_AFTER_TEXT)
    digest = _sha256(EVENT_DOMAINS[CURRENT_VERSION] + data).digest()
    return (
        _MARKS[CURRENT_VERSION] + digest.hex(),
        text[start:end],
        _STORED_TAG[CURRENT_VERSION] + digest,
    )


def _scalar(value: Any) -> str:
    """:func:`encode`'s text of a scalar field, without its general walk for the common values.

    A string of printable ASCII without ``"`` or ``\\`` needs no escape; an integer within
    version 2's bound is its decimal digits. Anything else is left to :func:`encode`.
    """
    kind = type(value)
    if kind is str:
        text: str = value
        if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
            return '"' + text + '"'
    elif kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
    elif value is None:
        return "null"
    return encode(value)


_SPLICE: Final = [
    (("," if i else "{") + f'"{field.name}":', field.column, field.kind == "object")
    for i, field in enumerate(EVENT_FIELDS)
]
_KEYS: Final = tuple(key for key, _, _ in _SPLICE)
_COLUMNS: Final = tuple(column for _, column, _ in _SPLICE)


def entry_from_row(row: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a stored row, splicing its stored details text as it is.

    The ledger stores the details in canonical form, so this equals
    ``entry_bytes(body_from_row(row), version)`` for every row it wrote (the scalar fields
    encode the same in both versions), several times faster. A row whose details were rewritten
    gives other bytes, so callers compare the result's hash with the stored ``event_hash`` (the
    sealer does) or leave that to verification (the exporter).
    """
    # Built in one loop, without a call per field (a claim hashes every event of its trail this
    # way): text is quoted as it is, None is null, an integer within version 2's bound is its
    # digits, and the texts are checked at once afterwards. Printable ASCII without '"' or
    # '\\' is what the ledger writes; any other value or text goes through _scalar's own
    # check, field by field (_spliced).
    entry = ""
    texts = ""
    for key, column, is_object in _SPLICE:
        value = row[column]
        kind = type(value)
        if is_object:  # the details' stored text, spliced as it is
            if kind is not str:
                return _spliced(row)
            entry += key + value
        elif kind is str:
            texts += value
            entry += key + '"' + value + '"'
        elif value is None:
            entry += key + "null"
        elif kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            entry += key + str(value)
        else:
            return _spliced(row)
    if texts.isascii() and texts.isprintable() and '"' not in texts and "\\" not in texts:
        return (entry + "}").encode()
    return _spliced(row)


def _spliced(row: Mapping[str, Any]) -> bytes:
    """:func:`entry_from_row` of a row with a value it does not write itself: each scalar
    through :func:`_scalar`, the details' stored text as it is."""
    values = [row[column] for column in _COLUMNS]
    details = values[_OBJECT]
    values[_OBJECT] = None
    parts = [_scalar(value) for value in values]
    parts[_OBJECT] = details
    return ("".join([key + part for key, part in zip(_KEYS, parts, strict=True)]) + "}").encode()


def stored_entry(row: Mapping[str, Any]) -> bytes:
    """A stored row's entry bytes as they hash to its stored ``event_hash`` if at all possible.

    Tries the fast splice of :func:`entry_from_row`, then a full re-encoding under the version
    the stored hash names (for details that were merely reformatted); if neither reproduces the
    stored hash the row was changed, and the spliced bytes are returned, for the caller to judge.
    """
    version = event_version(row["event_hash"])
    entry = entry_from_row(row)
    if hash_of_entry(entry, version) == row["event_hash"]:
        return entry
    try:
        canonical = entry_bytes(body_from_row(row), version)
    except (ValueError, InvalidInput):
        return entry
    return canonical if hash_of_entry(canonical, version) == row["event_hash"] else entry


def canonical_entry(row: Mapping[str, Any]) -> bytes | None:
    """A stored row's canonical bytes if they reproduce its stored ``event_hash``, else ``None``.

    What the sealer seals: besides the hash, the spliced details text must be the canonical
    encoding of its value (no duplicate keys, no other spelling), so every sealed leaf has one
    reading. A row whose details were merely reformatted is re-encoded.
    """
    version = event_version(row["event_hash"])
    entry = entry_from_row(row)
    if hash_of_entry(entry, version) == row["event_hash"]:
        details = row[EVENT_FIELDS[_OBJECT].column]
        if details == "{}":
            return entry
        try:
            return (
                entry
                if isinstance(decode_canonical(details.encode(), version=version), dict)
                else None
            )
        except InvalidInput:
            return None
    try:
        canonical = entry_bytes(body_from_row(row), version)
    except (ValueError, InvalidInput):
        return None
    return canonical if hash_of_entry(canonical, version) == row["event_hash"] else None
