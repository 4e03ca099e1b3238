"""Model-derived text on the desk's pages: every hidden character visible, marked and flagged.

The filters render through :func:`effectledger.display.reveal`, the one function the
notifications and the command line use too: a bidi control, a zero-width character or any other
invisible or control character shows as ``⟨U+202E⟩`` inside a ``<mark>``, so the page shows
exactly what is stored and would be sent. Everything else is HTML-escaped as autoescaping does.
"""

from __future__ import annotations

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
        parts.append(
            f'<mark class="hidden" title="hidden character {code}">{escape(found.group())}</mark>'
        )
        last = found.end()
    parts.append(str(escape(revealed[last:])))
    return Markup("".join(parts))


def shown(value: object) -> Markup:
    """``value`` as text on a page, its hidden characters made visible and marked."""
    return marked(reveal(value if isinstance(value, str) else str(value)).text)


def shown_json(value: Any) -> Markup:
    """``value`` as the JSON a reviewer reads (not ``\\u`` escapes), every string in it shown
    as :func:`shown` shows text: a control character reads ``⟨U+0007⟩``, not ``\\u0007``."""
    return shown(json_to_reveal(value))
