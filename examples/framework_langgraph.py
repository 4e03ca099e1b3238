"""A refund behind approval in a LangGraph agent, the ledger as its gate ([langgraph]).

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/framework_langgraph.py

A scripted chat model asks for a refund; the ledger's middleware proposes it and pauses the
graph with LangChain's human-in-the-loop request (what Agent Inbox and Studio show); the
reviewer approves the proposal in the ledger; resuming with ``approve`` and the grant in the run's
context performs it once, and resuming the same paused checkpoint again (time travel) replays.
A second conversation is rejected: the model reads the reviewer's message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from _refund_desk import AGENT, REFUND, RITA, open_desk
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from effectledger import Context, Proposal
from effectledger.callers.frameworks.langgraph import ledger_middleware


class ScriptedModel(FakeMessagesListChatModel):
    """Answers from its list; tools are bound by the agent, the script already names them."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@dataclass
class RunContext:
    """The application's own run context: who runs, what was granted, who reviewed."""

    context: Context
    grants: dict[str, Proposal] = field(default_factory=dict)
    reviewer: Context | None = None


def main() -> None:
    """Pause, approve, resume twice from the paused checkpoint; reject another; print each."""
    ledger, refund, receiver = open_desk()
    gate = ledger_middleware(ledger, refund)
    saver = InMemorySaver()

    def agent() -> Any:  # each conversation's scripted model asks for the refund once
        call = {"name": "refund_order", "args": REFUND, "id": "call-1"}
        script = [AIMessage("", tool_calls=[call])] + [AIMessage("done")] * 3
        return create_agent(
            ScriptedModel(responses=script), middleware=[gate.middleware], checkpointer=saver
        )

    graph = agent()
    ask = {"messages": [{"role": "user", "content": "Refund order 1001, it arrived broken."}]}

    config = {"configurable": {"thread_id": "refund-1"}}
    paused = graph.invoke(ask, config, context=RunContext(AGENT), version="v2")
    (interrupt,) = paused.interrupts  # {"action_requests": [...], "review_configs": [...]}
    (request,) = interrupt.value["action_requests"]
    print("paused:", request["name"], request["args"]["amount_minor"])
    proposal = gate.proposal(AGENT, interrupt)  # as the ledger recorded it
    ledger.approve(RITA, proposal)
    checkpoint = graph.get_state(config).config
    grants = RunContext(AGENT, grants={"call-1": proposal})

    def answer(out: Any) -> str:
        result = json.loads([m for m in out["messages"] if m.type == "tool"][-1].content)
        return f"{result['outcome']} {result['reason'] or result['state']}"

    def resume() -> str:
        approve = gate.resume({interrupt.id: [{"type": "approve"}]})
        return answer(graph.invoke(approve, checkpoint, context=grants))

    print("resume:", resume())
    print("resume the paused checkpoint again:", resume())

    other = {"configurable": {"thread_id": "refund-2"}}
    graph = agent()
    (second,) = graph.invoke(ask, other, context=RunContext(AGENT), version="v2").interrupts
    reject = gate.resume({second.id: [{"type": "reject", "message": "Send a replacement."}]})
    out = graph.invoke(reject, other, context=RunContext(AGENT, reviewer=RITA))  # RITA decides
    note = json.loads([m for m in out["messages"] if m.type == "tool"][-1].content)["note"]
    print("reject:", answer(out), "-", note)
    print("receiver effects:", receiver.counts().effects)
    ledger.close()
    receiver.close()


if __name__ == "__main__":
    main()
