"""Microsoft Agent Framework (``agent-framework-core``): a ledger action as an approval tool.

:func:`ledger_tool` returns a ``FunctionTool`` with ``approval_mode="always_require"``, so MAF
still surfaces its own ``function_approval_request`` (DevUI and the host's flow keep working),
and two middleware for ``Agent(middleware=[t.pause_middleware, t.middleware])``: an agent
middleware that proposes each paused call in the ledger, and a function middleware that makes
the ledger the gate when MAF is about to run it. The host passes its identity on every run, in
``function_invocation_kwargs=tool.invocation(context)`` (never in the session, whose recorded
requests and arguments are unsigned):

1. the run pauses with MAF's ``function_approval_request``; the adapter proposes its call as
   the host's identity, in the run's session, and writes the ledger's part into the request's
   ``additional_properties["effectledger"]`` (:data:`LEDGER_KEY`): the call id, the proposal id
   and digest, its tenant and the action's declared summary. ``function_call`` stays what MAF
   recorded and will run, which the gate checks against the proposal: DevUI shows the call's
   name and those arguments;
2. the reviewer approves the proposal in the ledger; the host resumes with MAF's
   ``request.to_function_approval_response(True)`` (which copies the ledger's part) and the
   identity again; the gate performs the grant the response carries, or the one the host gives
   in ``tool.invocation(context, grants)``, which comes first.

A host that runs the pause without its identity, or without ``pause_middleware``, proposes the
paused calls itself (:meth:`LedgerTool.propose_request`) and gives their grants on the resume.

``context`` is the application's own context object (or the ledger's Context itself): the
middleware reads the :class:`~effectledger.Context` from it with ``context_of`` (by default the
object itself, its ``ledger_context`` attribute or its ``context`` attribute; see
:func:`~effectledger.callers.frameworks.gate.ledger_context_of`). Merge the mapping
``tool.invocation`` returns into the keyword arguments the application's other tools take.

The gate reads the call id and the arguments MAF is about to run, performs through the ledger
(:class:`~effectledger.callers.frameworks.gate.LedgerGate`) and sets the result; the tool's own
function is never called (reaching it means the middleware is missing: refused). A response
that rejects the call never reaches the gate: MAF answers the model with its own rejection and
the proposal stays undecided in the ledger.

A call's proposal is scoped to its conversation, the ``AgentSession``'s ``session_id`` (kept
when the session is saved with ``to_dict`` and restored): the same call id in two sessions is
two proposals and two effects. On resume the gate checks that the grant is this session's call
(else ``digest_mismatch``); a ledger tool run without a session is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, EffectLedger, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    ContextOf,
    Grant,
    LedgerGate,
    granted,
    host_context,
    ledger_context_of,
    require_scope,
    result_text,
)
from effectledger.errors import EffectLedgerError, NotPermitted
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from agent_framework import (
        AgentContext,
        AgentMiddleware,
        Content,
        FunctionInvocationContext,
        FunctionMiddleware,
        FunctionTool,
    )

__all__ = ["CONTEXT_KEY", "GRANTS_KEY", "LEDGER_KEY", "LedgerTool", "ledger_tool"]

CONTEXT_KEY = "effectledger_context"
GRANTS_KEY = "effectledger_grants"
LEDGER_KEY = "effectledger"
"""The key of a ``function_approval_request``'s ``additional_properties`` (and of the response
MAF makes from it) under which the ledger's part of the paused call rides."""
FRAMEWORK = "agent-framework"


