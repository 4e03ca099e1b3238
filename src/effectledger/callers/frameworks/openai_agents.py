"""OpenAI Agents SDK (``openai-agents``): a ledger action as a ``needs_approval`` tool.

:func:`ledger_tool` returns a ``FunctionTool`` with ``needs_approval=True``: the SDK still
interrupts the run with its ``ToolApprovalItem`` and its ``RunState`` approve/reject flow. The
tool's body is the gate: it reads the call id and the arguments the SDK is about to run, the
identity from the run context and the grants of this resume, and performs through the ledger.

The run context is the application's own object (``Runner.run(agent, ..., context=app)``): the
tool reads the ledger's :class:`~effectledger.Context` from it with ``context_of`` (by default
the context itself, its ``ledger_context`` attribute or its ``context`` attribute; see
:func:`~effectledger.callers.frameworks.gate.ledger_context_of`). The host:

1. runs the agent with its own context; at the pause, proposes each interruption as its own
   trusted context (:meth:`LedgerTool.propose_item`) and lets the reviewer approve the
   proposal in the ledger; stores ``result.to_state().to_string()``;
2. resumes with :meth:`LedgerTool.resume`, which loads the saved state with
   ``context_override`` set to the application context it is given on this resume (a saved
   context is never trusted: the SDK itself does not verify a snapshot's integrity, and the
   context it restores without an override is plain data, never the host's), approves the
   interruptions in the SDK and runs it with this resume's grants
   (:meth:`LedgerTool.granted`, which a host driving the ``RunState`` itself uses too). A run
   context without the host's identity is refused (``not_authenticated``), nothing written.

:class:`HostRun` (``tool.host(context, grants, scope=...)``) is still a run context the tool
reads: a Context with its grants and scope, for hosts without a context of their own.

The SDK's stored fingerprint is an unkeyed hash a state editor can recompute; the ledger's
digest is not.

A call's proposal is scoped to its conversation, which the host names (``scope=``: its session
id, conversation id or the run's ``group_id``): the SDK keeps no conversation identity the tool
can read on both the pause and the resume, and a model reuses call ids across conversations.
The same call id in two scopes is two proposals and two effects; :meth:`LedgerTool.resume`
takes the same scope and refuses a grant of another conversation's call (``digest_mismatch``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, Context, EffectLedger, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    ContextOf,
    Grant,
    LedgerGate,
    host_context,
    ledger_context_of,
    require_context,
    require_scope,
    result_text,
)
from effectledger.errors import EffectLedgerError, InvalidInput
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from agents import Agent, FunctionTool, RunResult, ToolApprovalItem
    from agents.tool_context import ToolContext

__all__ = ["HostRun", "LedgerTool", "ledger_tool"]

FRAMEWORK = "openai-agents"

_GRANTED: ContextVar[tuple[Mapping[str, Grant], str | None] | None] = ContextVar(
    "effectledger_openai_agents_granted", default=None
)
"""The grants and scope of the resume running in this task (:meth:`LedgerTool.granted`)."""


def _grants(grants: Mapping[str, Grant | Proposal] | None) -> dict[str, Grant]:
    return {
        call_id: Grant.of(grant) if isinstance(grant, Proposal) else grant
        for call_id, grant in (grants or {}).items()
    }


class HostRun:
    """The run context of a host: its identity and grants, live objects a saved state lacks.

    It is not a mapping, so the SDK does not serialize it into a saved ``RunState``; a state
    resumed without ``context_override`` has no ``HostRun`` and its calls are refused. An
    application with a run context of its own passes that instead (the tool reads the
    identity from it, and :meth:`LedgerTool.resume` or :meth:`LedgerTool.granted` supplies the
    grants).
    """

    __slots__ = ("context", "grants", "scope")

    def __init__(
        self,
        context: Context,
        grants: Mapping[str, Grant | Proposal] | None = None,
        *,
        scope: str | None = None,
    ) -> None:
        self.context = require_context(context, "an OpenAI Agents run")
        self.scope = None if scope is None else require_scope(scope, "an OpenAI Agents run")
        self.grants: dict[str, Grant] = _grants(grants)


class LedgerTool:
    """A ledger action as an OpenAI Agents tool (``.tool``) whose body is the ledger's gate.

    ``context_of`` reads the ledger's Context from the application's run context (default
    :func:`~effectledger.callers.frameworks.gate.ledger_context_of`).
    """

    def __init__(
        self,
        ledger: EffectLedger,
        action: ActionHandle | Action | str,
        *,
        context_of: ContextOf = ledger_context_of,
    ) -> None:
        require_extra("openai-agents", "The OpenAI Agents adapter")
        from agents import FunctionTool

        self.gate = LedgerGate(ledger, action, framework=FRAMEWORK)
        self.context_of = context_of
        self.tool: FunctionTool = FunctionTool(
            name=self.gate.name,
            description=self.gate.action.description or f"Propose {self.gate.name}.",
            params_json_schema=self.gate.action.json_schema(),
            on_invoke_tool=self._invoke,
            strict_json_schema=False,
            needs_approval=True,
        )

    @staticmethod
    def host(
        context: Context,
        grants: Mapping[str, Grant | Proposal] | None = None,
        *,
        scope: str | None = None,
    ) -> HostRun:
        """The run context the host passes: its identity, the grants of approved calls and,
        on a resume, the conversation they were proposed in."""
        return HostRun(context, grants, scope=scope)

    @staticmethod
    @contextmanager
    def granted(grants: Mapping[str, Grant | Proposal], *, scope: str) -> Iterator[None]:
        """Within the block, ledger tools run by this task's ``Runner.run`` take ``grants`` (by
        call id) and check each against conversation ``scope``: for a host that approves or
        rejects the interruptions of a ``RunState`` itself, whatever its run context is."""
        token = _GRANTED.set((_grants(grants), require_scope(scope, "an OpenAI Agents resume")))
        try:
            yield
        finally:
            _GRANTED.reset(token)

    def propose_item(self, context: object, item: ToolApprovalItem, *, scope: str) -> Proposal:
        """Propose an interruption's call as the host's ``context`` (a Context or the
        application's context it is read from) in conversation ``scope``; repeats return the
        same."""
        who = host_context(context, self.context_of, "an OpenAI Agents proposal")
        scope = require_scope(scope, "an OpenAI Agents proposal")
        if item.tool_name != self.gate.name or not isinstance(item.call_id, str):
            raise InvalidInput(f"this interruption is not a call of {self.gate.name}")
        arguments = json.loads(item.arguments or "{}")
        return self.gate.propose(who, item.call_id, arguments, scope=scope)

    def propose_interruptions(
        self, context: object, result: RunResult, *, scope: str
    ) -> dict[str, Proposal]:
        """Propose every interruption of this tool in ``result``, by call id."""
        return {
            str(item.call_id): self.propose_item(context, item, scope=scope)
            for item in result.interruptions
            if item.tool_name == self.gate.name
        }

    async def resume(
        self,
        agent: Agent[Any],
        saved: str,
        context: object,
        grants: Mapping[str, Grant | Proposal],
        *,
        scope: str,
        rejected: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Resume the saved run of conversation ``scope`` with the host's ``context`` on this
        resume (the application's run context, or a Context) and ``grants``: never with the
        saved context. The interruptions of this tool are approved in the SDK, except those
        ``rejected`` names by call id: the SDK rejects them with that message, which the model
        reads, and nothing of theirs is performed. A ``context`` without the host's identity
        is refused before the saved state is read."""
        from agents import RunContextWrapper, Runner, RunState

        host_context(context, self.context_of, "an OpenAI Agents resume")
        scope = require_scope(scope, "an OpenAI Agents resume")
        rejected = rejected or {}
        state = await RunState.from_string(
            agent, saved, context_override=RunContextWrapper(context=context)
        )
        for item in state.get_interruptions():
            if item.tool_name != self.gate.name:
                continue
            if item.call_id in rejected:
                state.reject(item, rejection_message=rejected[str(item.call_id)])
            else:
                state.approve(item)
        with self.granted(grants, scope=scope):
            return await Runner.run(agent, state)

    async def _invoke(self, tool_context: ToolContext[Any], input_json: str) -> str:
        app = tool_context.context
        granted = _GRANTED.get()
        if granted is not None:
            grants, scope = granted
        elif isinstance(app, HostRun):
            grants, scope = app.grants, app.scope
        else:
            grants, scope = {}, None
        try:
            # a context restored from a saved state is plain data: it reads as no identity
            context = host_context(app, self.context_of, f"{FRAMEWORK} tool execution")
            arguments = json.loads(input_json or "{}")
            if not isinstance(arguments, Mapping):
                raise InvalidInput("tool arguments must be a JSON object", field="arguments")
            result = await asyncio.to_thread(
                self.gate.perform,
                context,
                grants.get(tool_context.tool_call_id),
                tool_name=tool_context.tool_name,
                arguments=arguments,
                call=None if scope is None else (tool_context.tool_call_id, scope),
            )
        except (EffectLedgerError, ValueError) as exc:
            error = exc if isinstance(exc, EffectLedgerError) else InvalidInput(str(exc))
            return json.dumps({"error": error.to_dict()}, separators=(",", ":"))
        return result_text(result)


def ledger_tool(
    ledger: EffectLedger,
    action: ActionHandle | Action | str,
    *,
    context_of: ContextOf = ledger_context_of,
) -> LedgerTool:
    """The OpenAI Agents tool of ``action``: ``Agent(tools=[t.tool])``; ``context_of`` reads
    the ledger's Context from the application's run context."""
    return LedgerTool(ledger, action, context_of=context_of)
