"""Text that came from outside (a destination's reply, a stored reference) made safe to show.

A terminal obeys control characters: a carriage return rewrites the line already shown, an ANSI
escape recolours or hides text, a lone surrogate cannot even be encoded. A browser obeys bidi
controls: a U+202E makes ``gnp.exe`` read ``exe.png``; a zero-width space splits a word nobody
sees split; a Cyrillic a (U+0430) in a Latin word looks Latin. Everything effectledger shows a
person (the desk, notifications, the command line, its explanations) goes through :func:`reveal`,
which makes each such character visible as ``⟨U+202E⟩`` and says it did; everything it stores as a
reference must pass :func:`unprintable` first.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MARK",
    "Revealed",
    "hidden_in",
    "json_to_reveal",
    "money",
    "printable",
    "reveal",
    "unprintable",
]

MARK = re.compile(r"\u27e8U\+[0-9A-F]{4,6}\u27e9")
"""One character :func:`reveal` made visible, as it shows it: ``⟨U+202E⟩``.

In revealed text every match is a character that was made visible, never text that looked like
one: a ``⟨`` in the original is itself shown as ``⟨U+27E8⟩``.
"""

_OPEN = "\u27e8"  # ⟨, the start of every mark: shown escaped itself so no text can fake a mark

# Default-ignorable code points Python counts as printable (Unicode's DerivedCoreProperties):
# Hangul fillers, the combining grapheme joiner, Khmer and Mongolian inherent vowels and
# variation selectors, and the variation selectors that can smuggle data after any character.
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


def _hidden(char: str) -> bool:
    """True for a character a reader cannot see as itself (or that would start a fake mark)."""
    if char == _OPEN:
        return True
    if not char.isprintable():  # Cc, Cf (bidi controls, zero-width), Zl, Zp, Zs but " ", Cs, Co, Cn
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE)


def _mark(char: str) -> str:
    return f"\u27e8U+{ord(char):04X}\u27e9"


@dataclass(frozen=True, slots=True)
class Revealed:
    """Text as a person may be shown it, and the characters that had to be made visible.

    ``text`` shows every hidden character as a mark (``⟨U+202E⟩``, see :data:`MARK`);
    ``code_points`` names each distinct one (``"U+202E"``) in order of first appearance.
    """

    text: str
    code_points: tuple[str, ...]

    @property
    def flagged(self) -> bool:
        """True when anything was made visible: the text is not what it would seem."""
        return bool(self.code_points)


_WORD = re.compile(r"[^\W\d_]+")
"""A run of letters: where a mix of scripts is a disguise rather than two languages."""

# Scripts that words legitimately mix with others and that no Latin letter is mistaken for:
# Japanese writes Han, Hiragana and Katakana together, Chinese and Japanese write Latin beside
# Han in one word ("T恤", "カラオケOK"), Korean adds Han to Hangul. Letters named MODIFIER are of
# no script.
_NO_DISGUISE = frozenset({"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "MODIFIER", ""})


def _script(char: str) -> str | None:
    """The script a letter is written in, as the first word of its Unicode name (``LATIN``,
    ``CYRILLIC``, ``GREEK``, ``FULLWIDTH``, ``MATHEMATICAL``, …), or ``None`` where a mix is
    no disguise."""
    first = unicodedata.name(char, "").partition(" ")[0]
    return None if first in _NO_DISGUISE else first


def _disguised(text: str) -> set[int]:
    """Indexes of the letters that write a word in another script than the rest of it.

    In a word whose letters come from two or more scripts, every letter outside the word's
    main script (the one most of its letters are in; on a tie, its first letter's) is marked.
    """
    marked: set[int] = set()
    for word in _WORD.finditer(text):
        scripts = [_script(char) for char in word.group()]
        counted: dict[str, int] = {}
        for script in scripts:
            if script is not None:
                counted[script] = counted.get(script, 0) + 1
        if len(counted) < 2:
            continue
        main = max(counted, key=lambda script: (counted[script], -scripts.index(script)))
        marked.update(
            word.start() + index
            for index, script in enumerate(scripts)
            if script is not None and script != main
        )
    return marked


def reveal(text: str) -> Revealed:
    """``text`` with every character a reader cannot see as itself made visible, and which.

    Bidi controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C), zero-width characters
    (U+200B-U+200D, U+2060, U+FEFF), every other format (Cf) and control (Cc) character, line
    and paragraph separators, spaces other than U+0020, surrogates, private-use and unassigned
    code points, and default-ignorable fillers and variation selectors become ``⟨U+XXXX⟩``; so
    does ``⟨`` itself, so a mark can never be faked. The result is always encodable as UTF-8,
    shows on one line, and reads left to right as stored. The desk, the notifications and the
    command line all show model-derived text through this function.

    A word that mixes scripts (a Cyrillic a, U+0430, in a Latin word; a Greek omicron in
    ``google``) has each letter outside its main script made visible the same way
    (``p⟨U+0430⟩ypal``); words of one script each, in any language, are shown as they are.
    """
    if text.isascii():
        if text.isprintable():
            return Revealed(text, ())  # the common case, decided in C
        disguised: set[int] = set()
    else:
        disguised = _disguised(text)
        if not disguised and text.isprintable() and _OPEN not in text and not _any_ignorable(text):
            return Revealed(text, ())
    shown: list[str] = []
    found: dict[str, None] = {}
    for index, char in enumerate(text):
        if _hidden(char) or index in disguised:
            mark = _mark(char)
            shown.append(mark)
            found.setdefault(mark[1:-1], None)
        else:
            shown.append(char)
    return Revealed("".join(shown), tuple(found))


def _any_ignorable(text: str) -> bool:
    if text.isascii():
        return False
    return any(low <= ord(char) <= high for char in text for low, high in _IGNORABLE)


def hidden_in(value: object) -> tuple[str, ...]:
    """The distinct code points :func:`reveal` would flag anywhere in ``value``: a string, or
    the keys and values of mappings and the items of lists and tuples within it, at any depth."""
    found: dict[str, None] = {}
    for text in _strings(value):
        for code in reveal(text).code_points:
            found.setdefault(code, None)
    return tuple(found)


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def json_to_reveal(value: Any) -> str:
    """``value`` as JSON a person reads, its strings' characters left as they are for
    :func:`reveal` to show (``json.dumps`` would turn a U+0007 into ``\\u0007``, which reads
    as six ordinary characters and is never flagged). Only ``"`` and ``\\`` are escaped, keys
    are sorted; reveal the result exactly once."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda item: str(item[0]))
        inner = ", ".join(f"{json_to_reveal(str(k))}: {json_to_reveal(v)}" for k, v in items)
        return "{" + inner + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json_to_reveal(item) for item in value) + "]"
    return json.dumps(value)


