"""Model-derived text on the desk's pages: every hidden character visible, marked and flagged.

The filters render through :func:`effectledger.display.reveal`, the one function the
notifications and the command line use too: a bidi control, a zero-width character or any other
invisible or control character shows as ``⟨U+202E⟩`` inside a ``<mark>``, and so does a letter
of another script inside a word (a Cyrillic a, U+0430, in a Latin word), so the page shows exactly
what is stored and would be sent. Everything else is HTML-escaped as autoescaping does.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from markupsafe import Markup, escape

from effectledger.display import MARK, hidden_in, json_to_reveal, reveal

__all__ = ["hidden_in", "marked", "shown", "shown_json"]


def marked(revealed: str) -> Markup:
    """Already revealed text as HTML: escaped, each mark wrapped in ``<mark class="hidden">``."""
    parts: list[str] = []
    last = 0
    for found in MARK.finditer(revealed):
        parts.append(str(escape(revealed[last : found.start()])))
        code = found.group()[1:-1]
        parts.append(f'<mark class="hidden" title="{_title(code)}">{escape(found.group())}</mark>')
        last = found.end()
    parts.append(str(escape(revealed[last:])))
    return Markup("".join(parts))


def _title(code: str) -> str:
    """What a mark stands for: a hidden character, or a letter of another script than its word
    (named, so the reviewer reads "CYRILLIC SMALL LETTER A" where an ``a`` seemed to be)."""
    char = chr(int(code[2:], 16))
    if unicodedata.category(char).startswith("L"):
        return str(escape(f"look-alike letter {code} ({unicodedata.name(char, code)})"))
    return f"hidden character {code}"


def shown(value: object) -> Markup:
    """``value`` as text on a page, its hidden characters made visible and marked."""
    return marked(reveal(value if isinstance(value, str) else str(value)).text)


def shown_json(value: Any) -> Markup:
    """``value`` as the JSON a reviewer reads (not ``\\u`` escapes), every string in it shown
    as :func:`shown` shows text: a control character reads ``⟨U+0007⟩``, not ``\\u0007``."""
    return shown(json_to_reveal(value))
