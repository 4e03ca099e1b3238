"""JSON text as every caller reads it: one parser for tool arguments and request bodies.

The function tools, the reviewer's tools, MCP's tool arguments and the HTTP API's bodies are
read by the same rules, so a call refused through one caller is refused through every other:

* at most :data:`MAX_JSON_BYTES` of text (64 KiB; a caller may set its own bound);
* no key repeated in an object: readers disagree on which value counts, so a reviewer could be
  shown one value while the ledger acts on another;
* no ``NaN`` or ``Infinity`` (not JSON), no integer longer than Python parses;
* arrays and objects nested at most :data:`MAX_JSON_DEPTH` levels deep.

A number written with a fraction or an exponent that is exactly a whole number (``30.0``,
``3e1``) is read as that integer, as JSON Schema counts it; any other such number stays a float
(which the ledger's strict argument models refuse for an integer field). An already parsed
value is held to the same depth and its whole floats become integers too
(:func:`whole_numbers`).

A refusal is :class:`~effectledger.errors.InvalidInput` whose message starts with what was read
(``tool arguments: the key 'amount' is repeated``); the HTTP API answers it as
``400 malformed_request``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

import pydantic_core

from effectledger.errors import InvalidInput

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "check_depth",
    "read_json",
    "read_json_object",
    "whole_numbers",
]

MAX_JSON_BYTES: Final = 64 * 1024
"""The most text a tool call's arguments may take."""
MAX_JSON_DEPTH: Final = 64
"""The deepest nesting of arrays and objects a document may have."""


class _Repeated(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _Constant(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Repeated(key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


_WHOLE_DIGITS: Final = 64
"""A whole number written with a fraction or an exponent is read as an integer up to this many
digits (a ``1e999999`` would otherwise make a huge integer); past it, it stays a float."""


def _number(text: str) -> int | float:
    exact = Decimal(text)
    if exact.is_finite() and exact.adjusted() < _WHOLE_DIGITS and exact == exact.to_integral():
        return int(exact)
    return float(text)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique, parse_constant=_refuse_constant, parse_float=_number
)
_SCALARS = frozenset({str, int, bool, type(None)})


def whole_numbers(value: Any) -> Any:
    """``value`` (parsed JSON) with every float that is a whole number as an integer."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() and abs(value) < 10**_WHOLE_DIGITS else value
    if kind is dict:
        return {key: whole_numbers(item) for key, item in value.items()}
    if kind is list:
        return [whole_numbers(item) for item in value]
    return value


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects deeper than ``limit``, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children)
    return False


def check_depth(value: Any, *, what: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse ``value`` (already parsed, as an MCP client's arguments are) if it nests arrays
    and objects deeper than ``max_depth``."""
    if _depth_over(value, max_depth):
        raise InvalidInput(f"{what}: nested deeper than {max_depth} levels")


def read_json(
    text: str | bytes,
    *,
    what: str,
    max_bytes: int | None = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The value of JSON ``text`` read by the rules above; ``what`` names it in a refusal."""
    if max_bytes is not None and len(text) > max_bytes:
        raise InvalidInput(f"{what}: more than {max_bytes} bytes")
    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
        value = _DECODER.decode(decoded)
    except _Repeated as repeated:
        raise InvalidInput(
            f"{what}: the key {repeated.key[:64]!r} is repeated", field=repeated.key[:64]
        ) from None
    except _Constant as constant:
        raise InvalidInput(f"{what}: {constant} is not JSON") from None
    except RecursionError:
        raise InvalidInput(f"{what}: nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        if "digits" in str(exc):
            raise InvalidInput(f"{what}: an integer too long to be a number") from None
        raise InvalidInput(f"{what}: not valid JSON") from None
    check_depth(value, what=what, max_depth=max_depth)
    return value


def _colons(text: str | bytes) -> int:
    """How many colons the text holds: the fast parse is taken only when it equals the keys.

    pydantic-core's parser keeps the last of repeated keys silently. Every key in JSON text is
    followed by a colon, so when the text holds exactly as many colons as the parsed object has
    keys, no key repeats and no nested object holds a key: that parse is the exact one. Anything
    else (colons inside strings, nested objects, text it refuses) goes to the exact parser,
    which names the problem.
    """
    return text.count(b":") if isinstance(text, bytes) else text.count(":")


def read_json_object(
    text: str | bytes,
    *,
    what: str,
    max_bytes: int | None = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> dict[str, Any]:
    """The JSON object ``text`` holds (empty text: ``{}``), read by the rules above.

    The common case, a flat object, is parsed by pydantic-core and taken only when it is
    proven equal to the exact parse (see :func:`_colons`); anything else is read exactly.
    """
    if max_bytes is not None and len(text) > max_bytes:
        raise InvalidInput(f"{what}: more than {max_bytes} bytes")
    try:
        quick = pydantic_core.from_json(text, allow_inf_nan=False)
    except ValueError:
        quick = None
    if (
        type(quick) is dict
        and _colons(text) == len(quick)
        and all(type(item) in _SCALARS for item in quick.values())
    ):
        return quick  # the common case: flat, no float, read exactly as the exact parse reads it
    if not text.strip():
        return {}
    value = read_json(text, what=what, max_bytes=None, max_depth=max_depth)
    if not isinstance(value, dict):
        raise InvalidInput(f"{what}: not a JSON object")
    return value
