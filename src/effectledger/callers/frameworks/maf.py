"""Microsoft Agent Framework (``agent-framework-core``): a ledger action as an approval tool.

:func:`ledger_tool` returns a ``FunctionTool`` with ``approval_mode="always_require"``, so MAF
still surfaces its own ``function_approval_request`` (its UI and flow keep working), and a
function middleware that makes the ledger the gate when MAF is about to run the call. The host:

1. runs the agent with a session; at the pause, proposes each requested call as its own
   trusted context, in that session (:meth:`LedgerTool.propose_request`), and lets the
   reviewer approve the proposal in the ledger;
2. resumes with MAF's approval response and ``function_invocation_kwargs=tool.resume(context,
   grants)``: the identity and the grants come from the host on every resume, never from the
   session, whose recorded request and arguments are unsigned.

``context`` is the application's own context object (or the ledger's Context itself): the
middleware reads the :class:`~effectledger.Context` from it with ``context_of`` (by default the
object itself, its ``ledger_context`` attribute or its ``context`` attribute; see
:func:`~effectledger.callers.frameworks.gate.ledger_context_of`). Merge the mapping
``tool.resume`` returns into the keyword arguments the application's other tools take.

The middleware reads the call id and the arguments MAF is about to run, performs through the
ledger (:class:`~effectledger.callers.frameworks.gate.LedgerGate`) and sets the result; the
tool's own function is never called (reaching it means the middleware is missing: refused).

A call's proposal is scoped to its conversation, the ``AgentSession``'s ``session_id`` (kept
when the session is saved with ``to_dict`` and restored): the same call id in two sessions is
two proposals and two effects. On resume the middleware checks that the grant is this
session's call (else ``digest_mismatch``); a ledger tool run without a session is refused.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, EffectLedger, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    ContextOf,
    Grant,
    LedgerGate,
    host_context,
    ledger_context_of,
    require_scope,
    result_text,
)
from effectledger.errors import EffectLedgerError, NotPermitted
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from agent_framework import FunctionInvocationContext, FunctionTool

__all__ = ["CONTEXT_KEY", "GRANTS_KEY", "LedgerTool", "ledger_tool"]

CONTEXT_KEY = "effectledger_context"
GRANTS_KEY = "effectledger_grants"
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
        from agent_framework import FunctionTool, function_middleware

        self.gate = LedgerGate(ledger, action, framework=FRAMEWORK)
        self.context_of = context_of
        self.tool: FunctionTool = FunctionTool(
            name=self.gate.name,
            description=self.gate.action.description or f"Propose {self.gate.name}.",
            approval_mode="always_require",
            func=_unreachable,
            input_model=self.gate.action.arguments,
        )

        async def effectledger_gate(
            context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
        ) -> None:
            await self._gate_call(context, call_next)

        self.middleware = function_middleware(effectledger_gate)

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
    def resume(context: object, grants: Mapping[str, Grant | Proposal]) -> dict[str, Any]:
        """The ``function_invocation_kwargs`` of a resume: the host's context on this resume
        (the application's, or a Context) and the grants, by call id."""
        return {
            CONTEXT_KEY: context,
            GRANTS_KEY: {
                call_id: Grant.of(grant) if isinstance(grant, Proposal) else grant
                for call_id, grant in grants.items()
            },
        }

    async def _gate_call(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
    ) -> None:
        if context.function.name != self.gate.name:
            await call_next()
            return
        host = context.kwargs or {}
        grants = host.get(GRANTS_KEY) or {}
        call_id = (context.metadata or {}).get("call_id")
        arguments = context.arguments
        if not isinstance(arguments, Mapping):
            arguments = arguments.model_dump(mode="json")
        try:
            # the identity first, then the session: the same order of refusals as every caller
            who = host_context(
                host.get(CONTEXT_KEY), self.context_of, f"{FRAMEWORK} tool execution"
            )
            scope = _session_scope(context.session)
            result = self.gate.perform(
                who,
                grants.get(call_id) if isinstance(call_id, str) else None,
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
    """The MAF tool and gate middleware of ``action``: ``Agent(tools=[t.tool],
    middleware=[t.middleware])``; ``context_of`` reads the ledger's Context from the
    application context a resume passes."""
    return LedgerTool(ledger, action, context_of=context_of)


def _session_scope(session: Any) -> str:
    """The scope of ``session``: its ``session_id`` (or the id itself)."""
    value = session if isinstance(session, str) else getattr(session, "session_id", None)
    return require_scope(value, "a Microsoft Agent Framework run of a ledger tool (session=)")


def _unreachable(**arguments: Any) -> str:
    raise NotPermitted(
        "a ledger tool runs only through its effectledger middleware; add it to the agent"
    )
