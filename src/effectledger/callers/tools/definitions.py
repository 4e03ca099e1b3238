"""Tool definitions: what a function-calling model is shown, in each provider's tool format.

For every registered action there is a ``propose_<action>`` tool whose parameters are exactly
the action's arguments (``additionalProperties: false``, descriptions from the model's fields,
no identity fields) and an optional ``stated_reason``, the model's own account of why (kept
with the proposal for the reviewer, never part of what is approved; left out when the action
has a field of that name), plus two operation tools that take only ids: ``perform_proposal`` and
``operation_status``. :func:`openai_chat_tools`, :func:`openai_responses_tools` and
:func:`anthropic_tools` render the same definitions for each provider.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from effectledger.actions.registry import Action, ActionRegistry
from effectledger.callers.tools.formats import anthropic, openai_chat, openai_responses
from effectledger.errors import InvalidInput

__all__ = [
    "IDENTITY_FIELDS",
    "PERFORM_TOOL",
    "PROPOSE_PREFIX",
    "STATED_REASON",
    "STATUS_TOOL",
    "ToolDefinition",
    "anthropic_tools",
    "definitions_for",
    "openai_chat_tools",
    "openai_responses_tools",
]

PROPOSE_PREFIX = "propose_"
STATED_REASON = "stated_reason"
"""The optional propose-tool field carrying the model's reason (not an action argument)."""
_STATED_REASON_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 2000,
    "description": (
        "Optional: why you propose this, in a sentence or two. A reviewer reads it as yours; it "
        "is not part of what is approved."
    ),
}
PERFORM_TOOL = "perform_proposal"
STATUS_TOOL = "operation_status"

IDENTITY_FIELDS = frozenset(
    {
        "tenant", "tenant_id", "actor", "actor_id", "role", "roles", "user", "user_id",
        "principal", "approver", "approver_id", "approved_by", "requester", "requester_id",
        "proposer", "proposer_id",
    }
)  # fmt: skip
"""Argument names an action may not declare: who acts is the host's to say, never the model's."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI and Anthropic both accept
_ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """One tool as a model sees it: a name, a description and a JSON schema of its parameters.

    ``read_only``, ``destructive`` and ``idempotent`` describe the tool truthfully (MCP uses them
    as annotations): only ``perform_proposal`` may cause an external effect, and repeating it
    with the same ids reports the recorded state instead of acting again.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    action: str | None = None
    takes_reason: bool = False
    """Whether the tool's ``stated_reason`` is the model's reason (a propose tool whose action
    has no field of that name), taken out of the arguments before they are validated."""


def _propose_definition(action: Action) -> ToolDefinition:
    name = PROPOSE_PREFIX + action.name
    if _TOOL_NAME.fullmatch(name) is None:
        raise InvalidInput(
            f"action {action.name} cannot be a tool name: use letters, digits, _ and - "
            f"(at most {64 - len(PROPOSE_PREFIX)} characters)",
            action=action.name,
        )
    schema = dict(action.arguments.model_json_schema())
    properties = dict(schema.get("properties", {}))
    identity = sorted(IDENTITY_FIELDS.intersection(properties))
    if identity:
        raise InvalidInput(
            f"action {action.name} declares identity fields {identity}: who acts comes from "
            "the host's context, never from a model's arguments",
            action=action.name,
            fields=identity,
        )
    summary = action.description or (action.arguments.__doc__ or "").strip()
    takes_reason = STATED_REASON not in properties
    if takes_reason:
        properties[STATED_REASON] = dict(_STATED_REASON_SCHEMA)
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(schema.get("required", [])),
        "additionalProperties": False,
    }
    if "$defs" in schema:
        parameters["$defs"] = schema["$defs"]
    return ToolDefinition(
        name=name,
        description=(
            f"{summary} Records a proposal only: nothing happens until it is approved and "
            f"performed with {PERFORM_TOOL}. Returns the proposal id and its digest."
        ).strip(),
        parameters=parameters,
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
        action=action.name,
        takes_reason=takes_reason,
    )


_PERFORM = ToolDefinition(
    name=PERFORM_TOOL,
    description=(
        "Performs a recorded proposal exactly as it was approved, at most once. Takes only ids. "
        "Repeating the call reports the recorded state and never acts again. If the result says "
        "uncertain, the effect may or may not have happened and is being checked: tell the user "
        "it is pending, never that it succeeded or failed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "proposal_id": {**_ID_SCHEMA, "description": "The id returned by a propose tool."},
            "approval_id": {
                **_ID_SCHEMA,
                "description": "The id of the approval a reviewer granted, if one was given.",
            },
        },
        "required": ["proposal_id"],
        "additionalProperties": False,
    },
    read_only=False,
    destructive=True,
    idempotent=True,
    open_world=True,
)

_STATUS = ToolDefinition(
    name=STATUS_TOOL,
    description=(
        "Reports the recorded state of an operation you performed. Takes only its id. "
        "An uncertain state means the effect may or may not have happened."
    ),
    parameters={
        "type": "object",
        "properties": {
            "operation_id": {**_ID_SCHEMA, "description": "The operation id from a result."}
        },
        "required": ["operation_id"],
        "additionalProperties": False,
    },
    read_only=True,
    destructive=False,
    idempotent=True,
    open_world=False,
)


def openai_chat_tools(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """The definitions as Chat Completions ``tools`` (``{"type": "function", "function": ...}``)."""
    return openai_chat.render(definitions)


def openai_responses_tools(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """The definitions as Responses API function tools (``strict`` off: optional fields stay)."""
    return openai_responses.render(definitions)


def anthropic_tools(definitions: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """The definitions as Anthropic Messages API tools (name, description, input_schema)."""
    return anthropic.render(definitions)


def definitions_for(registry: ActionRegistry) -> list[ToolDefinition]:
    """One ``propose_<action>`` per registered action, then the operation tools."""
    return [*(_propose_definition(action) for action in registry), _PERFORM, _STATUS]
