"""Google ADK (``google-adk``): a ledger action as a tool behind ADK's tool confirmation.

:func:`ledger_tool` returns a :class:`LedgerTool` whose ``.tool`` goes into
``LlmAgent(tools=[...])``. When the model calls it, the tool proposes the call as the host's
identity and asks for ADK's own confirmation (``tool_context.request_confirmation``) with the
grant as its payload, so ADK pauses the invocation with its ``adk_request_confirmation`` call
(``toolConfirmation.payload`` is ``{"proposal_id", "digest"}``) and its web UI and REST flow
still work. The host:

1. runs the agent inside ``with acting_as(request):`` — ``request`` is the application's own
   object for this request (the ledger's ``Context`` itself, an object with a ``.context``
   attribute, or anything a ``context_of=`` callable reads it from); it is never saved in the
   session, so a resumed session never supplies the identity;
2. lets the reviewer approve the proposal in the ledger, and resumes with ADK's confirmation
   response (:func:`approve` / :func:`reject`, :func:`reply`) inside ``acting_as`` again.

On the confirmed call the tool rereads the proposal as that identity, compares the arguments
ADK is about to run (an edited session) and performs through
:class:`~effectledger.callers.frameworks.gate.LedgerGate`: a repeat is ``replayed``. A
rejected confirmation never performs: the model reads ``denied`` / ``approval_denied`` with the
reviewer's words as ``note``; a denial recorded in the ledger reaches the model the same way.

ADK consumes a confirmation once the tool has answered it. So a confirmed answer the ledger
refuses for what this resume brought — no approval yet, no grant or another call's (other
arguments in the session are another digest), another identity, none at all — is not the
call's answer: it raises out of ``run_async`` (``AdmissionDenied`` with the result in
``details["answer"]``, or ``NotAuthenticated``), nothing is written or sent, and ADK's
confirmation stays open, so a correct answer can follow. ADK records the failure as an error
event in the session.

A call's proposal is scoped to its conversation: the session (app name, user id, session id)
and ADK's invocation id, which a confirmation's resume keeps. The same function-call id in two
sessions, or in a later invocation of one session, is two proposals and two effects; on the
confirmed call the tool checks that the grant is this conversation's call.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, Context, DenialReason, EffectLedger, EffectResult, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    Grant,
    LedgerGate,
    refusal,
    require_context,
    require_scope,
)
from effectledger.errors import AdmissionDenied, EffectLedgerError, InvalidInput
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from google.adk.events import Event
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types

__all__ = [
    "CONFIRMATION_CALL",
    "RESUME_REASONS",
    "ConfirmationRequest",
    "LedgerTool",
    "acting_as",
    "approve",
    "confirmation_requests",
    "host_context",
    "ledger_tool",
    "reject",
    "reply",
    "resume_refusal",
]

FRAMEWORK = "google-adk"
CONFIRMATION_CALL = "adk_request_confirmation"
"""The name of the function call ADK pauses with (``REQUEST_CONFIRMATION_FUNCTION_CALL_NAME``)."""

ContextOf = Callable[[Any], object]

_HOST: ContextVar[object] = ContextVar("effectledger_adk_host")

RESUME_REASONS = frozenset(
    {
        DenialReason.APPROVAL_MISSING,
        DenialReason.DIGEST_MISMATCH,
        DenialReason.ACTOR_MISMATCH,
        DenialReason.TENANT_MISMATCH,
        DenialReason.NOT_FOUND,
    }
)
"""The refusals of a confirmed answer that come from what this resume brought (no approval
yet, no grant or another call's, another identity): raised to the host, never the call's
answer, so a correct answer of the same confirmation can follow."""


def resume_refusal(result: EffectResult) -> AdmissionDenied:
    """The error a confirmed answer raises when the ledger refused it for this resume:
    ``reason`` is the refusal's, ``details["answer"]`` the result (nothing was performed)."""
    reason = (result.reason or DenialReason.POLICY_DENIED).value
    return AdmissionDenied(
        f"the ledger refused this confirmation ({reason}); nothing was performed and ADK's "
        "confirmation is still open: answer it again once the ledger approved the call, with "
        "its grant and the identity that proposed it",
        reason=reason,
        answer=result.to_dict(),
    )


@contextmanager
def acting_as(host: object) -> Iterator[None]:
    """Run or resume ADK as ``host``, the application's own object for this request: every
    ledger tool call inside the block reads the identity from it (``context_of``)."""
    token = _HOST.set(host)
    try:
        yield
    finally:
        _HOST.reset(token)


def host_context(host: Any) -> object:
    """The ledger ``Context`` of the host's object: itself, or its ``context`` attribute."""
    return host if isinstance(host, Context) else getattr(host, "context", None)


def conversation_scope(tool_context: ToolContext) -> str:
    """The scope of a call: the session (app, user, id) and the invocation it runs in."""
    session = tool_context.session
    invocation_id = tool_context.invocation_id
    if not session.id or not invocation_id:
        raise InvalidInput(
            "a Google ADK run of a ledger tool needs its session and invocation", field="scope"
        )
    scope = json.dumps(
        [session.app_name, session.user_id, session.id, invocation_id], separators=(",", ":")
    )
    return require_scope(scope, "a Google ADK run of a ledger tool")


class LedgerTool:
    """A ledger action as an ADK tool (``.tool``) that pauses for ADK's tool confirmation."""

    def __init__(
        self,
        ledger: EffectLedger,
        action: ActionHandle | Action | str,
        *,
        context_of: ContextOf = host_context,
    ) -> None:
        require_extra("adk", "The Google ADK adapter")
        self.gate = LedgerGate(ledger, action, framework=FRAMEWORK)
        self.context_of = context_of
        self.tool: BaseTool = _tool_class()(self)

    def call(self, arguments: Mapping[str, Any], tool_context: ToolContext) -> dict[str, Any]:
        """What the tool answers ADK for one call: the pause, or the confirmed call's result.

        Raises, out of ``run_async`` and leaving ADK's confirmation open, for an answer this
        resume cannot use (:func:`resume_refusal`)."""
        confirmation = tool_context.tool_confirmation
        try:
            who = self._identity()
            call_id = tool_context.function_call_id
            if not call_id:
                raise InvalidInput("a tool call needs its id", field="tool_call_id")
            scope = conversation_scope(tool_context)
            if confirmation is None:
                return self._pause(who, call_id, arguments, scope, tool_context)
        except EffectLedgerError as exc:
            if confirmation is not None:
                raise  # the host's resume, not the model's call: the confirmation stays open
            return {"error": exc.to_dict()}
        if not confirmation.confirmed:
            return _denied(_reason(confirmation.payload) or confirmation.hint or None)
        result = self.gate.perform(
            who,
            _grant(confirmation.payload),
            tool_name=self.gate.name,
            arguments=arguments,
            call=(call_id, scope),
        )
        if result.reason in RESUME_REASONS:
            raise resume_refusal(result)
        return result.to_dict()

    def _identity(self) -> Context:
        host = _HOST.get(None)
        return require_context(
            None if host is None else self.context_of(host),
            f"{FRAMEWORK} tool execution (run it inside acting_as(...))",
        )

    def _pause(
        self,
        who: Context,
        call_id: str,
        arguments: Mapping[str, Any],
        scope: str,
        tool_context: ToolContext,
    ) -> dict[str, Any]:
        proposal = self.gate.propose(who, call_id, arguments, scope=scope)
        grant = Grant.of(proposal)
        tool_context.request_confirmation(
            hint=f"Approve {self.gate.name} proposal {proposal.proposal_id} "
            f"(digest {proposal.digest}) in the ledger, then confirm.",
            payload=grant.to_dict(),
        )
        # the pause is not a result for the model to summarize (as ADK's own gate does)
        tool_context.actions.skip_summarization = True
        return {"outcome": "proposed", "operation_id": proposal.operation_id, **grant.to_dict()}


def ledger_tool(
    ledger: EffectLedger,
    action: ActionHandle | Action | str,
    *,
    context_of: ContextOf = host_context,
) -> LedgerTool:
    """The ADK tool of ``action``: ``LlmAgent(tools=[t.tool])``; ``context_of`` reads the
    ledger ``Context`` from the host's object given to :func:`acting_as`."""
    return LedgerTool(ledger, action, context_of=context_of)


@dataclass(frozen=True, slots=True)
class ConfirmationRequest:
    """One ``adk_request_confirmation`` of a paused invocation, as the host reads it."""

    confirmation_id: str
    """The id of ADK's confirmation call: what the response answers."""
    call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    grant: Grant | None
    """The grant the pause carried, or None when it carries none (another tool's)."""
    hint: str


def confirmation_requests(events: Iterable[Event]) -> list[ConfirmationRequest]:
    """The confirmation requests among ``events`` (a run's, or a saved session's), in order."""
    found = []
    for event in events:
        for call in event.get_function_calls():
            if call.name != CONFIRMATION_CALL or not call.id:
                continue
            args = call.args or {}
            original = args.get("originalFunctionCall") or {}
            confirmation = args.get("toolConfirmation") or {}
            try:
                grant = Grant.coerce(confirmation.get("payload"))
            except InvalidInput:
                grant = None
            found.append(
                ConfirmationRequest(
                    confirmation_id=call.id,
                    call_id=str(original.get("id") or ""),
                    tool_name=str(original.get("name") or ""),
                    arguments=dict(original.get("args") or {}),
                    grant=grant,
                    hint=str(confirmation.get("hint") or ""),
                )
            )
    return found


def approve(
    request: ConfirmationRequest | str, grant: Grant | Proposal | None = None
) -> types.Part:
    """ADK's confirmation response confirming ``request`` with ``grant`` (by default the one
    its pause carried): the tool performs it if the ledger approved exactly that digest."""
    if grant is None and isinstance(request, ConfirmationRequest):
        grant = request.grant
    if isinstance(grant, Proposal):
        grant = Grant.of(grant)
    payload = None if grant is None else grant.to_dict()
    return _response(request, {"confirmed": True, "payload": payload})


def reject(request: ConfirmationRequest | str, reason: str) -> types.Part:
    """ADK's confirmation response rejecting ``request``: nothing is performed and the model
    reads ``reason``."""
    return _response(request, {"confirmed": False, "payload": {"reason": reason}})


def reply(*parts: types.Part) -> types.Content:
    """The user message that answers the confirmations: ``runner.run_async(...,
    new_message=reply(approve(a), reject(b, "...")))``."""
    require_extra("adk", "The Google ADK adapter")
    from google.genai import types

    return types.Content(role="user", parts=list(parts))


def _response(request: ConfirmationRequest | str, response: dict[str, Any]) -> types.Part:
    require_extra("adk", "The Google ADK adapter")
    from google.genai import types

    confirmation_id = (
        request.confirmation_id if isinstance(request, ConfirmationRequest) else request
    )
    return types.Part(
        function_response=types.FunctionResponse(
            id=confirmation_id, name=CONFIRMATION_CALL, response=response
        )
    )


def _grant(payload: object) -> Grant | None:
    if isinstance(payload, Mapping) and "proposal_id" not in payload and "digest" not in payload:
        return None
    return Grant.coerce(payload)


def _reason(payload: object) -> str | None:
    reason = payload.get("reason") if isinstance(payload, Mapping) else None
    return reason[:2000] if isinstance(reason, str) and reason else None


def _denied(note: str | None) -> dict[str, Any]:
    denied = refusal(DenialReason.APPROVAL_DENIED)
    return EffectResult(
        outcome=denied.outcome,
        operation_id=None,
        state=None,
        reason=denied.reason,
        provider_reference=None,
        trace=denied.trace,
        note=note,
    ).to_dict()


WORKERS = 4
"""How many threads run the ADK adapter's ledger calls, shared by every ledger tool."""

_WORKERS: list[ThreadPoolExecutor] = []
_WORKERS_LOCK = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    with _WORKERS_LOCK:
        if not _WORKERS:
            _WORKERS.append(
                ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="effectledger-adk")
            )
        return _WORKERS[0]


