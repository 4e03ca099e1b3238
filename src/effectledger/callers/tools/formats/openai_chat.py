"""OpenAI Chat Completions: ``tools`` entries, ``tool_calls`` items and ``tool`` messages."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from effectledger.callers.tools.formats.parts import CallParts
from effectledger.callers.tools.formats.parts import field_of as _field

NAME = "openai-chat"


def render(definitions: Iterable[Any]) -> list[dict[str, Any]]:
    """The definitions as Chat Completions ``tools`` (``{"type": "function", "function": ...}``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": d.name,
                "description": d.description,
                "parameters": dict(d.parameters),
            },
        }
        for d in definitions
    ]


def matches(tool_call: Any) -> bool:
    """A Chat Completions tool call carries its name and arguments under ``function``."""
    return _field(tool_call, "function") is not None


def parse(tool_call: Any) -> CallParts:
    """``id``, ``function.name`` and ``function.arguments`` (JSON text)."""
    function = _field(tool_call, "function")
    return CallParts(
        str(_field(tool_call, "id")), _field(function, "name"), _field(function, "arguments")
    )


def answer(text: str, call_id: str, is_error: bool) -> dict[str, Any]:
    """The ``tool`` message answering ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": text}
