"""How an action's arguments read to a person: a one-line summary and its money fields.

``ledger.action(..., display=Display(summary="Refund {amount_minor} on order {order_id}",
money={"amount_minor": "currency"}))`` declares the sentence a reviewer reads first, on the
desk's queue and proposal page and in notifications: each ``{field}`` is that argument's value,
and a money field (an integer count of the currency's minor units, beside the field that holds
its ISO 4217 code) reads as money, ``7.00 GBP`` or ``1,000 JPY``
(:func:`effectledger.display.money`). The summary is trusted application text; the values in
it come from the model and are shown through :func:`effectledger.display.reveal` like every
argument. Without a declaration a reviewer is shown the arguments as they are.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from effectledger.display import money
from effectledger.errors import InvalidInput

__all__ = ["Display", "Part"]


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a rendered summary: trusted text, or a value that came from the model."""

    text: str
    from_arguments: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Display:
    """The summary of an action's arguments (see the module docstring)."""

    summary: str
    money: Mapping[str, str] = field(default_factory=dict)
    """Each money field (integer minor units) and the field holding its currency code."""

    def __post_init__(self) -> None:
        if not isinstance(self.summary, str) or not self.summary.strip():
            raise InvalidInput("a display needs a summary", field="display")
        if "\n" in self.summary or len(self.summary) > 300:
            raise InvalidInput("a display's summary is one line of at most 300 characters")
        for _, name, spec, conversion in _parsed(self.summary):
            if name is not None and (not name.isidentifier() or spec or conversion):
                raise InvalidInput(
                    f"a display's summary names argument fields as {{field}}: {name!r} is not one",
                    field="display",
                )
        object.__setattr__(self, "money", dict(self.money))

    def check(self, action: str, model: type[BaseModel]) -> None:
        """Refuse a summary or money field that ``model`` does not have."""
        fields = set(model.model_fields)
        named = {name for _, name, _, _ in _parsed(self.summary) if name}
        named |= set(self.money) | set(self.money.values())
        missing = sorted(named - fields)
        if missing:
            raise InvalidInput(
                f"{action}'s display names fields its arguments do not have: " + ", ".join(missing),
                action=action,
            )

    def render(self, arguments: Mapping[str, Any]) -> tuple[Part, ...]:
        """The summary of ``arguments``, as trusted text and values from the model."""
        parts: list[Part] = []
        for literal, name, _, _ in _parsed(self.summary):
            if literal:
                parts.append(Part(literal, False))
            if name is None:
                continue
            value = arguments.get(name)
            if name in self.money:
                currency = arguments.get(self.money[name])
                parts.append(Part(money(value, currency), True))
            else:
                parts.append(Part("" if value is None else str(value), True))
        return tuple(parts)

    def text(self, arguments: Mapping[str, Any]) -> str:
        """The summary as plain text (reveal it before showing it)."""
        return "".join(part.text for part in self.render(arguments))


def _parsed(summary: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(string.Formatter().parse(summary))
    except ValueError as exc:
        raise InvalidInput(f"a display's summary does not parse: {exc}", field="display") from None
