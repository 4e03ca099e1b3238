"""Function tools for any function-calling model, and the host call that answers them.

For every registered action there is a ``propose_<action>`` tool whose parameters are exactly
the action's arguments, plus ``perform_proposal`` and ``operation_status``, which take only ids
(see :mod:`effectledger.callers.tool_definitions`; this module re-exports its names).
:func:`openai_chat_tools`, :func:`openai_responses_tools` and :func:`anthropic_tools` render
them in each provider's tool format.

A host answers a model's tool call with one call: :meth:`FunctionTools.call` (a name and the
raw arguments) or :meth:`FunctionTools.answer` (the provider's tool-call object, answered in
the same provider's format). The trusted :class:`~effectledger.model.Context` always comes from
the host, never from the arguments. The result's ``data`` is the JSON of the API's result;
its ``guidance`` tells the model what it may say to the user, and an uncertain outcome is never
worded as done or failed. Arguments the model invents are refused with
:class:`~effectledger.errors.ToolArgumentsRejected` before anything is written.

The tools are built on the public API: ``FunctionTools(ledger)`` over the
:class:`~effectledger.app.EffectLedger` that ``effectledger.connect`` returns, calling its
``propose``, ``perform`` and ``status`` and nothing beneath them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pydantic_core

from effectledger.app import EffectLedger
from effectledger.callers.guidance import error_guidance, proposal_guidance, result_guidance
from effectledger.callers.tool_definitions import (
    IDENTITY_FIELDS,
    PERFORM_TOOL,
    PROPOSE_PREFIX,
    STATUS_TOOL,
    ToolDefinition,
    anthropic_tools,
    definitions_for,
    openai_chat_tools,
    openai_responses_tools,
)
from effectledger.errors import EffectLedgerError, InvalidInput, NotFound, ToolArgumentsRejected
from effectledger.model import Context, DispatchResult
from effectledger.outcomes import EffectOutcome
from effectledger.proposals import Correlation, Proposal

__all__ = [
    "IDENTITY_FIELDS",
    "MAX_ARGUMENTS_BYTES",
    "PERFORM_TOOL",
    "PROPOSE_PREFIX",
    "STATUS_TOOL",
    "FunctionTools",
    "ToolDefinition",
    "ToolResult",
    "anthropic_tools",
    "openai_chat_tools",
    "openai_responses_tools",
]

MAX_ARGUMENTS_BYTES = 64 * 1024
"""Raw argument text longer than this is refused before it is parsed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call produced: the API's JSON, what to tell the user, and an error flag.

    ``data`` is the JSON of the API's result (``EffectResult.to_dict()`` for ``perform_proposal``)
    or ``{"error": {"code", "message", "details"}}``. ``text`` is what the model reads.
    """

    tool: str
    data: dict[str, Any]
    guidance: str
    is_error: bool

    @property
    def text(self) -> str:
        """The JSON result, then one line telling the model what it may say to the user."""
        # pydantic-core's encoder (already a dependency) is several times faster than json's,
        # which matters on the replay path where the ledger read itself takes microseconds.
        return f"{pydantic_core.to_json(self.data).decode()}\n{self.guidance}"

    def openai_chat_message(self, tool_call_id: str) -> dict[str, Any]:
        """The Chat Completions ``tool`` message answering ``tool_call_id``."""
        return {"role": "tool", "tool_call_id": tool_call_id, "content": self.text}

    def openai_responses_item(self, call_id: str) -> dict[str, Any]:
        """The Responses API ``function_call_output`` input item answering ``call_id``."""
        return {"type": "function_call_output", "call_id": call_id, "output": self.text}

    def anthropic_block(self, tool_use_id: str) -> dict[str, Any]:
        """The Anthropic ``tool_result`` content block answering ``tool_use_id``."""
        return {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": self.text,
            "is_error": self.is_error,
        }


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key could show a reviewer one value and act on another: refuse it.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidInput(f"the arguments repeat the key {key!r}", field=key[:64])
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise InvalidInput(f"the arguments contain {name}, which is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)


def parse_arguments(arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """The model's arguments as an object: JSON text (OpenAI) or an already parsed mapping.

    JSON text over :data:`MAX_ARGUMENTS_BYTES`, malformed, not an object, with a repeated key
    or with NaN or Infinity is refused with :class:`~effectledger.errors.InvalidInput`.
    """
    if isinstance(arguments, str | bytes):
        if len(arguments) > MAX_ARGUMENTS_BYTES:
            raise InvalidInput(f"tool arguments exceed {MAX_ARGUMENTS_BYTES} bytes")
        try:
            text = arguments.decode() if isinstance(arguments, bytes) else arguments
            parsed = _DECODER.decode(text) if text.strip() else {}
        except (ValueError, RecursionError):
            raise InvalidInput("tool arguments are not valid JSON") from None
    elif isinstance(arguments, Mapping):
        parsed = dict(arguments)
    elif arguments is None:
        parsed = {}
    else:
        raise InvalidInput("tool arguments must be a JSON object")
    if not isinstance(parsed, dict):
        raise InvalidInput("tool arguments must be a JSON object")
    return parsed


def _only(definition: ToolDefinition, arguments: dict[str, Any]) -> None:
    allowed = definition.parameters["properties"]
    if allowed.keys() >= arguments.keys():  # the common case, checked without a loop
        return
    invented = sorted(str(key) for key in arguments if key not in allowed)
    if invented:
        raise ToolArgumentsRejected(
            f"{definition.name} does not take {', '.join(invented[:10])}; nothing was recorded",
            tool=definition.name,
            rejected=invented[:20],
        )


def _text_id(value: object, name: str) -> str:
    # The type is checked here; the ledger checks the shape before it reads anything.
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string id", field=name)
    return value


def _proposal_view(proposal: Proposal) -> dict[str, Any]:
    return {
        "outcome": "proposed",
        "proposal_id": proposal.proposal_id,
        "operation_id": proposal.operation_id,
        "action": proposal.action,
        "contract_version": proposal.contract_version,
        "target": proposal.target,
        "arguments": dict(proposal.arguments),
        "units": proposal.units,
        "digest": proposal.digest,
        "expires_at": proposal.expires_at.isoformat(),
    }


def _status_view(result: DispatchResult) -> dict[str, Any]:
    return {"outcome": "recorded", **result.to_dict()}


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


class FunctionTools:
    """The tools of one ledger's declared actions, and the host's dispatch of a tool call.

    Built from the :class:`~effectledger.app.EffectLedger` (``FunctionTools(ledger)``) once its
    actions are declared: the tool list is read from its registry when the tools are made.
    """

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger
        self._definitions = {d.name: d for d in definitions_for(ledger.registry)}

    def definitions(self) -> list[ToolDefinition]:
        """Every tool: one ``propose_<action>`` per action, then the operation tools."""
        return list(self._definitions.values())

    def call(
        self,
        context: Context,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None,
        *,
        correlation: Correlation | None = None,
    ) -> ToolResult:
        """Answer one tool call for the host's trusted ``context``; never raises for bad input.

        Refusals (unknown tool, malformed or invented arguments, a malformed id, a denial, an
        id the context cannot see) come back with ``is_error`` and a stable code, and write
        nothing. Only errors outside the error tree propagate.
        """
        try:
            definition = self._definitions.get(name) if isinstance(name, str) else None
            if definition is None:
                raise NotFound(f"no tool {str(name)[:64]!r}", tool=str(name)[:64])
            parsed = parse_arguments(arguments)
            _only(definition, parsed)
            if definition.action is not None:
                proposal = self.ledger.propose(
                    context, definition.action, parsed, correlation=correlation
                )
                return ToolResult(
                    tool=name,
                    data=_proposal_view(proposal),
                    guidance=proposal_guidance(),
                    is_error=False,
                )
            if name == PERFORM_TOOL:
                # The ledger refuses ids of the wrong shape (InvalidInput) before it reads.
                approval_id = parsed.get("approval_id")
                result = self.ledger.perform(
                    context,
                    _text_id(parsed.get("proposal_id"), "proposal_id"),
                    approval=None if approval_id is None else _text_id(approval_id, "approval_id"),
                )
                return ToolResult(
                    tool=name,
                    data=result.to_dict(),
                    guidance=result_guidance(result.outcome, result.state, result.reason),
                    is_error=result.outcome is EffectOutcome.DENIED,
                )
            status = self.ledger.status(
                context, _text_id(parsed.get("operation_id"), "operation_id")
            )
            return ToolResult(
                tool=name,
                data=_status_view(status),
                guidance=result_guidance("recorded", status.state, None),
                is_error=False,
            )
        except EffectLedgerError as exc:
            return ToolResult(
                tool=str(name)[:64],
                data={"error": exc.to_dict()},
                guidance=error_guidance(exc, performing=name == PERFORM_TOOL),
                is_error=True,
            )

    def answer(self, context: Context, tool_call: Any) -> dict[str, Any]:
        """Answer a provider's tool call object (or its dict) in the same provider's format.

        Accepts a Chat Completions tool call (``id``, ``function.name``, ``function.arguments``),
        a Responses ``function_call`` item (``call_id``, ``name``, ``arguments``) or an Anthropic
        ``tool_use`` block (``id``, ``name``, ``input``); returns the tool message, the
        ``function_call_output`` item or the ``tool_result`` block to send back.
        """
        function = _field(tool_call, "function")
        kind = _field(tool_call, "type")
        if function is not None:
            call_id = str(_field(tool_call, "id"))
            result = self.call(
                context,
                _field(function, "name"),
                _field(function, "arguments"),
                correlation=Correlation(tool_call_id=call_id[:256], framework="openai-chat"),
            )
            return result.openai_chat_message(call_id)
        if kind == "function_call":
            call_id = str(_field(tool_call, "call_id"))
            result = self.call(
                context,
                _field(tool_call, "name"),
                _field(tool_call, "arguments"),
                correlation=Correlation(tool_call_id=call_id[:256], framework="openai-responses"),
            )
            return result.openai_responses_item(call_id)
        if kind == "tool_use":
            call_id = str(_field(tool_call, "id"))
            result = self.call(
                context,
                _field(tool_call, "name"),
                _field(tool_call, "input"),
                correlation=Correlation(tool_call_id=call_id[:256], framework="anthropic"),
            )
            return result.anthropic_block(call_id)
        raise InvalidInput("not a tool call of a supported format (OpenAI or Anthropic)")
