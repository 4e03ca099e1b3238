"""Function tools for any function-calling model, and the host call that answers them.

For every registered action there is a ``propose_<action>`` tool whose parameters are exactly
the action's arguments, plus ``perform_proposal`` and ``operation_status``, which take only ids
(see :mod:`effectledger.callers.tools.definitions`; this module re-exports its names).
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
:class:`~effectledger.EffectLedger` that ``effectledger.connect`` returns, calling its
``propose``, ``perform`` and ``status`` and nothing beneath them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from effectledger.app.ledger import EffectLedger
from effectledger.callers.tools.definitions import (
    IDENTITY_FIELDS,
    PERFORM_TOOL,
    PROPOSE_PREFIX,
    STATED_REASON,
    STATUS_TOOL,
    ToolDefinition,
    anthropic_tools,
    definitions_for,
    openai_chat_tools,
    openai_responses_tools,
)
from effectledger.callers.tools.formats import anthropic, format_of, openai_chat, openai_responses
from effectledger.callers.tools.guidance import error_guidance, proposal_guidance, result_guidance
from effectledger.errors import (
    AdmissionDenied,
    EffectLedgerError,
    InvalidInput,
    NotFound,
    ToolArgumentsRejected,
)
from effectledger.model.authority import Correlation, Proposal
from effectledger.model.json_text import (
    MAX_JSON_BYTES,
    check_depth,
    read_json_object,
    whole_numbers,
)
from effectledger.model.operations import Context, DispatchResult, OperationState
from effectledger.model.results import EffectOutcome, EffectResult, TraceStep

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

MAX_ARGUMENTS_BYTES = MAX_JSON_BYTES
"""Raw argument text longer than this is refused before it is parsed."""
_WHAT = "tool arguments"

_REPLAYS_KEPT = 1024
"""How many replayed answers a ``FunctionTools`` keeps serialized (then it starts afresh)."""

_ReplayKey = tuple[str | None, OperationState | None, str | None, str | None]

_IDS_KEPT_UP_TO = 1024
"""An operation tool's argument text up to this many characters is kept with its checked ids."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call produced: the API's JSON, what to tell the user, and an error flag.

    ``data`` is the JSON of the API's result (``EffectResult.to_dict()`` for ``perform_proposal``)
    or ``{"error": {"code", "message", "details"}}``. ``text`` is what the model reads: the
    JSON of ``data``, then one line telling the model what it may say to the user. It is
    serialized once, when the result is made, unless the maker passes the same text it already
    serialized for an equal result.
    """

    tool: str
    data: dict[str, Any]
    guidance: str
    is_error: bool
    text: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.text:
            # pydantic-core's encoder (already a dependency) is several times faster than
            # json's, which matters on the replay path where the ledger read takes microseconds.
            text = f"{pydantic_core.to_json(self.data).decode()}\n{self.guidance}"
            object.__setattr__(self, "text", text)

    def openai_chat_message(self, tool_call_id: str) -> dict[str, Any]:
        """The Chat Completions ``tool`` message answering ``tool_call_id``."""
        return openai_chat.answer(self.text, tool_call_id, self.is_error)

    def openai_responses_item(self, call_id: str) -> dict[str, Any]:
        """The Responses API ``function_call_output`` input item answering ``call_id``."""
        return openai_responses.answer(self.text, call_id, self.is_error)

    def anthropic_block(self, tool_use_id: str) -> dict[str, Any]:
        """The Anthropic ``tool_result`` content block answering ``tool_use_id``."""
        return anthropic.answer(self.text, tool_use_id, self.is_error)


def parse_arguments(arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """The model's arguments as an object: JSON text (OpenAI) or an already parsed mapping
    (Anthropic, MCP).

    Read by the one parser every caller uses (:mod:`effectledger.model.json_text`): text over
    :data:`MAX_ARGUMENTS_BYTES`, malformed, not an object, with a repeated key, with NaN or
    Infinity, or nested deeper than 64 levels is refused with
    :class:`~effectledger.errors.InvalidInput`; a mapping is held to the same depth. A whole
    number written as ``30.0`` is the integer 30, in text or in a mapping.
    """
    if isinstance(arguments, str | bytes):
        return read_json_object(arguments, what=_WHAT, max_bytes=MAX_ARGUMENTS_BYTES)
    if isinstance(arguments, Mapping):
        check_depth(arguments, what=_WHAT)
        parsed: dict[str, Any] = whole_numbers(dict(arguments))
        return parsed
    if arguments is None:
        return {}
    raise InvalidInput(f"{_WHAT}: not a JSON object")


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


class FunctionTools:
    """The tools of one ledger's declared actions, and the host's dispatch of a tool call.

    Built from the :class:`~effectledger.EffectLedger` (``FunctionTools(ledger)``) once its
    actions are declared: the tool list is read from its registry when the tools are made.
    """

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger
        self._definitions = {d.name: d for d in definitions_for(ledger.registry)}
        # A replay's answer is the same text every time: kept per operation, state and trace.
        self._replays: dict[_ReplayKey, tuple[tuple[TraceStep, ...], str, str]] = {}
        # An operation tool's ids are the same for the same text: kept once parsed and checked.
        self._ids: dict[tuple[str, str | bytes], dict[str, Any]] = {}

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
        tenant_id: str | None = None,
    ) -> ToolResult:
        """Answer one tool call for the host's trusted ``context``; never raises for bad input.

        Refusals (unknown tool, malformed or invented arguments, a malformed id, a denial, an
        id the context cannot see) come back with ``is_error`` and a stable code, and write
        nothing. Only errors outside the error tree propagate. ``tenant_id``, when the host
        names the tenant the call is addressed to, is compared first with ``context``'s: another
        one is refused at the tenant step (``tenant_mismatch``; a perform answers it as a
        denial), before anything is read; it can only narrow what the context reaches.
        """
        try:
            if tenant_id is not None and tenant_id != context.tenant_id:
                if name == PERFORM_TOOL:  # a perform's refusal is its result, as the API's
                    return self._performed(self.ledger.perform(context, "", tenant_id=tenant_id))
                raise AdmissionDenied(
                    "the call names another tenant than the caller's", reason="tenant_mismatch"
                )
            definition = self._definitions.get(name) if isinstance(name, str) else None
            if definition is None:
                raise NotFound(f"no tool {str(name)[:64]!r}", tool=str(name)[:64])
            parsed = self._checked(definition, arguments)
            if definition.action is not None:
                arguments = dict(parsed)
                said = arguments.pop(STATED_REASON, None) if definition.takes_reason else None
                proposal = self.ledger.propose(
                    context,
                    definition.action,
                    arguments,
                    correlation=correlation,
                    stated_reason=said,
                )
                return ToolResult(
                    tool=name,
                    data=_proposal_view(proposal),
                    guidance=proposal_guidance(),
                    is_error=False,
                )
            if name == PERFORM_TOOL:
                # The ledger refuses ids of the wrong shape (InvalidInput) before it reads.
                proposal_id = _text_id(parsed.get("proposal_id"), "proposal_id")
                approval_id = parsed.get("approval_id")
                if approval_id is not None:
                    _text_id(approval_id, "approval_id")
                return self._performed(
                    self.ledger.perform(
                        context, proposal_id, approval=approval_id, tenant_id=tenant_id
                    )
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

    def _performed(self, result: EffectResult) -> ToolResult:
        """The answer to a perform; an exact replay reuses the text serialized the first time.

        The text is a function of the result's fields: a replay (no reason) with the same
        operation, state, provider reference and trace has the same text, so it is not
        serialized again. ``data`` is always the result's own fresh ``to_dict()``.
        """
        data = result.to_dict()
        if result.outcome is not EffectOutcome.REPLAYED:
            return ToolResult(
                tool=PERFORM_TOOL,
                data=data,
                guidance=result_guidance(result.outcome, result.state, result.reason, result.note),
                is_error=result.outcome is EffectOutcome.DENIED,
            )
        key = (result.operation_id, result.state, result.reason, result.provider_reference)
        known = self._replays.get(key)
        if known is not None and (known[0] is result.trace or known[0] == result.trace):
            return ToolResult(
                tool=PERFORM_TOOL, data=data, guidance=known[1], is_error=False, text=known[2]
            )
        answer = ToolResult(
            tool=PERFORM_TOOL,
            data=data,
            guidance=result_guidance(result.outcome, result.state, result.reason),
            is_error=False,
        )
        if len(self._replays) >= _REPLAYS_KEPT:
            self._replays.clear()
        self._replays[key] = (result.trace, answer.guidance, answer.text)
        return answer

    def _checked(
        self, definition: ToolDefinition, arguments: str | bytes | Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """The arguments parsed and held to the tool's parameters (refused otherwise).

        An operation tool's arguments are ids only: the same text always parses to the same
        strings and passes the same check, so short texts are kept with their result and the
        repeat of a call (a replay) is not parsed again. The ids' shape is still checked by the
        ledger on every call; a propose tool's arguments are always parsed afresh.
        """
        if (
            definition.action is not None
            or not isinstance(arguments, str | bytes)
            or len(arguments) > _IDS_KEPT_UP_TO
        ):
            parsed = parse_arguments(arguments)
            _only(definition, parsed)
            return parsed
        key = (definition.name, arguments)
        known = self._ids.get(key)
        if known is None:
            known = parse_arguments(arguments)
            _only(definition, known)
            if all(type(value) is str for value in known.values()):
                if len(self._ids) >= _REPLAYS_KEPT:
                    self._ids.clear()
                self._ids[key] = known
        return known

    def answer(
        self, context: Context, tool_call: Any, *, tenant_id: str | None = None
    ) -> dict[str, Any]:
        """Answer a provider's tool call object (or its dict) in the same provider's format.

        Accepts a Chat Completions tool call (``id``, ``function.name``, ``function.arguments``),
        a Responses ``function_call`` item (``call_id``, ``name``, ``arguments``) or an Anthropic
        ``tool_use`` block (``id``, ``name``, ``input``); returns the tool message, the
        ``function_call_output`` item or the ``tool_result`` block to send back. ``tenant_id``
        is the tenant the host addresses the call to, as for :meth:`call`.
        """
        spoken = format_of(tool_call)
        parts = spoken.parse(tool_call)
        result = self.call(
            context,
            parts.name,
            parts.arguments,
            correlation=Correlation(tool_call_id=parts.call_id[:256], framework=spoken.name),
            tenant_id=tenant_id,
        )
        return spoken.answer(result.text, parts.call_id, result.is_error)
