"""The canonical encodings and the digests built on them.

Two versions exist. **Version 2** (written by everything new) is exactly RFC 8785, the JSON
Canonicalization Scheme (JCS), restricted to the values below, so any language's JCS library
reproduces the bytes. **Version 1** (``effectledger-canonical/1``) is what records written before
it use; it is kept so they still verify. Both turn a JSON-like value into exactly one byte string:

* ``null``, ``true``, ``false`` as in JSON;
* integers in plain decimal (no sign on zero, no leading zeros): version 2 accepts
  ±(2^53-1), the integers every JSON reader (JavaScript's ``JSON.parse`` included) reads
  exactly; version 1 accepted the signed 64-bit range;
* strings as JSON strings in UTF-8 with only ``"``, ``\\`` and U+0000-U+001F escaped
  (as ``\\"``, ``\\\\`` and ``\\u00XX`` in lower-case hex, except ``\\b \\f \\n \\r \\t``); the code
  points are kept exactly as given, **no Unicode normalization** is applied, so NFC and NFD
  spellings of the same text are different values (normalize in the action's argument model if
  the business wants them equal); lone surrogates are refused;
* arrays as ``[`` items joined by ``,`` ``]``;
* objects as ``{`` ``"key":value`` pairs joined by ``,`` ``}``, keys strings, sorted by their
  UTF-16 code units in version 2 (RFC 8785 §3.2.3) and by their UTF-8 bytes in version 1 (the
  two orders differ only between a key character in U+E000-U+FFFF and one above U+FFFF);
* no whitespace anywhere; floats (including ``-0.0``), NaN and other types are refused.

A digest is ``SHA-256("effectledger/" ‖ domain ‖ "/v" ‖ version ‖ "\\n" ‖ canonical bytes)`` in
lower-case hex; the domain (``command``, ``proposal``, ``event``...) keeps a value hashed for one
purpose from ever matching a value hashed for another. The **digest string says its version**:
a version 2 digest is written ``v2:`` followed by the 64 hex digits, a version 1 digest is the
64 hex digits alone. :func:`digest_matches` recomputes a stored digest under its own version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from json.scanner import make_scanner
from typing import TYPE_CHECKING, Any, Final

from effectledger.errors import InvalidInput

if TYPE_CHECKING:
    from effectledger.model.operations import Command

__all__ = [
    "COMMAND_VERSION",
    "CURRENT_VERSION",
    "ENCODING_NAME",
    "ENCODING_NAMES",
    "MAX_CANONICAL_BYTES",
    "MAX_SAFE_INTEGER",
    "canonical_bytes",
    "decode_canonical",
    "digest",
    "digest_bytes",
    "digest_matches",
    "digest_version",
    "encode",
    "fingerprint",
    "fingerprinted",
    "is_plain",
    "loads_stored",
    "plain_chunks",
]

CURRENT_VERSION: Final = 2
"""The encoding version new digests, proposals and events are written with."""
ENCODING_NAMES: Final = {1: "effectledger-canonical/1", 2: "RFC 8785 (JCS)"}
ENCODING_NAME: Final = ENCODING_NAMES[1]
MAX_CANONICAL_BYTES = 64 * 1024
MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Version 2's integer bound: ±(2^53-1), exact in every JSON reader."""
COMMAND_VERSION: Final = 1
"""The version of command fingerprints: they are compared for equality with fingerprints stored
by earlier admissions (an exact replay) and kept by destinations, so they stay on version 1."""
_INT_RANGE: Final = {1: (-(2**63), 2**63 - 1), 2: (-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)}
_MARKS: Final = {1: "", 2: "v2:"}
_MAX_DEPTH = 32
_SHORT_ESCAPES = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}
_ESCAPES = {
    **{code: f"\\u{code:04x}" for code in range(0x20)},
    **_SHORT_ESCAPES,
}
_TRANSLATION = str.maketrans({chr(code): text for code, text in _ESCAPES.items()})


def _no_default(value: Any) -> Any:  # pragma: no cover - is_plain lets no such value through
    raise TypeError(f"{type(value).__name__} is not canonical JSON")


def _version(version: int) -> int:
    if version not in _INT_RANGE:
        raise InvalidInput(f"unknown canonical encoding version {version!r}", version=version)
    return version


