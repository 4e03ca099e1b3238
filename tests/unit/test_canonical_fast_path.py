"""The fast path of the canonical encoding must never change a byte of a digest or an error.

``canonical_bytes`` hands plain values to the C JSON encoder and everything else to the
reference encoder ``encode``. A single differing byte would silently break every stored
fingerprint and audit hash, so the two are compared on arbitrary values, including lone
surrogates, every control character, out-of-range integers, floats and nesting at the limit.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectledger.errors import InvalidInput
from effectledger.model.canonical import canonical_bytes, encode

# Any code point, lone surrogates included; weighted towards the characters that get escaped.
characters = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.sampled_from([chr(code) for code in range(0x20)] + ['"', "\\", "\x7f", "\u2028", "/"]),
)
texts = st.text(characters, max_size=12)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    texts,
    st.floats(allow_nan=True),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(texts, inner, max_size=4),
        st.dictionaries(st.one_of(texts, st.integers()), inner, max_size=2),
    ),
    max_leaves=20,
)


def reference(value: Any, version: int = 2) -> tuple[str, object]:
    """What the reference encoder makes of ``value``: its bytes or its refusal."""
    try:
        return ("bytes", encode(value, version=version).encode("utf-8"))
    except InvalidInput as exc:
        return ("refused", exc.message)


def fast(value: Any, version: int = 2) -> tuple[str, object]:
    """What ``canonical_bytes`` makes of ``value``: its bytes or its refusal."""
    try:
        return ("bytes", canonical_bytes(value, version=version, limit=1 << 30))
    except InvalidInput as exc:
        return ("refused", exc.message)


@pytest.mark.slow
@settings(max_examples=400)
@given(values)
def test_canonical_bytes_equal_the_reference_encoding(value: Any) -> None:
    """For any value the fast path yields exactly the reference bytes, or the same refusal."""
    assert fast(value) == reference(value)
    assert fast(value, 1) == reference(value, 1)


@pytest.mark.parametrize("version", [1, 2])
def test_code_points_are_escaped_and_sorted_like_the_reference(version: int) -> None:
    """Code points of every UTF-8 length, as keys in reversed order and as values, match."""
    boundaries = {0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF}
    codes = sorted({*range(0x800), *range(0x800, 0x110000, 257), *boundaries})
    scalars_only = [code for code in codes if not 0xD800 <= code <= 0xDFFF]
    for start in range(0, len(scalars_only), 1024):
        chunk = [chr(code) for code in reversed(scalars_only[start : start + 1024])]
        value: dict[str, Any] = {character: [character + "x"] for character in chunk}
        assert fast(value, version) == reference(value, version), hex(ord(chunk[-1]))
    for surrogate in (0xD800, 0xDBFF, 0xDC00, 0xDFFF):
        for refused in ({chr(surrogate): 1}, {"k": "a" + chr(surrogate)}):
            assert fast(refused, version) == reference(refused, version)
            assert fast(refused, version)[0] == "refused"


def test_nesting_at_the_depth_limit_is_judged_like_the_reference() -> None:
    """Values nested just below, at and above the depth limit get the reference's answer."""
    for depth in range(28, 36):
        leaves: list[Any] = ["s", 1, None, [], {}, {"a": "b"}, ("t",)]
        for leaf in leaves:
            value: Any = leaf
            for _ in range(depth):
                value = [value]
            assert fast(value) == reference(value), (depth, leaf)
