"""LangGraph: ``create_agent`` with a fake chat model and an ``InMemorySaver``; the checkpoint
is the saved state. The pause is LangChain's human-in-the-loop request, answered with its
decisions; the grants and the reviewer come in the run's context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from effectledger import Context, EffectLedger, Proposal
from effectledger.callers.frameworks.gate import Grant
from tests.frameworks.drivers.common import (
    ACTION,
    JSON,
    Answered,
    Call,
    Edit,
    Paused,
    adapter_options,
    amount_edit,
    edit_arguments,
    last_tool_message,
    tool_json,
)


@dataclass
class LangGraphHost:
    """What a host gives a LangGraph run as ``context=``: its identity, the grants of this
    resume by tool-call id and the reviewer who decided (an application's own object)."""

    context: Context | None
    grants: dict[str, Grant | Proposal] = field(default_factory=dict)
    reviewer: Context | None = None


APPROVE = {"type": "approve"}


class LangGraphDriver:
    """``create_agent`` with a fake chat model and an ``InMemorySaver``; the checkpoint is saved.

    The pause is LangChain's human-in-the-loop request; every resume answers it ``approve``
    and gives the grant in the run's context."""

    name = "langgraph"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from effectledger.callers.frameworks.langgraph import ledger_middleware

        self.adapter = ledger_middleware(app, ACTION, **adapter_options(context_of))
        self.saver = InMemorySaver()
        self.threads = 0
        self.shown: list[str] = []

    def _agent(self, calls: list[dict[str, Any]] | None) -> Any:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
        from langchain_core.messages import AIMessage

        shown = self.shown

        class Model(FakeMessagesListChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
                return self

            def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
                if messages and messages[-1].type == "tool":  # the model reads the results
                    at = max(i for i, m in enumerate(messages) if m.type == "ai")
                    shown.extend(str(m.content) for m in messages[at + 1 :] if m.type == "tool")
                return super()._generate(messages, *args, **kwargs)

        responses: list[Any] = [AIMessage(content="done")] * 4
        if calls is not None:
            responses = [AIMessage(content="", tool_calls=calls), *responses]
        return create_agent(
            Model(responses=responses),
            checkpointer=self.saver,
            middleware=[self.adapter.middleware],
        )

    def pause_calls(self, context: Any, calls: list[dict[str, Any]]) -> Paused:
        """One model turn making ``calls``, paused for review in a thread of its own."""
        self.threads += 1
        config = {"configurable": {"thread_id": f"thread-{self.threads}"}}
        agent = self._agent(calls)
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "refund"}]},
            config,
            context=context,
            version="v2",
        )
        if not result.interrupts:  # the middleware answered without pausing
            raise Answered(tool_json(last_tool_message(result.value).content))
        (interrupt,) = result.interrupts
        saved = agent.get_state(config).config
        return Paused(saved, str(calls[0]["id"]), interrupt, f"thread-{self.threads}")

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        return self.pause_calls(context, [{"name": ACTION, "args": dict(arguments), "id": call_id}])

    def pause_batch(self, context: Any, calls: Sequence[Call]) -> Paused:
        made = [{"name": ACTION, "args": dict(args), "id": call_id} for call_id, args in calls]
        return self.pause_calls(context, made)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.adapter.proposal(context, paused.handle)

    def propose_batch(self, context: Context, paused: Paused) -> dict[str, Proposal]:
        return self.adapter.proposals(context, paused.handle)

    def decide(self, paused: Paused, host: LangGraphHost, *decisions: Mapping[str, Any]) -> Any:
        """Resume the saved checkpoint with ``decisions``, ``host`` as the run's context; the
        graph's final state."""
        command = self.adapter.resume({paused.handle.id: list(decisions)})
        return self._agent(None).invoke(command, paused.saved, context=host, version="v2").value

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        host = LangGraphHost(context, {} if grant is None else {paused.call_id: grant})
        return tool_json(last_tool_message(self.decide(paused, host, APPROVE)).content)

    def resume_batch(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        reviewer: Context | None = None,
    ) -> dict[str, JSON]:
        """``approve`` each granted call, ``reject`` (the reviewer denies it in the ledger,
        the reason as the message) the others."""
        requests = paused.handle.value["action_requests"]
        call_ids = [request["effectledger"]["tool_call_id"] for request in requests]
        decisions = [
            {"type": "reject", "message": rejected[call_id]} if call_id in rejected else APPROVE
            for call_id in call_ids
        ]
        host = LangGraphHost(context, dict(grants), reviewer=reviewer)
        state = self.decide(paused, host, *decisions)
        return {m.tool_call_id: tool_json(m.content) for m in state["messages"] if m.type == "tool"}

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, amount_edit(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        """The checkpoint store edited in place: channel blobs and pending writes (Send packets)."""
        saver = self.saver
        for key, (kind, blob) in list(saver.blobs.items()):
            if kind != "empty":
                value = saver.serde.loads_typed((kind, blob))
                if edit_arguments(value, change):
                    saver.blobs[key] = saver.serde.dumps_typed(value)
        for inner in saver.writes.values():
            for k, (task_id, channel, typed, path) in list(inner.items()):
                value = saver.serde.loads_typed(typed)
                if edit_arguments(value, change):
                    inner[k] = (task_id, channel, saver.serde.dumps_typed(value), path)
        return paused