def _string(value: str, path: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{path} holds a lone surrogate", field=path) from exc
    return '"' + value.translate(_TRANSLATION) + '"'


def _sort_key(version: int) -> Any:
    if version == 1:
        return lambda key: key.encode("utf-8", "surrogatepass")
    return lambda key: key.encode("utf-16-be", "surrogatepass")  # RFC 8785 §3.2.3


def encode(value: Any, *, version: int = CURRENT_VERSION, path: str = "$", depth: int = 0) -> str:
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
        low, high = _INT_RANGE[_version(version)]
        if not low <= value <= high:
            bound = "±(2^53-1)" if version == 2 else "the signed 64-bit range"
            raise InvalidInput(f"{path} is outside {bound}", field=path)
        return str(int(value))
    if isinstance(value, str):
        return _string(value, path)
    if isinstance(value, float):
        raise InvalidInput(
            f"{path} is a float; use an integer (money in minor units) or a string", field=path
        )
    if isinstance(value, Mapping):
        keys: list[str] = []
        for key in value:
            if not isinstance(key, str):
                raise InvalidInput(f"{path} has a non-string key {key!r}", field=path)
            keys.append(key)
        keys.sort(key=_sort_key(_version(version)))
        parts = [
            _string(key, f"{path}.{key}")
            + ":"
            + encode(value[key], version=version, path=f"{path}.{key}", depth=depth + 1)
            for key in keys
        ]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        parts = [
            encode(item, version=version, path=f"{path}[{i}]", depth=depth + 1)
            for i, item in enumerate(value)
        ]
        return "[" + ",".join(parts) + "]"
    raise InvalidInput(f"{path} has unsupported type {type(value).__name__}", field=path)


def is_plain(value: Any, depth: int, low: int, high: int, version: int) -> bool:
    """Whether ``value`` holds only exact dict/list/tuple/str/int/bool/None within the limits.

    For such a value the C JSON encoder below writes exactly the canonical text: it escapes the
    same characters the same way, and sorts ``str`` keys by code point, which is their UTF-8
    byte order and, unless a key holds a character above U+FFFF, their UTF-16 order too.
    Anything else (floats, subclasses, other mappings, errors to explain, keys whose two orders
    may differ) goes through :func:`encode`. ``depth`` is how deep ``value`` sits in what is
    encoded, ``low`` and ``high`` are ``version``'s integer bounds. A caller that encodes a
    value of a known shape itself (an event's body) checks its parts with it.
    """
    if depth > _MAX_DEPTH:
        return False
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(low <= value <= high)
    if depth == _MAX_DEPTH and (kind is dict or kind is list or kind is tuple) and value:
        return False  # its items would be one level too deep
    # Below, a container's scalar items are checked in place (no call each): one within the
    # depth limit, since a container at the limit with items was refused above.
    if kind is dict:
        keys = ""  # the keys, joined as they are walked (no call each) and checked at once
        for key in value:
            if type(key) is not str:
                return False
            keys += key
            item = value[key]
            of = type(item)
            if of is str or item is None or of is bool:
                continue
            if of is int:
                if not low <= item <= high:
                    return False
            elif not is_plain(item, depth + 1, low, high, version):
                return False
        # Version 2 sorts keys by UTF-16 code unit: all-ASCII keys (the common case) sort
        # alike in both orders; otherwise each key is looked at.
        if version == 2 and keys and not keys.isascii():
            for key in value:
                if not key.isascii() and max(key) > "\uffff":
                    return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            of = type(item)
            if of is str or item is None or of is bool:
                continue
            if of is int:
                if not low <= item <= high:
                    return False
            elif not is_plain(item, depth + 1, low, high, version):
                return False
        return True
    return False


# check_circular is off because is_plain has already refused anything nested too deep (a cycle).
_dumps = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
plain_chunks = (
    None
    if _make_encoder is None
    else _make_encoder(
        None, _no_default, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )
)
"""The C encoder ``_dumps`` runs, called without its Python wrappers (the same text: the values
:func:`is_plain` passes are exactly what it encodes without a ``default``), as
``"".join(plain_chunks(value, 0))``; ``None`` where ``_json`` is missing."""


def canonical_bytes(
    value: Any, *, version: int = CURRENT_VERSION, limit: int = MAX_CANONICAL_BYTES
) -> bytes:
    """The canonical UTF-8 bytes of ``value``, refusing values larger than ``limit`` bytes."""
    data: bytes | None = None
    try:
        low, high = _INT_RANGE[version]
    except KeyError:
        _version(version)  # raises, naming the version
        raise
    # The hot path: encode()'s bytes, several times faster.
    if is_plain(value, 0, low, high, version):
        try:
            text = _dumps(value) if plain_chunks is None else "".join(plain_chunks(value, 0))
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: encode() names where it is
            data = None
    if data is None:
        data = encode(value, version=version).encode("utf-8")
    if len(data) > limit:
        raise InvalidInput(
            f"value is {len(data)} bytes in canonical form; the limit is {limit}",
            size=len(data),
            limit=limit,
        )
    return data


_scan: Any = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def loads_stored(text: str) -> Any:
    """The value of JSON text the ledger wrote (no whitespace around it): ``json.loads``'s
    value, from one call of its scanner; any other text goes through ``json.loads`` itself."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)  # raises its own error
    if text[end:]:  # something after the value (the slice is empty, with no call, if not)
        return json.loads(text)
    return value


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise _DuplicateKey(f"duplicate key {key!r}")
        value[key] = item
    return value


def _no_number(text: str) -> Any:
    raise ValueError(f"{text} is not an integer")


def decode_canonical(
    data: bytes, *, version: int = CURRENT_VERSION, limit: int = MAX_CANONICAL_BYTES
) -> Any:
    """The value whose canonical bytes are exactly ``data``; ``InvalidInput`` for anything else.

    Refuses what a lenient reader would let through: invalid UTF-8, a byte order mark,
    duplicate keys (readers disagree on which value counts), floats, whitespace, any other
    spelling of the value, so the bytes a signature or hash covers are the only reading.
    """
    try:
        value = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_unique_pairs,
            parse_float=_no_number,
            parse_constant=_no_number,
        )
    except _DuplicateKey as exc:
        raise InvalidInput(f"not canonical JSON: {exc}") from exc
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise InvalidInput(f"not JSON: {exc}") from exc
    if canonical_bytes(value, version=version, limit=limit) != data:
        raise InvalidInput("not canonical JSON: the same value has another canonical spelling")
    return value


def digest(
    domain: str, value: Any, *, version: int = CURRENT_VERSION, limit: int = MAX_CANONICAL_BYTES
) -> str:
    """The digest string of ``value`` (``v2:`` + hex for version 2), separated by ``domain``."""
    return digest_bytes(
        domain, canonical_bytes(value, version=version, limit=limit), version=version
    )


_PREFIXES: dict[tuple[str, int], bytes] = {}
"""Each (domain, version)'s prefix, made once: the ledger hashes under a handful of domains."""
_sha256 = hashlib.sha256


def _prefix(domain: str, version: int) -> bytes:
    prefix = f"effectledger/{domain}/v{_version(version)}\n".encode()
    if type(version) is int and len(_PREFIXES) < 256:
        _PREFIXES[domain, version] = prefix
    return prefix


def digest_bytes(domain: str, data: bytes, *, version: int = CURRENT_VERSION) -> str:
    """:func:`digest` of bytes already canonical under ``version`` (so a caller encodes once)."""
    # The prefix is looked up for an int version only: ``True`` or ``1.0`` would find 1's, and
    # spell their own.
    try:
        prefix = _PREFIXES[domain, version] if type(version) is int else _prefix(domain, version)
    except KeyError:
        prefix = _prefix(domain, version)
    return _MARKS[version] + _sha256(prefix + data).hexdigest()


def digest_version(text: str) -> int:
    """The encoding version a digest string was written with (``v2:`` + hex, or bare hex: 1)."""
    if type(text) is str or isinstance(text, str):
        size = len(text)
        if size == 67 and text[:3] == "v2:":
            return 2
        if size == 64:
            return 1
    raise InvalidInput("not a digest string", field="digest")


def digest_matches(domain: str, value: Any, stored: str) -> bool:
    """Whether ``stored`` is ``value``'s digest under the version ``stored`` says it uses.

    A value the stored digest's version cannot encode does not match.
    """
    try:
        version = digest_version(stored)
        # digest(), spelled out: every read of a proposal comes through here.
        return digest_bytes(domain, canonical_bytes(value, version=version), version=version) == (
            stored
        )
    except InvalidInput:
        return False


def fingerprint(command: Command) -> str:
    """The digest binding an operation to its exact command and handler contract version."""
    return fingerprinted(command)[1]


def fingerprinted(command: Command) -> tuple[bytes, str]:
    """The command's canonical bytes (its action, contract version and arguments) and its
    :func:`fingerprint`, their digest: one encoding for a caller that stores the bytes too."""
    data = canonical_bytes(
        {
            "action": command.action,
            "contract_version": command.contract_version,
            "arguments": command.arguments,
        },
        version=COMMAND_VERSION,
    )
    return data, digest_bytes("command", data, version=COMMAND_VERSION)
