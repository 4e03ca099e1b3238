"""A refund behind approval in the OpenAI Agents SDK, the ledger as the gate.

Needs ``effectledger[openai-agents]``. Run it from anywhere (it writes its two SQLite files in
the current folder)::

    python examples/framework_openai_agents.py

A scripted model asks for a refund; the SDK interrupts the run for approval; the host proposes
the call and the reviewer approves it; resuming the saved ``RunState`` (always with the host's
``context_override``) performs it once, resuming the same saved state again replays, and a
saved state whose arguments and fingerprint were edited is refused. The run context is the
application's own object; the tool reads the ledger's identity from its ``ledger_context``,
and the saved state keeps only the application's data, never the identity.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the example stays offline

from _refund_desk import AGENT, REFUND, RITA, open_desk
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message, function_call

from effectledger import Context
from effectledger.callers.frameworks.openai_agents import ledger_tool

CONVERSATION = "support-chat-1001"


@dataclass(frozen=True)
class Support:
    """The application's run context: its own data, and the ledger's identity of the run."""

    customer: str
    ledger_context: Context


async def main() -> None:
    """Pause, propose, approve, resume twice, resume an edited state; print each outcome."""
    ledger, refund, receiver = open_desk()
    tool = ledger_tool(ledger, refund)

    def agent(*turns: list) -> Agent:
        script = [*turns, *[[assistant_message("done")]] * 3]
        return Agent(name="refunds", model=ScriptedModel(script), tools=[tool.tool])

    asked = agent([function_call("refund_order", REFUND, call_id="call-1")])
    support = Support(customer="cust-1001", ledger_context=AGENT)
    paused = await Runner.run(asked, "Refund order 1001.", context=support)
    # the conversation the calls belong to: the SDK keeps none the tool could read
    proposals = tool.propose_interruptions(support, paused, scope=CONVERSATION)
    for proposal in proposals.values():
        ledger.approve(RITA, proposal)
    # kept server-side; the application's data only: the identity comes from the host on resume
    saved = paused.to_state().to_string(context_serializer=lambda run: {"customer": run.customer})
    print("paused:", [item.tool_name for item in paused.interruptions])

    async def resume(state: str) -> str:
        run = await tool.resume(agent(), state, support, proposals, scope=CONVERSATION)
        outputs = [item.output for item in run.new_items if item.type == "tool_call_output_item"]
        answer = json.loads(outputs[0])
        return f"{answer['outcome']} {answer['reason'] or answer['state']}"

    print("resume:", await resume(saved))
    print("resume again:", await resume(saved))
    edited = json.loads(saved.replace('\\"amount_minor\\":30', '\\"amount_minor\\":3000'))
    edited["context"]["tool_invocations"] = {}  # the SDK's fingerprint, dropped by the editor
    print("edited state:", await resume(json.dumps(edited)))
    print("receiver effects:", receiver.counts().effects)
    ledger.close()
    receiver.close()


if __name__ == "__main__":
    asyncio.run(main())
