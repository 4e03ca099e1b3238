"""Text that came from outside (a destination's reply, a stored reference) made safe to show.

A terminal obeys control characters: a carriage return rewrites the line already shown, an ANSI
escape recolours or hides text, a lone surrogate cannot even be encoded. Everything effectledger
prints or explains goes through :func:`printable`; everything it stores as a reference must pass
:func:`unprintable` first.
"""

from __future__ import annotations

__all__ = ["printable", "unprintable"]


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on shown as a visible escape.

    Control characters (C0, C1, DEL), line and paragraph separators, format characters (bidi
    overrides among them), surrogates and unassigned code points become ``\\xNN``, ``\\uNNNN``
    or ``\\UNNNNNNNN``; the result is always encodable as UTF-8 and shows on one line.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


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