_TOOL_CLASS: Callable[[LedgerTool], BaseTool] | None = None


def _tool_class() -> Callable[[LedgerTool], BaseTool]:
    """The ADK tool class, defined once ADK is known to be installed."""
    global _TOOL_CLASS
    if _TOOL_CLASS is not None:
        return _TOOL_CLASS
    from google.adk.tools.base_tool import BaseTool
    from google.genai import types

    class EffectLedgerTool(BaseTool):
        """A ledger action as an ADK tool; its body is the ledger's gate."""

        def __init__(self, owner: LedgerTool) -> None:
            action = owner.gate.action
            super().__init__(
                name=action.name, description=action.description or f"Propose {action.name}."
            )
            self.owner = owner
            # ADK asks for the declaration on every model request: built once, not per turn
            self._declaration = types.FunctionDeclaration(
                name=self.name,
                description=self.description,
                parameters_json_schema=action.json_schema(),
            )

        def _get_declaration(self) -> types.FunctionDeclaration:
            return self._declaration.model_copy(deep=True)

        async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
            # the ledger's calls block: one of the adapter's few threads, which outlive ADK's
            # event loops (a thread per loop would open a store connection per loop); the
            # copied context carries the host's acting_as
            call = functools.partial(
                contextvars.copy_context().run, self.owner.call, dict(args), tool_context
            )
            return await asyncio.get_running_loop().run_in_executor(_workers(), call)

    _TOOL_CLASS = EffectLedgerTool
    return EffectLedgerTool
