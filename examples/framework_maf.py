"""A refund behind approval in Microsoft Agent Framework, the ledger as the gate (``[maf]``).

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/framework_maf.py

A scripted chat client asks for a refund; MAF surfaces its ``function_approval_request``,
already proposed in the ledger as the host's identity and carrying the ledger's part (proposal,
digest, tenant) in its ``additional_properties``; the reviewer approves that digest; answering
the request with MAF's approval response (which carries the grant) and the host's identity
performs it once, and restoring the same saved session again replays. The identity travels in
the application's own context object (its ``ledger_context``), given on every run, never in the
saved session.
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
from effectledger.callers.frameworks.maf import LEDGER_KEY, ledger_tool


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
    """Pause (proposed as the host), approve, resume twice from the saved session; print each
    outcome."""
    ledger, refund, receiver = open_desk()
    tool = ledger_tool(ledger, refund)
    agent = Agent(
        client=ScriptedClient(),
        tools=[tool.tool],
        middleware=[tool.pause_middleware, tool.middleware],
    )
    support = Support(customer="cust-1001", ledger_context=AGENT)
    session = agent.create_session()
    paused = await agent.run(
        "Refund order 1001, it arrived broken.",
        session=session,
        function_invocation_kwargs=tool.invocation(support),
    )
    (request,) = paused.user_input_requests
    shown = request.additional_properties[LEDGER_KEY]  # the proposal the pause recorded
    ledger.approve(RITA, shown["proposal_id"], digest=shown["digest"])
    saved = json.dumps(session.to_dict(), default=str)
    print("paused:", request.function_call.name, shown["proposal_id"])

    async def resume() -> str:
        run = await agent.run(
            Message("user", [request.to_function_approval_response(True)]),  # carries the grant
            session=AgentSession.from_dict(json.loads(saved)),
            function_invocation_kwargs=tool.invocation(support),
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