def printable(text: str) -> str:
    """``text`` as the command line prints it: :func:`reveal`'s text (``⟨U+001B⟩`` for an
    escape, ``⟨U+202E⟩`` for a bidi override); always encodable as UTF-8, on one line."""
    return reveal(text).text


def unprintable(text: str) -> str | None:
    """``None`` if ``text`` is fit to store as a reference, else why not (a stable word)."""
    if not text:
        return "empty"
    if text.isprintable():  # the common case, decided in C
        return None
    if "\x00" in text:
        return "nul"
    if any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        return "lone_surrogate"
    return "control_characters"


def money(minor: object, currency: object, *, locale: str = "en") -> str:
    """An amount of ``minor`` units of ``currency`` (ISO 4217) as people read it: ``12.50 EUR``,
    ``1,000 JPY``, ``0.005 KWD``: digits grouped, as many decimals as the currency has, and the
    code (never a symbol: ``$`` is a dozen currencies).

    Formatted with Babel (the ``server`` extra). Without it, or for a code Babel does not know,
    nothing is guessed: ``1250 minor units of EUR``. A value that is not an integer, or a code
    that is not three letters, is shown as it is, marked as such.
    """
    if isinstance(minor, bool) or not isinstance(minor, int):
        return f"{minor!r} (not an amount)"
    if not isinstance(currency, str) or len(currency) != 3 or not currency.isalpha():
        return f"{minor} minor units of {currency!r} (not a currency code)"
    try:
        from babel.numbers import format_currency, get_currency_precision, is_currency
    except ImportError:  # pragma: no cover - the server extra installs Babel
        return f"{minor} minor units of {currency}"
    code = currency.upper()
    if not is_currency(code):
        return f"{minor} minor units of {currency} (a currency code Babel does not know)"
    from decimal import Decimal

    value = Decimal(minor).scaleb(-get_currency_precision(code))
    return str(
        format_currency(value, code, format="#,##0.00\u00a0¤¤", locale=locale, currency_digits=True)
    ).replace("\u00a0", " ")
