"""Microsoft Agent Framework: ``Agent`` with a scripted ``BaseChatClient``; the session dict is
the saved state. The host proposes the paused calls itself and gives their grants on resume
(``tool.invocation(context, grants)``); ``run`` also takes the run's identity, so that the
adapter's pause middleware proposes at the pause."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from effectledger import Context, EffectLedger, Proposal
from effectledger.callers.frameworks.gate import Grant
from tests.frameworks.drivers.common import (
    ACTION,
    JSON,
    Call,
    Edit,
    Paused,
    adapter_options,
    amount_edit,
    answer_of,
    edit_arguments,
    tool_json,
)


class MAFDriver:
    """``Agent`` with a scripted ``BaseChatClient`` (streaming too); the session dict is saved."""

    name = "maf"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.maf import ledger_tool

        self.adapter = ledger_tool(app, ACTION, **adapter_options(context_of))
        self.shown: list[str] = []

    def agent(self, calls: Sequence[Call]) -> Any:
        """The agent whose model makes ``calls`` first and says ``done`` once it has results."""
        from agent_framework import (
            Agent,
            BaseChatClient,
            ChatMiddlewareLayer,
            ChatResponse,
            ChatResponseUpdate,
            Content,
            FunctionInvocationLayer,
            Message,
            ResponseStream,
        )

        shown = self.shown

        class Scripted(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
            def _contents(self, messages: Any) -> list[Any]:
                results = [c for m in messages for c in m.contents if c.type == "function_result"]
                if results:
                    shown.extend(str(c.result) for c in results)
                    return [Content.from_text("done")]
                return [
                    Content.from_function_call(call_id=call_id, name=ACTION, arguments=dict(args))
                    for call_id, args in calls
                ]

            def _inner_get_response(
                self, *, messages: Any, stream: Any, options: Any, **kw: Any
            ) -> Any:
                contents = self._contents(messages)
                if stream:

                    async def updates() -> Any:
                        yield ChatResponseUpdate(contents=contents, role="assistant")

                    return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

                async def response() -> Any:
                    return ChatResponse(messages=[Message("assistant", contents)])

                return response()

        return Agent(
            client=Scripted(),
            name="refunds",
            tools=[self.adapter.tool],
            middleware=[self.adapter.pause_middleware, self.adapter.middleware],
        )

    def run(self, calls: Sequence[Call], context: Any = None) -> tuple[Any, Any]:
        """A first run in a new session, with the host's identity if ``context`` is given (then
        the pause proposes the calls): the response and the session."""
        agent = self.agent(calls)
        session = agent.create_session()
        kwargs = {} if context is None else self.adapter.invocation(context)
        response = asyncio.run(
            agent.run("refund", session=session, function_invocation_kwargs=kwargs)
        )
        return response, session

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        paused = self.pause_batch(context, [(call_id, arguments)])
        (request,) = paused.handle
        return Paused(paused.saved, paused.call_id, request, paused.scope)

    def pause_batch(self, context: Any, calls: Sequence[Call]) -> Paused:
        response, session = self.run(calls)
        requests = list(response.user_input_requests)
        saved = json.dumps(session.to_dict(), default=str)
        return Paused(saved, requests[0].function_call.call_id, requests, session.session_id)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.adapter.propose_request(context, paused.handle, session=paused.scope)

    def propose_batch(self, context: Context, paused: Paused) -> dict[str, Proposal]:
        return {
            request.function_call.call_id: self.adapter.propose_request(
                context, request, session=paused.scope
            )
            for request in paused.handle
        }

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        grants = {} if grant is None else {paused.call_id: grant}
        batch = Paused(paused.saved, paused.call_id, [paused.handle], paused.scope)
        return tool_json(self._resume(batch, context, grants, {})[paused.call_id])

    def resume_batch(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        reviewer: Context | None = None,
    ) -> dict[str, JSON]:
        # MAF's rejection carries no reason: the model reads MAF's own words
        return {
            call_id: answer_of(text)
            for call_id, text in self._resume(paused, context, grants, rejected).items()
        }

    def _resume(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
    ) -> dict[str, str]:
        from agent_framework import AgentSession, Message

        session = AgentSession.from_dict(json.loads(paused.saved))
        kwargs: dict[str, Any] = {}
        if context is not None:
            kwargs = self.adapter.invocation(context, dict(grants))
        answers = [
            request.to_function_approval_response(request.function_call.call_id not in rejected)
            for request in paused.handle
        ]
        response = asyncio.run(
            self.agent([]).run(
                Message("user", answers), session=session, function_invocation_kwargs=kwargs
            )
        )
        return {
            c.call_id: str(c.result)
            for m in response.messages
            for c in m.contents
            if c.type == "function_result"
        }

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, amount_edit(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        state = json.loads(paused.saved)
        edit_arguments(state, change)
        return Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)
