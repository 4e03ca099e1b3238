"""LangGraph / LangChain agents (``langgraph``, ``langchain``): a ledger action behind interrupt.

:func:`ledger_middleware` returns an agent middleware for ``create_agent`` that brings the
action's tool and wraps its calls. When the model calls the tool, the middleware pauses the
graph with LangGraph's own ``interrupt()``, whose value shows the call and its conversation
(``{"type": "effectledger_approval", "tool_call_id", "name", "args", "thread_id",
"checkpoint_ns"}``); the host:

1. proposes the paused call as its own trusted context (:meth:`LedgerMiddleware.propose`) and
   lets the reviewer approve the proposal in the ledger;
2. resumes with ``Command(resume={interrupt.id: grant})`` (:meth:`LedgerMiddleware.resume`) and
   its identity in ``invoke(..., context=...)`` on every resume.

LangGraph re-runs a node from its start on resume, and any earlier checkpoint may be resumed
again; the call, its arguments and the resume value live in the checkpoint, unsigned. So the
middleware reads the identity from ``runtime.context`` (never checkpointed), compares the call
it is about to run with the granted proposal and performs through the ledger: a repeat is
``replayed``, an edited checkpoint ``digest_mismatch``. The tool's own function never runs.
A reviewer "edit" of the arguments (``HumanInTheLoopMiddleware``) changes the call, so the
ledger refuses it under the old approval; propose the edited call anew instead.

A call's proposal is scoped to its conversation: the graph's ``thread_id`` and its checkpoint
namespace (the nodes' path, without LangGraph's per-task ids). The same tool-call id in two
threads is two proposals; the same call re-run or resumed in one thread is one. On resume the
middleware recomputes the scope from the live config, so a grant of another thread's call is
refused (``digest_mismatch``) instead of answering with that thread's result.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, Context, EffectLedger, EffectOutcome, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import Grant, LedgerGate, require_context, result_text
from effectledger.errors import EffectLedgerError, InvalidInput, NotPermitted
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents.middleware.types import ToolCallRequest
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command, Interrupt

__all__ = ["INTERRUPT_TYPE", "LedgerMiddleware", "ledger_middleware"]

INTERRUPT_TYPE = "effectledger_approval"
FRAMEWORK = "langgraph"

ContextOf = Callable[[Any], object]


def conversation_scope(thread_id: object, checkpoint_ns: object) -> str:
    """The scope of a call in thread ``thread_id`` at namespace ``checkpoint_ns``: the thread
    and the nodes' path (``tools``, ``agent|tools``), LangGraph's task ids left out."""
    if thread_id is None or not str(thread_id):
        raise InvalidInput(
            "a LangGraph run of a ledger tool needs a thread: invoke with a checkpointer and "
            'config={"configurable": {"thread_id": ...}}',
            field="thread_id",
        )
    return json.dumps([str(thread_id), _node_path(checkpoint_ns)], separators=(",", ":"))


def _node_path(checkpoint_ns: object) -> str:
    """``tools:1f0c...`` -> ``tools``; ``agent:ab|tools:cd`` -> ``agent|tools``."""
    return "|".join(part.split(":", 1)[0] for part in str(checkpoint_ns or "").split("|") if part)


def context_attribute(runtime_context: Any) -> object:
    """The host's identity in ``runtime.context``: itself, or its ``context`` attribute."""
    if isinstance(runtime_context, Context):
        return runtime_context
    return getattr(runtime_context, "context", None)


