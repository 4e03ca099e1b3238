"""A refund behind approval in Pydantic AI, the ledger as the gate (``effectledger[pydantic-ai]``).

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/framework_pydantic_ai.py

A scripted model asks for a refund; the tool proposes it and Pydantic AI pauses with its
``DeferredToolRequests``; the reviewer approves the ledger's proposal; resuming performs it
once, resuming the same saved history again replays, and an edited history is refused. The
``deps`` are the application's own object; the tool reads the ledger's identity from its
``ledger_context`` on the call and again on every resume.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from _refund_desk import AGENT, REFUND, RITA, open_desk
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from effectledger import Context
from effectledger.callers.frameworks.pydantic_ai import approved, ledger_tool


@dataclass(frozen=True)
class SupportDeps:
    """The application's dependencies: its own data, and the ledger's identity of the run."""

    customer: str
    ledger_context: Context


def model(messages: list, info: AgentInfo) -> ModelResponse:
    """The scripted model: ask for the refund, then say done."""
    if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("refund_order", REFUND, tool_call_id="call-1")])


def main() -> None:
    """Pause, approve, resume twice, resume an edited history; print each outcome."""
    ledger, refund, receiver = open_desk()
    agent = Agent(
        FunctionModel(model),
        output_type=[str, DeferredToolRequests],
        deps_type=SupportDeps,
        tools=[ledger_tool(ledger, refund)],
    )
    deps = SupportDeps(customer="cust-1001", ledger_context=AGENT)
    paused = agent.run_sync("Refund order 1001, it arrived broken.", deps=deps)
    requests = paused.output
    assert isinstance(requests, DeferredToolRequests)
    grant = requests.metadata["call-1"]
    print("paused: proposal", grant["proposal_id"][:12])
    ledger.approve(RITA, grant["proposal_id"], digest=grant["digest"])
    saved = ModelMessagesTypeAdapter.dump_json(paused.all_messages())  # what the app stores

    def resume(history: bytes) -> str:
        run = agent.run_sync(
            message_history=ModelMessagesTypeAdapter.validate_json(history),
            deferred_tool_results=approved(requests),
            deps=deps,  # the identity comes from the host on every resume
        )
        parts = [p for m in run.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
        answer = json.loads(parts[0].content)
        return f"{answer['outcome']} {answer['reason'] or answer['state']}"

    print("resume:", resume(saved))
    print("resume again:", resume(saved))
    edited = saved.replace(b'"amount_minor":30', b'"amount_minor":3000')
    print("edited history:", resume(edited))
    print("receiver effects:", receiver.counts().effects)
    ledger.close()
    receiver.close()


if __name__ == "__main__":
    main()
