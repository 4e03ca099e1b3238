"""The fast parse of a model's tool arguments must answer exactly as the exact parser does.

``parse_arguments`` takes pydantic-core's parse only when the text holds as many colons as the
parsed object has keys and no value is a float or a container; otherwise the exact parser
(duplicate keys, NaN and Infinity refused, a whole number written with a fraction read as that
integer) decides. Both are compared here on arbitrary JSON-like text, including repeated keys,
nested objects, colons inside strings, lone surrogates and numbers out of range.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectledger.callers.tools.function_tools import parse_arguments
from effectledger.errors import InvalidInput


def _exact(text: str) -> Any:
    """The exact parser's answer: the object, or the error's message."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("repeated key")
        return dict(pairs)

    def refuse(name: str) -> Any:
        raise ValueError(name)

    def number(written: str) -> int | float:  # JSON Schema's rule: 30.0 is the integer 30
        exact = Decimal(written)
        whole = exact.is_finite() and exact.adjusted() < 64 and exact == exact.to_integral()
        return int(exact) if whole else float(written)

    try:
        parsed = (
            json.loads(
                text, object_pairs_hook=no_duplicates, parse_constant=refuse, parse_float=number
            )
            if text.strip()
            else {}
        )
    except (ValueError, RecursionError):
        return "refused"
    return parsed if isinstance(parsed, dict) else "refused"


def _fast(text: str | bytes) -> Any:
    try:
        return parse_arguments(text)
    except InvalidInput:
        return "refused"


keys = st.one_of(st.sampled_from(["a", "b", "id:1", "x"]), st.text(max_size=4))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def object_texts(draw: st.DrawFn) -> str:
    """A JSON object's text whose members may repeat a key, at the top or nested."""
    members = draw(st.lists(st.tuples(keys, values), max_size=5))
    if members and draw(st.booleans()):
        members.append((members[0][0], draw(values)))  # a repeated key
    body = ",".join(f"{json.dumps(key)}:{json.dumps(value)}" for key, value in members)
    return "{" + body + "}"


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(object_texts())
def test_the_fast_parse_answers_as_the_exact_parser(text: str) -> None:
    """On any object text, duplicates included, both parsers give the same object or refusal."""
    assert _fast(text) == _exact(text)
    assert _fast(text.encode()) == _exact(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"a": {"b": 1, "b": 2}}',
        '{"a": "x:y", "a": 1}',
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": "\\ud800"}',
        '{"a": 1e400}',
        '{"a": ' + "1" * 5000 + "}",
        "[1, 2]",
        "",
        "   ",
        '{"a": 1} x',
        '{"a": 01}',
    ],
)
def test_edge_texts_answer_as_the_exact_parser(text: str) -> None:
    """Repeated keys, NaN, lone surrogates, huge numbers and non-objects: the same answers."""
    assert _fast(text) == _exact(text)
