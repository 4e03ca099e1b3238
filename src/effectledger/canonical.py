"""The canonical encoding and the digests built on it.

Encoding ``effectledger-canonical/1`` turns a JSON-like value into exactly one byte string:

* ``null``, ``true``, ``false`` as in JSON;
* integers in plain decimal (no sign on zero, no leading zeros), limited to the signed 64-bit
  range so that every verifier, including JavaScript's ``BigInt``-free JSON, reads them exactly;
* strings as JSON strings in UTF-8 with only ``"``, ``\\`` and U+0000-U+001F escaped
  (as ``\\"``, ``\\\\`` and ``\\u00XX`` in lower-case hex, except ``\\b \\f \\n \\r \\t``); the code
  points are kept exactly as given, **no Unicode normalization** is applied, so NFC and NFD
  spellings of the same text are different values (normalize in the action's argument model if
  the business wants them equal); lone surrogates are refused;
* arrays as ``[`` items joined by ``,`` ``]``;
* objects as ``{`` ``"key":value`` pairs joined by ``,`` ``}``, keys sorted by their UTF-8 bytes,
  keys must be strings;
* no whitespace anywhere; floats (including ``-0.0``), NaN and other types are refused.

A digest is ``SHA-256("effectledger/" ‖ domain ‖ "/v1\\n" ‖ canonical bytes)`` written in lower-case
hex. The domain (``command``, ``proposal``, ``event``...) keeps a value hashed for one purpose from
ever matching a value hashed for another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from effectledger.errors import InvalidInput

if TYPE_CHECKING:
    from effectledger.model import Command

__all__ = [
    "ENCODING_NAME",
    "MAX_CANONICAL_BYTES",
    "canonical_bytes",
    "digest",
    "digest_bytes",
    "encode",
    "fingerprint",
]

ENCODING_NAME = "effectledger-canonical/1"
MAX_CANONICAL_BYTES = 64 * 1024
_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1
_MAX_DEPTH = 32
_SHORT_ESCAPES = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}
_ESCAPES = {
    **{code: f"\\u{code:04x}" for code in range(0x20)},
    **_SHORT_ESCAPES,
}
_TRANSLATION = str.maketrans({chr(code): text for code, text in _ESCAPES.items()})


def _string(value: str, path: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{path} holds a lone surrogate", field=path) from exc
    return '"' + value.translate(_TRANSLATION) + '"'


def encode(value: Any, *, path: str = "$", depth: int = 0) -> str:
    """Return the canonical text of ``value``; raise ``InvalidInput`` naming the bad path."""
    if depth > _MAX_DEPTH:
        raise InvalidInput(f"{path} nests deeper than {_MAX_DEPTH} levels", field=path)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise InvalidInput(f"{path} is outside the signed 64-bit range", field=path)
        return str(int(value))
    if isinstance(value, str):
        return _string(value, path)
    if isinstance(value, float):
        raise InvalidInput(
            f"{path} is a float; use an integer (money in minor units) or a string", field=path
        )
    if isinstance(value, Mapping):
        items: list[tuple[bytes, str, Any]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{path} has a non-string key {key!r}", field=path)
            items.append((key.encode("utf-8", "surrogatepass"), key, item))
        items.sort(key=lambda entry: entry[0])
        parts = [
            _string(key, f"{path}.{key}")
            + ":"
            + encode(item, path=f"{path}.{key}", depth=depth + 1)
            for _, key, item in items
        ]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        parts = [encode(item, path=f"{path}[{i}]", depth=depth + 1) for i, item in enumerate(value)]
        return "[" + ",".join(parts) + "]"
    raise InvalidInput(f"{path} has unsupported type {type(value).__name__}", field=path)


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` holds only exact dict/list/tuple/str/int/bool/None within the limits.

    For such a value the C JSON encoder below writes exactly the canonical text: it escapes the
    same characters the same way, and sorting ``str`` keys by code point is sorting them by
    their UTF-8 bytes. Anything else (floats, subclasses, other mappings, errors to explain)
    goes through :func:`encode`.
    """
    if depth > _MAX_DEPTH:
        return False
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if depth == _MAX_DEPTH and (kind is dict or kind is list or kind is tuple) and value:
        return False  # its items would be one level too deep
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) is not str and not _plain(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        return all(type(item) is str or _plain(item, depth + 1) for item in value)
    return False


# check_circular is off because _plain has already refused anything nested too deep (a cycle).
_dumps = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode


def canonical_bytes(value: Any, *, limit: int = MAX_CANONICAL_BYTES) -> bytes:
    """The canonical UTF-8 bytes of ``value``, refusing values larger than ``limit`` bytes."""
    data: bytes | None = None
    if _plain(value, 0):  # the hot path: the same bytes as encode(), several times faster
        try:
            data = _dumps(value).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: encode() names where it is
            data = None
    if data is None:
        data = encode(value).encode("utf-8")
    if len(data) > limit:
        raise InvalidInput(
            f"value is {len(data)} bytes in canonical form; the limit is {limit}",
            size=len(data),
            limit=limit,
        )
    return data


def digest(domain: str, value: Any, *, limit: int = MAX_CANONICAL_BYTES) -> str:
    """Lower-case hex SHA-256 of ``value``'s canonical bytes, separated by ``domain``."""
    return digest_bytes(domain, canonical_bytes(value, limit=limit))


def digest_bytes(domain: str, data: bytes) -> str:
    """:func:`digest` of bytes that are already canonical (so a caller encodes only once)."""
    return hashlib.sha256(f"effectledger/{domain}/v1\n".encode() + data).hexdigest()


def fingerprint(command: Command) -> str:
    """The digest binding an operation to its exact command and handler contract version."""
    return digest(
        "command",
        {
            "action": command.action,
            "contract_version": command.contract_version,
            "arguments": command.arguments,
        },
    )
