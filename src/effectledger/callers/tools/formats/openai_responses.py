"""OpenAI Responses: function tools, ``function_call`` items and ``function_call_output`` items."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from effectledger.callers.tools.formats.parts import CallParts
from effectledger.callers.tools.formats.parts import field_of as _field

NAME = "openai-responses"


def render(definitions: Iterable[Any]) -> list[dict[str, Any]]:
    """The definitions as Responses API function tools (``strict`` off: optional fields stay)."""
    return [
        {
            "type": "function",
            "name": d.name,
            "description": d.description,
            "parameters": dict(d.parameters),
            "strict": False,
        }
        for d in definitions
    ]


def matches(tool_call: Any) -> bool:
    """A Responses tool call is an item of type ``function_call``."""
    return bool(_field(tool_call, "type") == "function_call")


def parse(tool_call: Any) -> CallParts:
    """``call_id``, ``name`` and ``arguments`` (JSON text)."""
    return CallParts(
        str(_field(tool_call, "call_id")), _field(tool_call, "name"), _field(tool_call, "arguments")
    )


def answer(text: str, call_id: str, is_error: bool) -> dict[str, Any]:
    """The ``function_call_output`` input item answering ``call_id``."""
    return {"type": "function_call_output", "call_id": call_id, "output": text}