class LedgerTool:
    """A ledger action as a MAF tool (``.tool``) and the middleware that gates it.

    ``context_of`` reads the ledger's Context from the application context a resume passes
    (default :func:`~effectledger.callers.frameworks.gate.ledger_context_of`).
    """

    def __init__(
        self,
        ledger: EffectLedger,
        action: ActionHandle | Action | str,
        *,
        context_of: ContextOf = ledger_context_of,
    ) -> None:
        require_extra("maf", "The Microsoft Agent Framework adapter")
        from agent_framework import FunctionTool

        self.gate = LedgerGate(ledger, action, framework=FRAMEWORK)
        self.context_of = context_of
        self.tool: FunctionTool = FunctionTool(
            name=self.gate.name,
            description=self.gate.action.description or f"Propose {self.gate.name}.",
            approval_mode="always_require",
            func=_unreachable,
            input_model=self.gate.action.arguments,
        )
        # instances of MAF's middleware classes: MAF takes them as they are, where a decorated
        # function is wrapped and its signature inspected for every agent built with it
        gate_class, pause_class = _middleware_classes()
        self.middleware: FunctionMiddleware = gate_class(self)
        """The function middleware that makes the ledger the gate of the tool's calls."""
        self.pause_middleware: AgentMiddleware = pause_class(self)
        """The agent middleware that proposes the calls a run pauses on, as the run's
        identity, and writes the ledger's part into their approval requests."""

    def propose(
        self, context: object, call_id: str, arguments: Mapping[str, Any], *, session: Any
    ) -> Proposal:
        """Propose a requested call of ``session`` (an ``AgentSession`` or its ``session_id``)
        as the host's ``context`` (a Context or the application context it is read from);
        repeats return the same one."""
        who = host_context(context, self.context_of, f"{FRAMEWORK} propose")
        return self.gate.propose(who, call_id, arguments, scope=_session_scope(session))

    def propose_request(self, context: object, request: Any, *, session: Any) -> Proposal:
        """Propose the call of a ``function_approval_request`` from ``user_input_requests`` of
        a run in ``session``."""
        call = request.function_call
        return self.propose(context, call.call_id, call.parse_arguments() or {}, session=session)

    @staticmethod
    def invocation(
        context: object, grants: Mapping[str, Grant | Proposal] | None = None
    ) -> dict[str, Any]:
        """The ``function_invocation_kwargs`` of a run or a resume: the host's context on this
        run (the application's, or a Context) and, when the host keeps them, the grants by
        call id (they come before those the approval responses carry)."""
        return {
            CONTEXT_KEY: context,
            GRANTS_KEY: {
                call_id: Grant.of(grant) if isinstance(grant, Proposal) else grant
                for call_id, grant in (grants or {}).items()
            },
        }

    @classmethod
    def resume(cls, context: object, grants: Mapping[str, Grant | Proposal]) -> dict[str, Any]:
        """:meth:`invocation` with the grants the host keeps, by call id."""
        return cls.invocation(context, grants)

    def ledger_part(self, proposal: Proposal, call_id: str) -> dict[str, str]:
        """What a paused call's ``function_approval_request`` carries under :data:`LEDGER_KEY`:
        the call id, the proposal's grant (id, digest, tenant) and the action's declared
        summary of its arguments, when it declares one."""
        part = {"tool_call_id": call_id, **Grant.of(proposal).to_dict()}
        display = self.gate.action.display
        if display is not None:
            part["summary"] = display.text(proposal.arguments)
        return part

    async def _pause(self, context: AgentContext, call_next: Callable[[], Awaitable[None]]) -> None:
        """Propose the ledger calls a run pauses on, as the run's identity, and write the
        ledger's part into their approval requests (streamed updates too)."""
        from agent_framework import AgentResponse

        host = context.function_invocation_kwargs.get(CONTEXT_KEY)
        session = context.session
        if host is None or session is None:  # the host proposes the paused calls itself
            await call_next()
            return
        if context.stream:

            def annotated(update: Any) -> Any:
                self._annotate(update.contents, host, session)
                return update

            context.stream_update_transforms.append(annotated)
            await call_next()
            return
        await call_next()
        if isinstance(context.result, AgentResponse):
            contents = [
                content for message in context.result.messages for content in message.contents
            ]
            # proposing commits: off the event loop (a streamed update is annotated in place)
            await asyncio.to_thread(self._annotate, contents, host, session)

    def _annotate(self, contents: Sequence[Content], host: object, session: Any) -> None:
        for content in contents:
            if content.type != "function_approval_request":
                continue
            call = content.function_call
            if (
                call is None
                or call.name != self.gate.name
                or LEDGER_KEY in (content.additional_properties or {})
            ):
                continue
            call_id = str(call.call_id or "")
            try:
                proposal = self.propose(
                    host, call_id, call.parse_arguments() or {}, session=session
                )
                part: dict[str, Any] = self.ledger_part(proposal, call_id)
            except EffectLedgerError as exc:  # not proposed: the request says why
                part = {"tool_call_id": call_id, "error": exc.to_dict()}
            if content.additional_properties is None:
                content.additional_properties = {}
            content.additional_properties[LEDGER_KEY] = part

    async def _gate_call(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
    ) -> None:
        if context.function.name != self.gate.name:
            await call_next()
            return
        host = context.kwargs or {}
        metadata = context.metadata or {}
        call_id = metadata.get("call_id")
        arguments = context.arguments
        if not isinstance(arguments, Mapping):
            arguments = arguments.model_dump(mode="json")
        try:
            # the identity first, then the session: the same order of refusals as every caller
            who = host_context(
                host.get(CONTEXT_KEY), self.context_of, f"{FRAMEWORK} tool execution"
            )
            scope = _session_scope(context.session)
            grant = None
            if isinstance(call_id, str):
                grant = granted(host.get(GRANTS_KEY), call_id) or _answered_grant(
                    metadata.get("approval_response")
                )
            # the ledger's calls block (a commit, the destination's reply): off the event loop
            result = await asyncio.to_thread(
                self.gate.perform,
                who,
                grant,
                tool_name=context.function.name,
                arguments=arguments,
                call=(call_id, scope) if isinstance(call_id, str) else None,
            )
        except EffectLedgerError as exc:
            context.result = json.dumps({"error": exc.to_dict()}, separators=(",", ":"))
            return
        context.result = result_text(result)


