"""Text from outside is shown escaped and judged before it is stored."""

from __future__ import annotations

import pytest

from effectledger.display import printable, unprintable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("receipt-42", "receipt-42"),
        ("ok \u00e9\u4e2d", "ok \u00e9\u4e2d"),
        ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),
        ("line\r\nforged", "line\\x0d\\x0aforged"),
        ("\ud800", "\\ud800"),
        ("a\x00b\x7f\x85", "a\\x00b\\x7f\\x85"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("sep\u2028x", "sep\\u2028x"),
    ],
)
def test_printable_shows_every_control_character_as_an_escape(raw: str, shown: str) -> None:
    """Control characters, separators, bidi overrides and surrogates become visible escapes."""
    assert printable(raw) == shown
    printable(raw).encode("utf-8")  # always encodable


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("receipt-42", None),
        ("", "empty"),
        ("a\x00", "nul"),
        ("\udfff", "lone_surrogate"),
        ("a\rb", "control_characters"),
        ("\x1b[0m", "control_characters"),
    ],
)
def test_unprintable_names_why_a_reference_cannot_be_stored(raw: str, problem: str | None) -> None:
    """A reference is stored only if it is non-empty printable text."""
    assert unprintable(raw) == problem
