"""A refund behind approval in Google ADK, the ledger as the gate (``effectledger[adk]``).

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/framework_adk.py

A scripted model asks for a refund; the tool proposes it and ADK pauses with its own
``adk_request_confirmation``, whose payload is the ledger's proposal id and digest; the
reviewer approves the proposal; answering the confirmation performs it once, answering it on
the same saved session again replays, and an edited session is refused. The identity comes
from the application's own request object, given on every run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from _refund_desk import AGENT, REFUND, RITA, open_desk
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService, Session
from google.genai import types

from effectledger import AdmissionDenied, Context
from effectledger.callers.frameworks.adk import (
    acting_as,
    approve,
    confirmation_requests,
    ledger_tool,
    reply,
)


class ScriptedModel(BaseLlm):
    """Asks for the refund until a tool result comes back, then says done."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts or []
        if any(part.function_response for part in last):
            part = types.Part(text="done")
        else:
            call = types.FunctionCall(id="call-1", name="refund_order", args=REFUND)
            part = types.Part(function_call=call)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=0, candidates_token_count=0, total_token_count=0
        )
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


@dataclass
class Request:
    """The application's own per-request object; the tool reads ``.context`` from it."""

    user: str
    context: Context


async def main() -> None:
    """Pause, approve, answer twice from the saved session, answer an edited one."""
    ledger, refund, receiver = open_desk()
    tool = ledger_tool(ledger, refund)
    agent = LlmAgent(name="refunds", model=ScriptedModel(), tools=[tool.tool])
    request = Request(user="ann", context=AGENT)

    async def run(saved: str | None, message: types.Content) -> tuple[list, str]:
        service = InMemorySessionService()  # a fresh process: the session as the app stored it
        if saved is None:
            session = await service.create_session(app_name="refunds", user_id="ann")
        else:
            restored = Session.model_validate_json(saved)
            session = await service.create_session(
                app_name="refunds", user_id="ann", session_id=restored.id
            )
            for event in restored.events:
                await service.append_event(session, event)
        runner = Runner(app_name="refunds", agent=agent, session_service=service)
        with acting_as(request):  # the identity comes from the host on every run and resume
            events = [
                event
                async for event in runner.run_async(
                    user_id="ann", session_id=session.id, new_message=message
                )
            ]
        after = await service.get_session(app_name="refunds", user_id="ann", session_id=session.id)
        assert after is not None
        return events, after.model_dump_json()

    ask = types.Content(role="user", parts=[types.Part(text="Refund order 1001, it broke.")])
    events, saved = await run(None, ask)
    (confirmation,) = confirmation_requests(events)
    grant = confirmation.grant
    assert grant is not None
    print("paused: proposal", grant.proposal_id[:12])
    ledger.approve(RITA, grant.proposal_id, digest=grant.digest)

    async def resume(session: str) -> str:
        try:
            events, _ = await run(session, reply(approve(confirmation)))
        except AdmissionDenied as refused:  # refused for this resume: the confirmation stays open
            answer = refused.details["answer"]
            return f"{answer['outcome']} {answer['reason']}"
        answers = [
            p.function_response.response
            for e in events
            for p in (e.content.parts if e.content else [])
            if p.function_response and p.function_response.name == "refund_order"
        ]
        answer = answers[-1] or {}
        return f"{answer['outcome']} {answer['reason'] or answer['state']}"

    print("resume:", await resume(saved))
    print("resume the saved session again:", await resume(saved))
    edited = json.dumps(json.loads(saved)).replace('"amount_minor": 30', '"amount_minor": 3000')
    print("edited session:", await resume(edited))
    print("receiver effects:", receiver.counts().effects)
    ledger.close()
    receiver.close()


if __name__ == "__main__":
    asyncio.run(main())
