"""One driver per framework: pause a scripted model's refund call, save the state, resume it.

Each driver runs the framework's own agent loop offline (its scripted or test model), keeps the
state a host would store at the pause (a MAF session, an OpenAI Agents ``RunState`` string, a
LangGraph checkpoint, a Pydantic AI message history) and resumes it as a host would, with the
identity and grant the test gives. ``edited`` returns the saved state with the refund's amount
changed wherever the framework keeps it, its own integrity data included; ``edit`` applies any
change to the refund's arguments there (a smuggled field, a value of the wrong type).

The identity a driver is given is the ledger's ``Context`` or an application's own context
object; a driver built with ``context_of=`` hands that reader to its adapter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from effectledger import AdmissionDenied, Context, EffectLedger, EffectLedgerError, Proposal
from effectledger.callers.frameworks.gate import Grant

JSON = dict[str, Any]
ACTION = "refund_order"
Edit = Callable[[dict[str, Any]], None]
"""A change to a refund's arguments, made in place."""


def _adapter_options(context_of: Any) -> dict[str, Any]:
    return {} if context_of is None else {"context_of": context_of}


class Answered(Exception):
    """The tool answered without pausing (a refusal the model reads): its JSON."""

    def __init__(self, answer: JSON) -> None:
        super().__init__(answer)
        self.answer = answer


@dataclass
class Paused:
    """What a host keeps at the pause: the saved state, the call id, its handle to resume and
    the conversation the call belongs to (every pause starts a new one)."""

    saved: Any
    call_id: str
    handle: Any = None
    scope: str = ""


class Driver(Protocol):
    """Pause a call of ``refund_order`` and resume the saved state."""

    name: str

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused: ...

    def propose(self, context: Context, paused: Paused) -> Proposal: ...

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON: ...

    def edited(self, paused: Paused, amount: int) -> Paused: ...

    def edit(self, paused: Paused, change: Edit) -> Paused: ...


def last_tool_message(state: Mapping[str, Any]) -> Any:
    """The last tool message of a LangGraph state."""
    return [m for m in state["messages"] if m.type == "tool"][-1]


def tool_json(text: str) -> JSON:
    """The JSON a ledger tool answered."""
    data: JSON = json.loads(text)
    return data


# -- Microsoft Agent Framework -----------------------------------------------------------------


