"""Model providers' tool-call formats, one module each: render the definitions, read a call, and
format the answer. :data:`FORMATS` is the table the function tools dispatch through; a new
provider is one module here and one entry in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from effectledger.callers.tools.formats import anthropic, openai_chat, openai_responses
from effectledger.callers.tools.formats.parts import CallParts, field_of
from effectledger.errors import InvalidInput

__all__ = ["FORMATS", "CallParts", "ToolFormat", "field_of", "format_of"]


@dataclass(frozen=True, slots=True)
class ToolFormat:
    """One provider's format: how definitions are shown and a call is read and answered."""

    name: str
    render: Callable[[Iterable[Any]], list[dict[str, Any]]]
    matches: Callable[[Any], bool]
    parse: Callable[[Any], CallParts]
    answer: Callable[[str, str, bool], dict[str, Any]]


FORMATS: tuple[ToolFormat, ...] = tuple(
    ToolFormat(module.NAME, module.render, module.matches, module.parse, module.answer)
    for module in (openai_chat, openai_responses, anthropic)
)
"""Every supported format, tried in this order when a call is read."""


def format_of(tool_call: Any) -> ToolFormat:
    """The format ``tool_call`` is written in; ``invalid_input`` if none matches."""
    for known in FORMATS:
        if known.matches(tool_call):
            return known
    raise InvalidInput("not a tool call of a supported format (OpenAI or Anthropic)")
