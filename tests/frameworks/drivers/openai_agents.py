"""OpenAI Agents SDK: ``Runner.run`` with ``agents.testing.ScriptedModel``; the saved state is
``RunState.to_string()`` and each pause is a conversation the host names."""

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


class OpenAIAgentsDriver:
    """``Runner.run`` with ``agents.testing.ScriptedModel``; ``RunState.to_string()`` is saved."""

    name = "openai_agents"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.openai_agents import ledger_tool

        self.adapter = ledger_tool(app, ACTION, **adapter_options(context_of))
        self.conversations = 0
        self.models: list[Any] = []

    @property
    def shown(self) -> list[str]:
        """The tool outputs the scripted models were given, in order (each call's input holds
        the conversation so far: an output shows up once per later turn)."""
        return [
            str(item.get("output"))
            for model in self.models
            for call in model.calls
            for item in (call.input if isinstance(call.input, list) else [])
            if isinstance(item, Mapping) and item.get("type") == "function_call_output"
        ]

    def _agent(self, calls: Sequence[Call]) -> Any:
        from agents import Agent
        from agents.testing import ScriptedModel, assistant_message, function_call

        turns: list[Any] = [[assistant_message("done")]] * 4
        if calls:
            made = [function_call(ACTION, dict(args), call_id=call_id) for call_id, args in calls]
            turns = [made, *turns]
        model = ScriptedModel(turns)
        self.models.append(model)
        return Agent(name="refunds", model=model, tools=[self.adapter.tool])

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        paused = self.pause_batch(context, [(call_id, arguments)])
        (item,) = paused.handle
        return Paused(paused.saved, paused.call_id, item, paused.scope)

    def pause_batch(self, context: Any, calls: Sequence[Call]) -> Paused:
        from agents import Runner

        # a bare Context runs as the adapter's HostRun; an application's context as itself
        run_context = self.adapter.host(context) if isinstance(context, Context) else context
        result = asyncio.run(Runner.run(self._agent(calls), "refund", context=run_context))
        items = list(result.interruptions)
        self.conversations += 1
        scope = f"conversation-{self.conversations}"
        return Paused(result.to_state().to_string(), str(items[0].call_id), items, scope)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.adapter.propose_item(context, paused.handle, scope=paused.scope)

    def propose_batch(self, context: Context, paused: Paused) -> dict[str, Proposal]:
        return {
            str(item.call_id): self.adapter.propose_item(context, item, scope=paused.scope)
            for item in paused.handle
        }

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        from agents import Runner, RunState

        agent = self._agent([])
        if context is None:  # what a host that forgets context_override does
            state = asyncio.run(RunState.from_string(agent, paused.saved))
            for item in state.get_interruptions():
                state.approve(item)
            result = asyncio.run(Runner.run(agent, state))
            (output,) = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
            return tool_json(output)
        grants = {} if grant is None else {paused.call_id: grant}
        return tool_json(self._resume(paused, context, grants, {})[paused.call_id])

    def resume_batch(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        reviewer: Context | None = None,
    ) -> dict[str, JSON]:
        outputs = self._resume(paused, context, grants, rejected)
        return {call_id: answer_of(output) for call_id, output in outputs.items()}

    def _resume(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
    ) -> dict[str, str]:
        resumed = self.adapter.resume(
            self._agent([]), paused.saved, context, dict(grants), scope=paused.scope,
            rejected=rejected,
        )  # fmt: skip
        result = asyncio.run(resumed)
        return {
            str(_call_id(item.raw_item)): str(item.output)
            for item in result.new_items
            if item.type == "tool_call_output_item"
        }

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, amount_edit(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        state = json.loads(paused.saved)
        edit_arguments(state, change)
        # the SDK's fingerprint is an unkeyed hash of public fields: an editor drops it
        state["context"]["tool_invocations"] = {}
        return Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)


def _call_id(raw_item: Any) -> Any:
    """The call id a tool output answers (its raw item is a mapping or a model)."""
    return raw_item.get("call_id") if isinstance(raw_item, Mapping) else raw_item.call_id