class MAFDriver:
    """``Agent`` with a scripted ``BaseChatClient``; the session dict is the saved state."""

    name = "maf"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.maf import ledger_tool

        self.adapter = ledger_tool(app, ACTION, **_adapter_options(context_of))

    def _agent(self, arguments: Mapping[str, Any], call_id: str) -> Any:
        from agent_framework import (
            Agent,
            BaseChatClient,
            ChatMiddlewareLayer,
            ChatResponse,
            Content,
            FunctionInvocationLayer,
            Message,
        )

        class Scripted(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
            async def _answer(self, messages: Any) -> Any:
                if any(c.type == "function_result" for m in messages for c in m.contents):
                    return ChatResponse(messages=[Message("assistant", ["done"])])
                call = Content.from_function_call(
                    call_id=call_id, name=ACTION, arguments=dict(arguments)
                )
                return ChatResponse(messages=[Message("assistant", [call])])

            def _inner_get_response(
                self, *, messages: Any, stream: Any, options: Any, **kw: Any
            ) -> Any:
                return self._answer(messages)

        return Agent(
            client=Scripted(),
            name="refunds",
            tools=[self.adapter.tool],
            middleware=[self.adapter.middleware],
        )

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        agent = self._agent(arguments, call_id)
        session = agent.create_session()
        response = asyncio.run(agent.run("refund", session=session))
        (request,) = response.user_input_requests
        saved = json.dumps(session.to_dict(), default=str)
        return Paused(saved, request.function_call.call_id, request, session.session_id)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.adapter.propose_request(context, paused.handle, session=paused.scope)

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        from agent_framework import AgentSession, Message

        agent = self._agent({}, paused.call_id)
        session = AgentSession.from_dict(json.loads(paused.saved))
        kwargs: dict[str, Any] = {}
        if context is not None:
            kwargs = self.adapter.resume(context, {} if grant is None else {paused.call_id: grant})
        answer = paused.handle.to_function_approval_response(True)
        response = asyncio.run(
            agent.run(Message("user", [answer]), session=session, function_invocation_kwargs=kwargs)
        )
        (result,) = [
            c for m in response.messages for c in m.contents if c.type == "function_result"
        ]
        return tool_json(result.result)

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, _amount(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        state = json.loads(paused.saved)
        _edit_arguments(state, change)
        return Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)


# -- OpenAI Agents SDK --------------------------------------------------------------------------


class OpenAIAgentsDriver:
    """``Runner.run`` with ``agents.testing.ScriptedModel``; ``RunState.to_string()`` is saved."""

    name = "openai_agents"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.openai_agents import ledger_tool

        self.adapter = ledger_tool(app, ACTION, **_adapter_options(context_of))
        self.conversations = 0

    def _agent(self, arguments: Mapping[str, Any] | None, call_id: str) -> Any:
        from agents import Agent
        from agents.testing import ScriptedModel, assistant_message, function_call

        turns: list[Any] = [[assistant_message("done")]] * 4
        if arguments is not None:
            turns = [[function_call(ACTION, dict(arguments), call_id=call_id)], *turns]
        return Agent(name="refunds", model=ScriptedModel(turns), tools=[self.adapter.tool])

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        from agents import Runner

        agent = self._agent(arguments, call_id)
        # a bare Context runs as the adapter's HostRun; an application's context as itself
        run_context = self.adapter.host(context) if isinstance(context, Context) else context
        result = asyncio.run(Runner.run(agent, "refund", context=run_context))
        (item,) = result.interruptions
        self.conversations += 1
        scope = f"conversation-{self.conversations}"
        return Paused(result.to_state().to_string(), str(item.call_id), item, scope)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.adapter.propose_item(context, paused.handle, scope=paused.scope)

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        from agents import Runner, RunState

        agent = self._agent(None, paused.call_id)
        if context is None:  # what a host that forgets context_override does
            state = asyncio.run(RunState.from_string(agent, paused.saved))
            for item in state.get_interruptions():
                state.approve(item)
            result = asyncio.run(Runner.run(agent, state))
        else:
            grants = {} if grant is None else {paused.call_id: grant}
            result = asyncio.run(
                self.adapter.resume(agent, paused.saved, context, grants, scope=paused.scope)
            )
        (output,) = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
        return tool_json(output)

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, _amount(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        state = json.loads(paused.saved)
        _edit_arguments(state, change)
        # the SDK's fingerprint is an unkeyed hash of public fields: an editor drops it
        state["context"]["tool_invocations"] = {}
        return Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)


# -- LangGraph ----------------------------------------------------------------------------------


@dataclass
class LangGraphHost:
    """What a host gives a LangGraph run as ``context=``: its identity, the grants of this
    resume by tool-call id and the reviewer who decided (an application's own object)."""

    context: Context | None
    grants: dict[str, Grant | Proposal] = field(default_factory=dict)
    reviewer: Context | None = None


APPROVE = {"type": "approve"}


class LangGraphDriver:
    """``create_agent`` with a fake chat model and an ``InMemorySaver``; the checkpoint is saved.

    The pause is LangChain's human-in-the-loop request; every resume answers it ``approve``
    and gives the grant in the run's context."""

    name = "langgraph"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from effectledger.callers.frameworks.langgraph import ledger_middleware

        self.adapter = ledger_middleware(app, ACTION, **_adapter_options(context_of))
        self.saver = InMemorySaver()
        self.threads = 0

    def _agent(self, calls: list[dict[str, Any]] | None) -> Any:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
        from langchain_core.messages import AIMessage

        class Model(FakeMessagesListChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
                return self

        responses: list[Any] = [AIMessage(content="done")] * 4
        if calls is not None:
            responses = [AIMessage(content="", tool_calls=calls), *responses]
        return create_agent(
            Model(responses=responses),
            checkpointer=self.saver,
            middleware=[self.adapter.middleware],
        )

    def pause_calls(self, context: Any, calls: list[dict[str, Any]]) -> Paused:
        """One model turn making ``calls``, paused for review in a thread of its own."""
        self.threads += 1
        config = {"configurable": {"thread_id": f"thread-{self.threads}"}}
        agent = self._agent(calls)
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "refund"}]},
            config,
            context=context,
            version="v2",
        )
        if not result.interrupts:  # the middleware answered without pausing
            raise Answered(tool_json(last_tool_message(result.value).content))
        (interrupt,) = result.interrupts
        saved = agent.get_state(config).config
        return Paused(saved, str(calls[0]["id"]), interrupt, f"thread-{self.threads}")

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        return self.pause_calls(context, [{"name": ACTION, "args": dict(arguments), "id": call_id}])

    def propose(self, context: Context, paused: Paused) -> Proposal:
        return self.adapter.proposal(context, paused.handle)

    def decide(self, paused: Paused, host: LangGraphHost, *decisions: Mapping[str, Any]) -> Any:
        """Resume the saved checkpoint with ``decisions``, ``host`` as the run's context; the
        graph's final state."""
        command = self.adapter.resume({paused.handle.id: list(decisions)})
        return self._agent(None).invoke(command, paused.saved, context=host, version="v2").value

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        host = LangGraphHost(context, {} if grant is None else {paused.call_id: grant})
        return tool_json(last_tool_message(self.decide(paused, host, APPROVE)).content)

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, _amount(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        """The checkpoint store edited in place: channel blobs and pending writes (Send packets)."""
        saver = self.saver
        for key, (kind, blob) in list(saver.blobs.items()):
            if kind != "empty":
                value = saver.serde.loads_typed((kind, blob))
                if _edit_arguments(value, change):
                    saver.blobs[key] = saver.serde.dumps_typed(value)
        for inner in saver.writes.values():
            for k, (task_id, channel, typed, path) in list(inner.items()):
                value = saver.serde.loads_typed(typed)
                if _edit_arguments(value, change):
                    inner[k] = (task_id, channel, saver.serde.dumps_typed(value), path)
        return paused


# -- Pydantic AI --------------------------------------------------------------------------------


class PydanticAIDriver:
    """``Agent`` with a ``FunctionModel``; the message history as JSON is the saved state."""

    name = "pydantic_ai"

    def __init__(self, app: EffectLedger, context_of: Any = None) -> None:
        from effectledger.callers.frameworks.pydantic_ai import ledger_tool

        self.tool = ledger_tool(app, ACTION, **_adapter_options(context_of))
        self.proposals: dict[str, Proposal] = {}
        self.app = app

    def _agent(self, arguments: Mapping[str, Any], call_id: str) -> Any:
        from pydantic_ai import Agent, DeferredToolRequests
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        def model(messages: Any, info: AgentInfo) -> ModelResponse:
            if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(
                parts=[ToolCallPart(ACTION, dict(arguments), tool_call_id=call_id)]
            )

        return Agent(
            FunctionModel(model),
            output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
            deps_type=object,  # a Context, or an application's own deps carrying one
            tools=[self.tool],
        )

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        from pydantic_ai import DeferredToolRequests
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

        # ``asyncio.run``, not ``run_sync``: that one leaves a thread's event loop open
        result = asyncio.run(self._agent(arguments, call_id).run("refund", deps=context))
        requests = result.output
        if not isinstance(requests, DeferredToolRequests):  # the tool answered at once
            (part,) = [
                p for m in result.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)
            ]
            raise Answered(tool_json(part.content))
        saved = ModelMessagesTypeAdapter.dump_json(result.all_messages())
        return Paused(saved, call_id, requests, result.conversation_id)

    def propose(self, context: Context, paused: Paused) -> Proposal:
        # the tool proposed at the pause, as ``deps``; its grant is the request's metadata
        grant = paused.handle.metadata[paused.call_id]
        return self.app.proposal(context, grant["proposal_id"])

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON:
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

        from effectledger.callers.frameworks.pydantic_ai import approved

        results = approved({} if grant is None else {paused.call_id: grant})
        if grant is None:
            results.approvals[paused.call_id] = True
        history = ModelMessagesTypeAdapter.validate_json(paused.saved)
        out = asyncio.run(
            self._agent({}, paused.call_id).run(
                message_history=history, deferred_tool_results=results, deps=context
            )
        )
        (part,) = [p for m in out.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
        return tool_json(part.content)

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, _amount(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        history = json.loads(paused.saved)
        _edit_arguments(history, change)
        return Paused(json.dumps(history).encode(), paused.call_id, paused.handle, paused.scope)


# -- Google ADK ---------------------------------------------------------------------------------


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

        self.adapter = ledger_tool(app, ACTION, **_adapter_options(context_of))
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

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused:
        from google.genai import types

        from effectledger.callers.frameworks.adk import confirmation_requests

        call = types.FunctionCall(id=call_id, name=ACTION, args=dict(arguments))
        message = types.Content(role="user", parts=[types.Part(text="refund")])
        events, saved = self.run([call], None, message, context)
        requests = confirmation_requests(events)
        if not requests:  # the tool answered at once
            raise Answered(_tool_answer(events))
        (request,) = requests
        return Paused(saved, call_id, request, json.loads(saved)["id"])

    def propose(self, context: Context, paused: Paused) -> Proposal:
        # the tool proposed at the pause, as the host; the pause carries its grant
        return self.app.proposal(context, paused.handle.grant.proposal_id)

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
        return _tool_answer(events)

    def edited(self, paused: Paused, amount: int) -> Paused:
        return self.edit(paused, _amount(amount))

    def edit(self, paused: Paused, change: Edit) -> Paused:
        """The saved session edited: the call's arguments in its events and confirmation."""
        state = json.loads(paused.saved)
        _edit_arguments(state, change)
        return Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)


def _tool_answer(events: list[Any]) -> JSON:
    """The ledger tool's last answer among ADK ``events``."""
    answers = [
        dict(p.function_response.response)
        for e in events
        for p in (e.content.parts if e.content else [])
        if p.function_response and p.function_response.name == ACTION
    ]
    return answers[-1]


DRIVERS = {
    driver.name: driver
    for driver in (MAFDriver, OpenAIAgentsDriver, LangGraphDriver, PydanticAIDriver, ADKDriver)
}
FRAMEWORKS = tuple(DRIVERS)


def _amount(amount: int) -> Edit:
    """The edit that sets the refund's amount."""

    def change(arguments: dict[str, Any]) -> None:
        arguments["amount_minor"] = amount

    return change


def _edit_arguments(value: Any, change: Edit, seen: dict[int, Any] | None = None) -> bool:
    """Apply ``change`` to every refund's arguments (a dict with ``order_id`` and
    ``amount_minor``) wherever they sit, in JSON text too."""
    seen = {} if seen is None else seen
    if id(value) in seen:
        return False
    seen[id(value)] = value  # held, so that no id is reused while the walk lasts
    hit = False
    if isinstance(value, dict):
        if "amount_minor" in value and "order_id" in value:
            change(value)
            return True
        for key, item in list(value.items()):
            if isinstance(item, str) and '"amount_minor"' in item:
                try:
                    inner = json.loads(item)
                except ValueError:
                    continue
                if _edit_arguments(inner, change, seen):
                    value[key] = json.dumps(inner)
                    hit = True
            else:
                hit |= _edit_arguments(item, change, seen)
    elif isinstance(value, list | tuple):
        for item in value:
            hit |= _edit_arguments(item, change, seen)
    elif hasattr(value, "__dict__") or hasattr(type(value), "__slots__"):
        attributes = list(getattr(value, "__dict__", {}).values())
        attributes += [getattr(value, a, None) for a in getattr(type(value), "__slots__", ())]
        for item in attributes:
            hit |= _edit_arguments(item, change, seen)
    return hit
