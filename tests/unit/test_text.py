"""Text from outside is shown with every hidden character made visible, and judged before it is
stored: one function (:func:`effectledger.display.reveal`) for the desk, notifications and CLI."""

from __future__ import annotations

import json
import unicodedata

import pytest

from effectledger.display import MARK, hidden_in, json_to_reveal, printable, reveal, unprintable

BIDI = [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F]
BIDI.append(0x061C)
ZERO_WIDTH = [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF]


@pytest.mark.parametrize("code", BIDI + ZERO_WIDTH, ids=lambda code: f"U+{code:04X}")
def test_every_bidi_control_and_zero_width_character_is_marked(code: int) -> None:
    """Each bidi control and zero-width character shows as ⟨U+XXXX⟩ where it stands, flagged."""
    shown = reveal(f"gnp{chr(code)}exe.png")
    assert shown.text == f"gnp\u27e8U+{code:04X}\u27e9exe.png"
    assert shown.code_points == (f"U+{code:04X}",)
    assert shown.flagged


def test_a_right_to_left_override_cannot_reverse_what_is_shown() -> None:
    """The issue's attack: U+202E made ``gnp.exe`` read ``exe.png``; shown, it reads as stored."""
    shown = reveal("invoice-\u202egnp.exe")
    assert shown.text == "invoice-⟨U+202E⟩gnp.exe"
    assert shown.flagged
    assert all(
        unicodedata.bidirectional(char) in {"L", "EN", "ES", "CS", "ON"} for char in shown.text
    )


def test_every_format_and_control_character_is_marked() -> None:
    """Every Cc and Cf code point of the BMP and the tag block is made visible and flagged."""
    for code in [*range(0x10000), *range(0xE0000, 0xE0080)]:
        char = chr(code)
        if unicodedata.category(char) in {"Cc", "Cf"}:
            shown = reveal(f"a{char}b")
            assert shown.text == f"a\u27e8U+{code:04X}\u27e9b", hex(code)
            assert shown.code_points == (f"U+{code:04X}",)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J\x1b[31mred", "⟨U+001B⟩[2J⟨U+001B⟩[31mred"),
        ("line\r\nforged", "line⟨U+000D⟩⟨U+000A⟩forged"),
        ("\ud800", "⟨U+D800⟩"),
        ("a\x00b\x7f\x85", "a⟨U+0000⟩b⟨U+007F⟩⟨U+0085⟩"),
        ("sep\u2028x", "sep⟨U+2028⟩x"),
        ("no\u00a0break", "no⟨U+00A0⟩break"),
        ("soft\u00adhyphen", "soft⟨U+00AD⟩hyphen"),
        ("filler\u3164", "filler⟨U+3164⟩"),
        ("select\ufe0fed", "select⟨U+FE0F⟩ed"),
        ("tag\U000e0041", "tag⟨U+E0041⟩"),
        ("private\ue000", "private⟨U+E000⟩"),
    ],
)
def test_controls_separators_odd_spaces_and_fillers_are_marked(raw: str, shown: str) -> None:
    """Controls, separators, spaces other than U+0020, surrogates, private-use code points and
    invisible fillers and variation selectors become marks; the result always encodes."""
    revealed = reveal(raw)
    assert revealed.text == shown
    assert revealed.flagged
    revealed.text.encode("utf-8")


@pytest.mark.parametrize(
    "text",
    [
        "receipt-42",
        "ok \u00e9\u4e2d",
        "Gr\u00fc\u00dfe",
        "",
        "a b",
        "\u041c\u043e\u0441\u043a\u0432\u0430 and Paris",  # one script per word
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",  # Japanese mixes three scripts
        "T\u6064",  # Chinese writes Latin beside Han
        "\u03b1\u03b2\u03b3 \u0394",
    ],
)
def test_ordinary_text_is_unchanged_and_not_flagged(text: str) -> None:
    """Letters of any script, digits, punctuation and the plain space are shown as they are."""
    assert reveal(text).text == text
    assert not reveal(text).flagged


def test_a_mark_cannot_be_faked_by_writing_one() -> None:
    """Text that spells ``⟨U+202E⟩`` shows its ``⟨`` marked too, so every mark in revealed text
    is a character that was made visible."""
    shown = reveal("\u27e8U+202E\u27e9 safe")
    assert shown.text == "\u27e8U+27E8\u27e9U+202E\u27e9 safe"
    assert shown.code_points == ("U+27E8",)
    assert MARK.findall(shown.text) == ["\u27e8U+27E8\u27e9"]


def test_code_points_are_distinct_in_order_of_first_appearance() -> None:
    """Repeated characters are reported once, in the order they first appear."""
    assert reveal("\u200b\u202e\u200ba\u202e").code_points == ("U+200B", "U+202E")


def test_hidden_in_walks_arguments_at_any_depth() -> None:
    """Keys, values, lists and nested mappings are all searched; numbers are ignored."""
    value = {"note": ["ok", {"de\u200bep": 5}], "amount": 30, "target": "ord\u202e1"}
    assert hidden_in(value) == ("U+200B", "U+202E")
    assert hidden_in({"amount": 30, "currency": "EUR"}) == ()


def test_printable_is_the_revealed_text() -> None:
    """The command line prints what the desk shows: one function, one notation."""
    raw = "rcpt-\x1b[2J\u202e"
    assert printable(raw) == reveal(raw).text == "rcpt-⟨U+001B⟩[2J⟨U+202E⟩"


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


def test_json_to_reveal_is_json_whose_strings_keep_their_characters() -> None:
    """Ordinary values round-trip through a JSON parser; a control character stays raw for
    reveal to mark once, instead of becoming a ``\\u0007`` escape nobody would notice."""
    value = {"b": 'say "hi" \\ back', "a": [1, None, True, {"k": 2.5}], "c": "é"}
    assert json.loads(json_to_reveal(value)) == value
    assert json_to_reveal(value).startswith('{"a": [1, null, true, {"k": 2.5}]')
    assert reveal(json_to_reveal({"note": "ring\x07"})).text == '{"note": "ring⟨U+0007⟩"}'


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("p\u0430ypal", "p\u27e8U+0430\u27e9ypal"),  # a Cyrillic a in a Latin word
        ("g\u03bfogle.com", "g\u27e8U+03BF\u27e9ogle.com"),  # a Greek omicron
        ("\uff50aypal", "\u27e8U+FF50\u27e9aypal"),  # a fullwidth p
        ("\U0001d429aypal", "\u27e8U+1D429\u27e9aypal"),  # a mathematical bold p
        ("\u0441\u0430\u0440", "\u0441\u0430\u0440"),  # all Cyrillic: shown as it is
        ("\u0441a\u0440", "\u0441\u27e8U+0061\u27e9\u0440"),  # a Latin a among Cyrillic
    ],
)
def test_a_word_that_mixes_scripts_shows_the_odd_letters(raw: str, shown: str) -> None:
    """A letter outside its word's main script is made visible like a hidden character, so a
    look-alike identifier never passes for the real one; one-script words stay as they are."""
    revealed = reveal(raw)
    assert revealed.text == shown
    assert revealed.flagged == (raw != shown)
