"""A refund behind approval in a LangGraph agent, the ledger as its gate ([langgraph]).

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/framework_langgraph.py

A scripted chat model asks for a refund; the ledger's middleware pauses the graph with
``interrupt()``; the host proposes the paused call and the reviewer approves it; resuming
performs it once, and resuming the same paused checkpoint again (time travel) replays.
"""

from __future__ import annotations

import json
from typing import Any

from _refund_desk import AGENT, REFUND, RITA, open_desk
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from effectledger.callers.frameworks.langgraph import ledger_middleware


class ScriptedModel(FakeMessagesListChatModel):
    """Answers from its list; tools are bound by the agent, the script already names them."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def main() -> None:
    """Pause, propose, approve, resume twice from the paused checkpoint; print each outcome."""
    ledger, refund, receiver = open_desk()
    gate = ledger_middleware(ledger, refund)
    call = {"name": "refund_order", "args": REFUND, "id": "call-1"}
    model = ScriptedModel(responses=[AIMessage("", tool_calls=[call])] + [AIMessage("done")] * 3)
    graph = create_agent(model, middleware=[gate.middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "refund-1"}}
    ask = {"messages": [{"role": "user", "content": "Refund order 1001, it arrived broken."}]}
    paused = graph.invoke(ask, config, context=AGENT, version="v2")
    (interrupt,) = paused.interrupts
    proposal = gate.propose(AGENT, interrupt)  # the host proposes, as itself
    ledger.approve(RITA, proposal)
    print("paused:", interrupt.value["name"], interrupt.value["args"]["amount_minor"])
    checkpoint = graph.get_state(config).config

    def resume() -> str:
        out = graph.invoke(gate.resume({interrupt.id: proposal}), checkpoint, context=AGENT)
        answer = json.loads([m for m in out["messages"] if m.type == "tool"][-1].content)
        return f"{answer['outcome']} {answer['reason'] or answer['state']}"

    print("resume:", resume())
    print("resume the paused checkpoint again:", resume())
    print("receiver effects:", receiver.counts().effects)
    ledger.close()
    receiver.close()


if __name__ == "__main__":
    main()
