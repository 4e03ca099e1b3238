"""A refund behind approval in Microsoft Agent Framework, the ledger as the gate (``[maf]``).

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/framework_maf.py

A scripted chat client asks for a refund; MAF surfaces its ``function_approval_request``; the
host proposes the call and the reviewer approves it; answering the request with the host's
identity and grant performs it once, and restoring the same saved session again replays. The
identity travels in the application's own context object (its ``ledger_context``), given on
every resume, never in the saved session.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from _refund_desk import AGENT, REFUND, RITA, open_desk
from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
)

from effectledger import Context
from effectledger.callers.frameworks.maf import ledger_tool


@dataclass(frozen=True)
class Support:
    """The application's context of a run: its own data, and the ledger's identity."""

    customer: str
    ledger_context: Context


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):
    """Asks for the refund until a function result comes back, then says done."""

    async def _answer(self, messages: Any) -> ChatResponse:
        if any(c.type == "function_result" for m in messages for c in m.contents):
            return ChatResponse(messages=[Message("assistant", ["done"])])
        call = Content.from_function_call(call_id="call-1", name="refund_order", arguments=REFUND)
        return ChatResponse(messages=[Message("assistant", [call])])

    def _inner_get_response(self, *, messages: Any, stream: Any, options: Any, **kw: Any) -> Any:
        return self._answer(messages)


async def main() -> None:
    """Pause, propose, approve, resume twice from the saved session; print each outcome."""
    ledger, refund, receiver = open_desk()
    tool = ledger_tool(ledger, refund)
    agent = Agent(client=ScriptedClient(), tools=[tool.tool], middleware=[tool.middleware])
    support = Support(customer="cust-1001", ledger_context=AGENT)
    session = agent.create_session()
    paused = await agent.run("Refund order 1001, it arrived broken.", session=session)
    (request,) = paused.user_input_requests
    proposal = tool.propose_request(support, request, session=session)  # the host, as itself
    ledger.approve(RITA, proposal)
    saved = json.dumps(session.to_dict(), default=str)
    print("paused:", request.function_call.name)

    async def resume() -> str:
        run = await agent.run(
            Message("user", [request.to_function_approval_response(True)]),
            session=AgentSession.from_dict(json.loads(saved)),
            function_invocation_kwargs=tool.resume(support, {"call-1": proposal}),
        )
        results = [c for m in run.messages for c in m.contents if c.type == "function_result"]
        answer = json.loads(results[0].result)
        return f"{answer['outcome']} {answer['reason'] or answer['state']}"

    print("resume:", await resume())
    print("resume the saved session again:", await resume())
    print("receiver effects:", receiver.counts().effects)
    ledger.close()
    receiver.close()


if __name__ == "__main__":
    asyncio.run(main())
