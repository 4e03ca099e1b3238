"""Pydantic AI: ``Agent`` with a ``FunctionModel``; the message history as JSON is the saved
state. The tool proposes at the pause, as ``deps``; its grants ride in the requests' metadata."""

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
    Answered,
    Call,
    Edit,
    Paused,
    adapter_options,
    amount_edit,
    answer_of,
    edit_arguments,
    tool_json,
)


class PydanticAIDriver:
    """``Agent`` with a ``FunctionModel``; the message history as JSON is the saved state."""

    name = "pydantic_ai"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.pydantic_ai import ledger_tool

        self.tool = ledger_tool(app, ACTION, **adapter_options(context_of))
        self.app = app
        self.shown: list[str] = []

    def _agent(self, calls: Sequence[Call]) -> Any:
        from pydantic_ai import Agent, DeferredToolRequests
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        shown = self.shown

        def model(messages: Any, info: AgentInfo) -> ModelResponse:
            returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
            if returned:
                shown.extend(str(p.content) for p in returned)
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(
                parts=[
                    ToolCallPart(ACTION, dict(args), tool_call_id=call_id)
                    for call_id, args in calls
                ]
            )

        return Agent(
            FunctionModel(model),
            output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
            deps_type=object,  # a Context, or an application's own deps carrying one
            tools=[self.tool],
        )

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        return self.pause_batch(context, [(call_id, arguments)])

    def pause_batch(self, context: Any, calls: Sequence[Call]) -> Paused:
        from pydantic_ai import DeferredToolRequests
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

        # ``asyncio.run``, not ``run_sync``: that one leaves a thread's event loop open
        result = asyncio.run(self._agent(calls).run("refund", deps=context))
        requests = result.output
        if not isinstance(requests, DeferredToolRequests):  # the tool answered at once
            (part,) = [
                p for m in result.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)
            ]
            raise Answered(tool_json(part.content))
        saved = ModelMessagesTypeAdapter.dump_json(result.all_messages())
        return Paused(saved, calls[0][0], requests, result.conversation_id)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.propose_batch(context, paused)[paused.call_id]

    def propose_batch(self, context: Context, paused: Paused) -> dict[str, Proposal]:
        # the tool proposed at the pause, as ``deps``; its grant is the request's metadata
        return {
            call.tool_call_id: self.app.proposal(
                context, paused.handle.metadata[call.tool_call_id]["proposal_id"]
            )
            for call in paused.handle.approvals
        }

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        grants = {} if grant is None else {paused.call_id: grant}
        calls = [call.tool_call_id for call in paused.handle.approvals]
        return tool_json(self._resume(paused, context, grants, {}, calls)[paused.call_id])

    def resume_batch(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        reviewer: Context | None = None,
    ) -> dict[str, JSON]:
        calls = [call.tool_call_id for call in paused.handle.approvals]
        returned = self._resume(paused, context, grants, rejected, calls)
        return {call_id: answer_of(content) for call_id, content in returned.items()}

    def _resume(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        calls: Sequence[str],
    ) -> dict[str, str]:
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

        from effectledger.callers.frameworks.pydantic_ai import approved

        results = approved(dict(grants), rejected=rejected)
        for call_id in calls:  # approved in the framework, with or without a grant
            results.approvals.setdefault(call_id, True)
        history = ModelMessagesTypeAdapter.validate_json(paused.saved)
        out = asyncio.run(
            self._agent([]).run(
                message_history=history, deferred_tool_results=results, deps=context
            )
        )
        return {
            p.tool_call_id: str(p.content)
            for m in out.new_messages()
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        }

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, amount_edit(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        history = json.loads(paused.saved)
        edit_arguments(history, change)
        return Paused(json.dumps(history).encode(), paused.call_id, paused.handle, paused.scope)
