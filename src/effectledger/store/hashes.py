"""Hash columns stored as their bytes, read back as the hex strings everything above sees.

An event hash, a proposal digest, a command fingerprint and a Merkle leaf are SHA-256 digests
written as text: 64 lowercase hex digits, with ``v2:`` in front for version 2 encodings. Stored
as text each takes 64 or 67 bytes; stored as bytes, 32 or 33:

* ``hex`` (version 1, the genesis hash, a fingerprint, a leaf): its 32 bytes;
* ``v2:`` + ``hex``: the byte ``0x02`` then its 32 bytes;
* anything else (only a hand edit of the database makes one): its UTF-8 text, unchanged.

:func:`pack_hash` and :func:`unpack_hash` are exact inverses on the ledger's own hash strings,
so event hashes, leaves, checkpoints and bundles stay byte for byte what they were. Both stores
pack the parameters named in :data:`HASH_PARAMETERS` (:func:`storable`) and unpack the columns
of :data:`HASH_COLUMNS` as rows are read: SQLite through the columns' declared type ``DIGEST``
(:data:`SQLITE_TYPE`), PostgreSQL by column name (its columns are ``bytea``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from effectledger.store import refuse_unstorable_text

__all__ = [
    "HASH_COLUMNS",
    "HASH_PARAMETERS",
    "SQLITE_TYPE",
    "pack_hash",
    "pack_row",
    "packed_form",
    "packed_or_text",
    "storable",
    "unpack_hash",
    "unpacked",
]

SQLITE_TYPE: Final = "DIGEST"
"""The first word of a hash column's declared type in SQLite (``DIGEST BLOB``: BLOB affinity)."""

HASH_PARAMETERS: Final = frozenset(
    {"event_hash", "prev_hash", "fingerprint", "digest", "leaf_hash"}
)
"""Named-query parameters that hold a hash: packed before they reach the driver."""

_HASH_NAMES: Final = tuple(sorted(HASH_PARAMETERS))

HASH_COLUMNS: Final = HASH_PARAMETERS | {"last_event_hash", "sealed_leaf"}
"""Result columns that hold a stored hash (by name, with the aliases the queries give them)."""

_V2: Final = "v2:"
_V2_TAG: Final = b"\x02"


def packed_form(text: str) -> bytes | None:
    """The 32 or 33 stored bytes of one of the ledger's hash strings, ``None`` for other text."""
    digits = text[3:] if len(text) == 67 and text.startswith(_V2) else text
    if len(digits) != 64:
        return None
    try:
        packed = bytes.fromhex(digits)
    except ValueError:
        return None
    if packed.hex() != digits:  # upper case or spaces: not a string the ledger writes
        return None
    return packed if digits is text else _V2_TAG + packed


StoredValue = str | bytes | int | float | None
"""A value SQLite stores."""


def packed_or_text(value: StoredValue) -> StoredValue:
    """A hash column's text as its stored bytes; text the ledger did not write stays as it is.

    SQLite's ``effectledger_pack_hash`` (migration 15 packs the text written before it).
    """
    packed = packed_form(value) if isinstance(value, str) else None
    return value if packed is None else packed


def pack_hash(text: str) -> bytes:
    """The stored bytes of a hash string (see the module docstring for the three forms)."""
    # packed_form, spelled out: every write's hashes come through here.
    size = len(text)
    if size == 67 and text[:3] == _V2:
        digits, tag = text[3:], _V2_TAG
    elif size == 64:
        digits, tag = text, b""
    else:
        return text.encode("utf-8")
    try:
        packed = bytes.fromhex(digits)
    except ValueError:
        return text.encode("utf-8")
    # Upper case or spaces: not a string the ledger writes, so kept as its text.
    return tag + packed if packed.hex() == digits else text.encode("utf-8")


def unpack_hash(stored: bytes) -> str:
    """The hash string of stored bytes: the inverse of :func:`pack_hash`."""
    size = len(stored)
    if size == 32:
        return stored.hex()
    if size == 33 and stored[0] == 2:
        return _V2 + stored[1:].hex()
    return stored.decode("utf-8", "replace")


def unpacked(value: Any) -> Any:
    """A stored hash column's value as its string (``None`` and text stay as they are)."""
    if type(value) is bytes:  # what the drivers return: no call to find it
        return unpack_hash(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return unpack_hash(bytes(value))
    return value


def storable(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """``params`` checked (:func:`refuse_unstorable_text`) with every hash parameter packed."""
    # One check of all the text at once (the common case: ASCII without NUL); the check that
    # names the field runs only when it finds something. The text is joined in a loop: every
    # statement comes through here, and a comprehension is a call of its own.
    joined = ""
    for value in params.values():
        if type(value) is str:
            joined += value
    if "\x00" in joined or not joined.isascii():
        refuse_unstorable_text(params)
    # The five names looked up in place (no call each); a copy only when a hash is still text.
    packed: dict[str, Any] | None = None
    for name in _HASH_NAMES:
        if name in params:
            value = params[name]
            if type(value) is str:
                if packed is None:
                    packed = dict(params)
                packed[name] = pack_hash(value)
    return params if packed is None else packed


def pack_row(columns: Sequence[str], row: Sequence[Any]) -> tuple[Any, ...]:
    """A row of whole-table values with its hash columns' strings packed (moving a ledger)."""
    return tuple(
        pack_hash(value) if type(value) is str and name in HASH_COLUMNS else value
        for name, value in zip(columns, row, strict=True)
    )
