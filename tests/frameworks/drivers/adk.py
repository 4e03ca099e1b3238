"""Google ADK: ``Runner`` with ``InMemorySessionService`` and a scripted ``BaseLlm``; the session
as JSON is the saved state, restored into a fresh session service on every resume. The run's
identity is the host's object given to ``acting_as``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from effectledger import AdmissionDenied, Context, EffectLedger, EffectLedgerError, Proposal
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
)


def scripted_llm(calls: list[Any], seen: list[Any]) -> Any:
    """An offline ADK model: the function calls of ``calls`` on its first turn, ``done`` after a
    tool result; every function response it is shown is appended to ``seen``."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class ScriptedLlm(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            parts = llm_request.contents[-1].parts if llm_request.contents else []
            answered = [p.function_response for p in parts if p.function_response]
            seen.extend(answered)
            if answered or not calls:
                content = [types.Part(text="done")]
            else:
                content = [types.Part(function_call=call) for call in calls]
            usage = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=0, candidates_token_count=0, total_token_count=0
            )
            yield LlmResponse(
                content=types.Content(role="model", parts=content), usage_metadata=usage
            )

    return ScriptedLlm()


class ADKDriver:
    """``Runner`` + ``InMemorySessionService`` with a scripted ``BaseLlm``; the session as JSON
    is the saved state, restored into a fresh session service on every resume."""

    name = "adk"
    app_name = "refunds"
    user_id = "customer-1"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.adk import ledger_tool

        self.adapter = ledger_tool(app, ACTION, **adapter_options(context_of))
        self.app = app
        self.seen: list[Any] = []
        self.saved = ""

    def agent(self, calls: list[Any]) -> Any:
        """The ADK agent whose model makes ``calls`` first."""
        from google.adk.agents import LlmAgent

        return LlmAgent(
            name="refunds", model=scripted_llm(calls, self.seen), tools=[self.adapter.tool]
        )

    def run(self, calls: list[Any], saved: str | None, message: Any, host: object) -> Any:
        """Run (or resume the saved session) with ``message`` as ``host``: the events and the
        session as saved after (also kept in ``self.saved``, when the run raises too)."""
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService, Session

        from effectledger.callers.frameworks.adk import acting_as

        async def go() -> tuple[list[Any], str]:
            service = InMemorySessionService()
            if saved is None:
                session = await service.create_session(app_name=self.app_name, user_id=self.user_id)
            else:
                restored = Session.model_validate_json(saved)
                session = await service.create_session(
                    app_name=self.app_name, user_id=self.user_id, session_id=restored.id
                )
                for event in restored.events:
                    await service.append_event(session, event)
            runner = Runner(
                app_name=self.app_name, agent=self.agent(calls), session_service=service
            )
            events = []
            try:
                with acting_as(host):
                    async for event in runner.run_async(
                        user_id=self.user_id, session_id=session.id, new_message=message
                    ):
                        events.append(event)
            finally:
                after = await service.get_session(
                    app_name=self.app_name, user_id=self.user_id, session_id=session.id
                )
                assert after is not None
                self.saved = after.model_dump_json()
            return events, self.saved

        return asyncio.run(go())

    @property
    def shown(self) -> list[str]:
        """The ledger tool's answers the scripted model was given, as JSON text."""
        return [json.dumps(dict(r.response or {})) for r in self.seen if r.name == ACTION]

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        paused = self.pause_batch(context, [(call_id, arguments)])
        (request,) = paused.handle
        return Paused(paused.saved, paused.call_id, request, paused.scope)

    def pause_batch(self, context: Any, calls: Sequence[Call]) -> Paused:
        from google.genai import types

        from effectledger.callers.frameworks.adk import confirmation_requests

        made = [types.FunctionCall(id=call_id, name=ACTION, args=dict(a)) for call_id, a in calls]
        message = types.Content(role="user", parts=[types.Part(text="refund")])
        events, saved = self.run(made, None, message, context)
        requests = confirmation_requests(events)
        if not requests:  # the tool answered at once
            raise Answered(tool_answer(events))
        return Paused(saved, calls[0][0], requests, json.loads(saved)["id"])

    def propose(self, context: Context, paused: Paused) -> Proposal:
        # the tool proposed at the pause, as the host; the pause carries its grant
        return self.app.proposal(context, paused.handle.grant.proposal_id)

    def propose_batch(self, context: Context, paused: Paused) -> dict[str, Proposal]:
        return {
            request.call_id: self.app.proposal(context, request.grant.proposal_id)
            for request in paused.handle
        }

    def resume_batch(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        reviewer: Context | None = None,
    ) -> dict[str, JSON]:
        from effectledger.callers.frameworks.adk import approve, reject, reply

        parts = [
            reject(r, rejected[r.call_id])
            if r.call_id in rejected
            else approve(r, grants.get(r.call_id))
            for r in paused.handle
        ]
        events, _ = self.run([], paused.saved, reply(*parts), context)
        return {
            str(p.function_response.id): dict(p.function_response.response or {})
            for e in events
            for p in (e.content.parts if e.content else [])
            if p.function_response and p.function_response.name == ACTION
        }

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        from effectledger.callers.frameworks.adk import approve, reply

        part = approve(paused.handle.confirmation_id, grant)
        try:
            events, _ = self.run([], paused.saved, reply(part), context)
        except AdmissionDenied as refused:  # refused for this resume: the confirmation stays open
            answer: JSON = refused.details["answer"]
            return answer
        except EffectLedgerError as exc:
            return {"error": exc.to_dict()}
        return tool_answer(events)

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, amount_edit(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        """The saved session edited: the call's arguments in its events and confirmation."""
        state = json.loads(paused.saved)
        edit_arguments(state, change)
        return Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)


def tool_answer(events: list[Any]) -> JSON:
    """The ledger tool's last answer among ADK ``events``."""
    answers = [
        dict(p.function_response.response)
        for e in events
        for p in (e.content.parts if e.content else [])
        if p.function_response and p.function_response.name == ACTION
    ]
    return answers[-1]