def ledger_tool(
    ledger: EffectLedger,
    action: ActionHandle | Action | str,
    *,
    context_of: ContextOf = ledger_context_of,
) -> LedgerTool:
    """The MAF tool of ``action`` and its middleware: ``Agent(tools=[t.tool],
    middleware=[t.pause_middleware, t.middleware])``; ``context_of`` reads the ledger's Context
    from the application context a run passes (``function_invocation_kwargs=
    t.invocation(...)``)."""
    return LedgerTool(ledger, action, context_of=context_of)


def _session_scope(session: Any) -> str:
    """The scope of ``session``: its ``session_id`` (or the id itself)."""
    value = session if isinstance(session, str) else getattr(session, "session_id", None)
    return require_scope(value, "a Microsoft Agent Framework run of a ledger tool (session=)")


_CLASSES: (
    tuple[Callable[[LedgerTool], FunctionMiddleware], Callable[[LedgerTool], AgentMiddleware]]
    | None
) = None


def _middleware_classes() -> tuple[
    Callable[[LedgerTool], FunctionMiddleware], Callable[[LedgerTool], AgentMiddleware]
]:
    """The gate's and the pause's middleware classes, defined once MAF is known installed."""
    global _CLASSES
    if _CLASSES is not None:
        return _CLASSES
    from agent_framework import AgentMiddleware, FunctionMiddleware

    class EffectLedgerGate(FunctionMiddleware):
        """Performs a ledger tool's call through the ledger; other tools' calls pass."""

        def __init__(self, owner: LedgerTool) -> None:
            self.owner = owner

        async def process(
            self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
        ) -> None:
            await self.owner._gate_call(context, call_next)

    class EffectLedgerPause(AgentMiddleware):
        """Proposes the ledger calls a run pauses on and annotates their approval requests."""

        def __init__(self, owner: LedgerTool) -> None:
            self.owner = owner

        async def process(
            self, context: AgentContext, call_next: Callable[[], Awaitable[None]]
        ) -> None:
            await self.owner._pause(context, call_next)

    _CLASSES = (EffectLedgerGate, EffectLedgerPause)
    return _CLASSES


def _answered_grant(response: object) -> Grant | None:
    """The grant the approval response carries (copied from its request's ledger part)."""
    properties = getattr(response, "additional_properties", None)
    part = properties.get(LEDGER_KEY) if isinstance(properties, Mapping) else None
    if not isinstance(part, Mapping) or "proposal_id" not in part:
        return None
    return Grant.coerce(part)


def _unreachable(**arguments: Any) -> str:
    raise NotPermitted(
        "a ledger tool runs only through its effectledger middleware; add it to the agent"
    )
