"""Anthropic Messages: tools with an ``input_schema``, ``tool_use`` and ``tool_result`` blocks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from effectledger.callers.tools.formats.parts import CallParts
from effectledger.callers.tools.formats.parts import field_of as _field

NAME = "anthropic"


def render(definitions: Iterable[Any]) -> list[dict[str, Any]]:
    """The definitions as Anthropic Messages API tools (name, description, input_schema)."""
    return [
        {"name": d.name, "description": d.description, "input_schema": dict(d.parameters)}
        for d in definitions
    ]


def matches(tool_call: Any) -> bool:
    """An Anthropic tool call is a content block of type ``tool_use``."""
    return bool(_field(tool_call, "type") == "tool_use")


def parse(tool_call: Any) -> CallParts:
    """``id``, ``name`` and ``input`` (already an object)."""
    return CallParts(
        str(_field(tool_call, "id")), _field(tool_call, "name"), _field(tool_call, "input")
    )


def answer(text: str, call_id: str, is_error: bool) -> dict[str, Any]:
    """The ``tool_result`` content block answering ``call_id``."""
    return {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": is_error}