class LedgerMiddleware:
    """The tool of a ledger action (``.tool``) and the agent middleware (``.middleware``)."""

    def __init__(
        self,
        ledger: EffectLedger,
        action: ActionHandle | Action | str,
        *,
        context_of: ContextOf = context_attribute,
    ) -> None:
        require_extra("langgraph", "The LangGraph adapter")
        from langchain.agents.middleware import AgentMiddleware
        from langchain_core.tools import StructuredTool

        self.gate = LedgerGate(ledger, action, framework=FRAMEWORK)
        self._context_of = context_of
        self.tool = StructuredTool.from_function(
            func=_unreachable,
            name=self.gate.name,
            description=self.gate.action.description or f"Propose {self.gate.name}.",
            args_schema=self.gate.action.arguments,
        )
        outer = self

        class EffectLedgerMiddleware(AgentMiddleware):
            """Pauses each call of the ledger tool and performs it through the ledger."""

            tools = [outer.tool]  # noqa: RUF012 - the class attribute LangChain reads

            def wrap_tool_call(
                self,
                request: ToolCallRequest,
                handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
            ) -> ToolMessage | Command[Any]:
                if request.tool_call["name"] != outer.gate.name:
                    return handler(request)
                return outer._gate_call(request)

            async def awrap_tool_call(
                self,
                request: ToolCallRequest,
                handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
            ) -> ToolMessage | Command[Any]:
                if request.tool_call["name"] != outer.gate.name:
                    return await handler(request)
                return outer._gate_call(request)

        self.middleware: AgentMiddleware = EffectLedgerMiddleware()

    def propose(self, context: Context, interrupt: Interrupt | Mapping[str, Any]) -> Proposal:
        """Propose the paused call as the host's ``context``, in the thread it paused in;
        repeats return the same one."""
        value = interrupt if isinstance(interrupt, Mapping) else interrupt.value
        if not isinstance(value, Mapping) or value.get("type") != INTERRUPT_TYPE:
            raise InvalidInput("this interrupt is not an effectledger approval")
        if value.get("name") != self.gate.name:
            raise InvalidInput(f"this interrupt is not a call of {self.gate.name}")
        if "thread_id" not in value:
            raise InvalidInput(
                "this interrupt names no thread (an older adapter made it): resume it without a "
                "grant, and propose the call it pauses at again",
                field="thread_id",
            )
        scope = conversation_scope(value.get("thread_id"), value.get("checkpoint_ns"))
        return self.gate.propose(
            context, str(value.get("tool_call_id")), value.get("args") or {}, scope=scope
        )

    @staticmethod
    def resume(grants: Mapping[str, Grant | Proposal]) -> Command[Any]:
        """The ``Command`` that resumes paused calls, by interrupt id, with their grants."""
        from langgraph.types import Command

        return Command(
            resume={
                interrupt_id: (Grant.of(grant) if isinstance(grant, Proposal) else grant).to_dict()
                for interrupt_id, grant in grants.items()
            }
        )

    def _gate_call(self, request: ToolCallRequest) -> ToolMessage:
        from langchain_core.messages import ToolMessage
        from langgraph.types import interrupt

        call = request.tool_call
        runtime = request.runtime
        try:
            # the identity is checked before the pause and again on every resume
            who = require_context(
                self._context_of(None if runtime is None else runtime.context),
                "a LangGraph run (invoke(..., context=...))",
            )
            configurable = ((None if runtime is None else runtime.config) or {}).get(
                "configurable"
            ) or {}
            thread_id = configurable.get("thread_id")
            path = _node_path(configurable.get("checkpoint_ns"))
            scope = conversation_scope(thread_id, path)  # refuses a run without a thread
            decision = interrupt(
                {
                    "type": INTERRUPT_TYPE,
                    "tool_call_id": call["id"],
                    "name": call["name"],
                    "args": call["args"],
                    "thread_id": str(thread_id),
                    "checkpoint_ns": path,
                }
            )
            grant = Grant.coerce(decision if isinstance(decision, Mapping) else None)
            result = self.gate.perform(
                who,
                grant,
                tool_name=call["name"],
                arguments=call["args"],
                call=(str(call["id"]), scope),
            )
        except EffectLedgerError as exc:
            text = json.dumps({"error": exc.to_dict()}, separators=(",", ":"))
            return ToolMessage(
                content=text, tool_call_id=call["id"], name=call["name"], status="error"
            )
        done = result.outcome in (EffectOutcome.PERFORMED, EffectOutcome.REPLAYED)
        return ToolMessage(
            content=result_text(result),
            tool_call_id=call["id"],
            name=call["name"],
            status="success" if done else "error",
        )


def ledger_middleware(
    ledger: EffectLedger,
    action: ActionHandle | Action | str,
    *,
    context_of: ContextOf = context_attribute,
) -> LedgerMiddleware:
    """The gate of ``action`` for ``create_agent(model, middleware=[m.middleware], ...)``.

    ``context_of`` reads the host's :class:`~effectledger.Context` from ``runtime.context``
    (default: the context itself or its ``context`` attribute).
    """
    return LedgerMiddleware(ledger, action, context_of=context_of)


def _unreachable(**arguments: Any) -> str:
    raise NotPermitted(
        "a ledger tool runs only through its effectledger middleware; add it to the agent"
    )
