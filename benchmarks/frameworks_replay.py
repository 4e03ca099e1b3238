"""Cost of one approval cycle per agent framework, beside the framework's own pause and the
plain ledger calls, and the ledger's open connections before and after many cycles.

It needs only the installed package and the framework extras (no checkout, nothing from the
repository's tests)::

    pip install 'effectledger[maf,openai-agents,langgraph,pydantic-ai,adk]'
    python benchmarks/frameworks_replay.py [--store URL] [--cycles N] [--frameworks a,b]

A cycle is what a host does for one consequential tool call. For each framework, three paths:

* ``<framework>`` (the adapter): a scripted model calls ``refund_order``; the adapter proposes it
  in the ledger and the framework pauses; the reviewer approves the digest; the host resumes
  with the grant, the adapter performs it once (one effect at the receiver) and the model gets
  its next turn. Each ledger call runs wherever the framework runs the tool: a fresh worker
  thread of its own in every run.
* ``<framework> own pause``: the same agent and model with a plain tool under the framework's
  own approval (LangChain's ``HumanInTheLoopMiddleware``, Pydantic AI's ``requires_approval``,
  the OpenAI Agents SDK's ``needs_approval``, MAF's ``approval_mode``, ADK's
  ``require_confirmation``): pause, approve in the framework, resume, the tool runs. No ledger.
* ``plain ledger calls``: ``EffectLedger.propose``, ``approve`` and ``perform`` of the same
  refund, each on a fresh thread, with no framework.

Each path runs ``--cycles`` cycles, interleaved in blocks so the machine's drift slows each
alike. It prints per cycle the p50 wall time, the mean process CPU time (every thread of the
process, which a shared machine disturbs less than wall time), the adapter's ratio to the
framework's own pause, and what the adapter costs beyond the pause and the plain calls. Then
the ledger's open connections: the store's own count and, for SQLite, this process's file
descriptors on the ledger's file (``/proc/self/fd``), before the cycles and after them. Every
performed cycle is checked: one effect per cycle at the receiver.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectledger import (
    Context,
    DestinationRef,
    EffectLedger,
    LedgerSettings,
    ManualClock,
    SimulatedReceiver,
)
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store

# The frameworks are imported lazily, after these: the SDK reads its tracing switch at import.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
# The OpenAI Agents SDK warns at every saved state that the adapter's run context is not
# serialisable (it is never meant to be saved): a thousand of those would bury the table.
logging.getLogger("openai.agents").setLevel(logging.ERROR)


ACTION = "refund_order"
AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
REVIEWER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
FRAMEWORKS = ("maf", "openai_agents", "langgraph", "pydantic_ai", "adk")
JSON = dict[str, Any]


class World:
    """One ledger, its receiver and its orders; each cycle refunds a fresh order."""

    def __init__(self, url: str, directory: Path) -> None:
        self.receiver = SimulatedReceiver(directory / "receiver.db", synchronous="NORMAL")
        self.orders = OrderBook()
        destination = DestinationRef(
            account_id=self.receiver.account_id, endpoint=self.receiver.endpoint
        )
        self.store = open_store(url)
        self.app = EffectLedger(self.store, clock=ManualClock(), settings=LedgerSettings())
        self.app.register(refund_action(orders=self.orders, destination=destination), self.receiver)
        self.next_order = 100_000

    def arguments(self) -> JSON:
        """A refund of a new order (a known resource version), so every cycle is an effect."""
        self.next_order += 1
        order_id = f"ord-{self.next_order}"
        self.orders.change("acme", order_id)
        return {"order_id": order_id, "amount_minor": 1, "currency": "EUR", "reason": "damaged"}

    def close(self) -> None:
        self.store.close()
        self.receiver.close()


def on_fresh_thread(call: Callable[[], Any]) -> Any:
    """``call()`` on a new thread, as a framework runs a tool; its answer or its error."""
    answer: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return answer[0]


def plain_cycle(world: World) -> str:
    """Propose, approve and perform one refund, each ledger call on a fresh thread."""
    arguments = world.arguments()
    operation_id = f"plain-{uuid.uuid4().hex}"
    proposal = on_fresh_thread(
        lambda: world.app.propose(AGENT, ACTION, arguments, operation_id=operation_id)
    )
    on_fresh_thread(lambda: world.app.approve(REVIEWER, proposal))
    return str(on_fresh_thread(lambda: world.app.perform(AGENT, proposal)).outcome)


def tool_json(text: Any) -> JSON:
    data: JSON = json.loads(text) if isinstance(text, str | bytes) else dict(text)
    return data


# -- Pydantic AI --------------------------------------------------------------------------------


class PydanticAI:
    """``Agent`` with a ``FunctionModel``: a deferred tool, the message history as saved state."""

    def __init__(self, world: World) -> None:
        from effectledger.callers.frameworks.pydantic_ai import ledger_tool

        self.world = world
        self.adapter = ledger_tool(world.app, ACTION)

    def _agent(self, tool: Any, arguments: Mapping[str, Any], call_id: str) -> Any:
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
            deps_type=Context,
            tools=[tool],
        )

    def _cycle(self, tool: Any, grant_of: Callable[[Any, str], Any]) -> JSON:
        from pydantic_ai import DeferredToolRequests
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

        arguments, call_id = self.world.arguments(), f"call-{uuid.uuid4().hex[:12]}"
        agent = self._agent(tool, arguments, call_id)
        paused = asyncio.run(agent.run("refund", deps=AGENT))
        requests = paused.output
        assert isinstance(requests, DeferredToolRequests), requests
        saved = ModelMessagesTypeAdapter.dump_json(paused.all_messages())
        results = grant_of(requests, call_id)
        history = ModelMessagesTypeAdapter.validate_json(saved)
        out = asyncio.run(
            agent.run(message_history=history, deferred_tool_results=results, deps=AGENT)
        )
        (part,) = [p for m in out.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
        return tool_json(part.content)

    def adapter_cycle(self) -> str:
        from effectledger.callers.frameworks.pydantic_ai import approved

        def grant(requests: Any, call_id: str) -> Any:
            shown = requests.metadata[call_id]  # the reviewer approves the digest shown
            self.world.app.approve(REVIEWER, shown["proposal_id"], digest=shown["digest"])
            return approved(requests)

        return str(self._cycle(self.adapter, grant)["outcome"])

    @functools.cached_property
    def own_tool(self) -> Any:
        """The plain tool under Pydantic AI's own approval, built once as a host builds it."""
        from pydantic_ai import Tool

        def refund_order(order_id: str, amount_minor: int, currency: str, reason: str) -> str:
            """Refund an order."""
            return json.dumps({"outcome": "performed"})

        return Tool(refund_order, name=ACTION, requires_approval=True)

    def own_cycle(self) -> str:
        from pydantic_ai import DeferredToolResults

        return str(
            self._cycle(
                self.own_tool,
                lambda requests, call_id: DeferredToolResults(approvals={call_id: True}),
            )["outcome"]
        )


# -- LangGraph ----------------------------------------------------------------------------------


@dataclass
class Host:
    """What a LangGraph host gives a run as ``context=``: its identity and this resume's grants
    by tool-call id (the adapter reads ``.context`` and ``.grants``)."""

    context: Context
    grants: dict[str, Any] = field(default_factory=dict)


class LangGraph:
    """``create_agent`` with a fake chat model and an ``InMemorySaver``: one thread per cycle."""

    def __init__(self, world: World) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from effectledger.callers.frameworks.langgraph import ledger_middleware

        self.world = world
        self.adapter = ledger_middleware(world.app, ACTION)
        self.saver = InMemorySaver()
        self.threads = 0

    def _agent(self, arguments: Mapping[str, Any], call_id: str, **options: Any) -> Any:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
        from langchain_core.messages import AIMessage

        class Model(FakeMessagesListChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
                return self

        call = {"name": ACTION, "args": dict(arguments), "id": call_id}
        responses = [AIMessage(content="", tool_calls=[call]), *[AIMessage(content="done")] * 3]
        return create_agent(Model(responses=responses), checkpointer=self.saver, **options)

    def _cycle(
        self, options: Mapping[str, Any], resume: Callable[[Any, Host], Any], host: Host
    ) -> JSON:
        self.threads += 1
        config = {"configurable": {"thread_id": f"thread-{self.threads}"}}
        arguments, call_id = self.world.arguments(), f"call-{uuid.uuid4().hex[:12]}"
        agent = self._agent(arguments, call_id, **options)
        start = {"messages": [{"role": "user", "content": "refund"}]}
        paused = agent.invoke(start, config, context=host, version="v2")
        (interrupt,) = paused.interrupts
        out = agent.invoke(resume(interrupt, host), config, context=host, version="v2")
        (message,) = [m for m in out.value["messages"] if m.type == "tool"][-1:]
        return tool_json(message.content)

    def adapter_cycle(self) -> str:
        def resume(interrupt: Any, host: Host) -> Any:
            proposal = self.adapter.proposal(AGENT, interrupt)
            self.world.app.approve(REVIEWER, proposal)
            host.grants = dict.fromkeys(self.adapter.proposals(AGENT, interrupt), proposal)
            return self.adapter.resume({interrupt.id: [{"type": "approve"}]})

        middleware = {"middleware": [self.adapter.middleware]}
        return str(self._cycle(middleware, resume, Host(AGENT))["outcome"])

    @functools.cached_property
    def own_options(self) -> dict[str, Any]:
        """The plain tool and LangChain's own review middleware, built once as a host builds
        them."""
        from langchain.agents.middleware import HumanInTheLoopMiddleware
        from langchain_core.tools import tool

        @tool(ACTION)
        def refund_order(order_id: str, amount_minor: int, currency: str, reason: str) -> str:
            """Refund an order."""
            return json.dumps({"outcome": "performed"})

        return {
            "tools": [refund_order],
            "middleware": [HumanInTheLoopMiddleware(interrupt_on={ACTION: True})],
        }

    def own_cycle(self) -> str:
        from langgraph.types import Command

        return str(
            self._cycle(
                self.own_options,
                lambda i, host: Command(resume={i.id: {"decisions": [{"type": "approve"}]}}),
                Host(AGENT),
            )["outcome"]
        )


# -- OpenAI Agents SDK --------------------------------------------------------------------------


class OpenAIAgents:
    """``Runner.run`` with ``agents.testing.ScriptedModel``; ``RunState.to_string()`` is saved."""

    def __init__(self, world: World) -> None:
        from effectledger.callers.frameworks.openai_agents import ledger_tool

        self.world = world
        self.adapter = ledger_tool(world.app, ACTION)

    def _agent(self, tool: Any, arguments: Mapping[str, Any] | None, call_id: str) -> Any:
        from agents import Agent
        from agents.testing import ScriptedModel, assistant_message, function_call

        turns: list[Any] = [[assistant_message("done")]] * 3
        if arguments is not None:
            turns = [[function_call(ACTION, dict(arguments), call_id=call_id)], *turns]
        return Agent(name="refunds", model=ScriptedModel(turns), tools=[tool])

    def _output(self, result: Any) -> JSON:
        (output,) = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
        return tool_json(output)

    def adapter_cycle(self) -> str:
        from agents import Runner

        arguments, call_id = self.world.arguments(), f"call-{uuid.uuid4().hex[:12]}"
        scope = f"conversation-{uuid.uuid4().hex[:12]}"
        agent = self._agent(self.adapter.tool, arguments, call_id)
        paused = asyncio.run(Runner.run(agent, "refund", context=self.adapter.host(AGENT)))
        (item,) = paused.interruptions
        saved = paused.to_state().to_string()
        proposal = self.adapter.propose_item(AGENT, item, scope=scope)
        self.world.app.approve(REVIEWER, proposal)
        again = self._agent(self.adapter.tool, None, call_id)
        resumed = self.adapter.resume(again, saved, AGENT, {call_id: proposal}, scope=scope)
        return str(self._output(asyncio.run(resumed))["outcome"])

    @functools.cached_property
    def own_tool(self) -> Any:
        """The plain tool under the SDK's own approval, built once as a host builds it."""
        from agents import function_tool

        @function_tool(name_override=ACTION, needs_approval=True, strict_mode=False)
        def refund_order(order_id: str, amount_minor: int, currency: str, reason: str) -> str:
            """Refund an order."""
            return json.dumps({"outcome": "performed"})

        return refund_order

    def own_cycle(self) -> str:
        from agents import Runner, RunState

        refund_order = self.own_tool
        arguments, call_id = self.world.arguments(), f"call-{uuid.uuid4().hex[:12]}"
        paused = asyncio.run(Runner.run(self._agent(refund_order, arguments, call_id), "refund"))
        saved = paused.to_state().to_string()
        again = self._agent(refund_order, None, call_id)
        state = asyncio.run(RunState.from_string(again, saved))
        for item in state.get_interruptions():
            state.approve(item)
        return str(self._output(asyncio.run(Runner.run(again, state)))["outcome"])


# -- Microsoft Agent Framework ------------------------------------------------------------------


class MAF:
    """``Agent`` with a scripted ``BaseChatClient``; the session dict is the saved state."""

    def __init__(self, world: World) -> None:
        from effectledger.callers.frameworks.maf import ledger_tool

        self.world = world
        self.adapter = ledger_tool(world.app, ACTION)

    def _agent(self, tools: list[Any], middleware: list[Any], arguments: JSON, call_id: str) -> Any:
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
                call = Content.from_function_call(call_id=call_id, name=ACTION, arguments=arguments)
                return ChatResponse(messages=[Message("assistant", [call])])

            def _inner_get_response(
                self, *, messages: Any, stream: Any, options: Any, **kw: Any
            ) -> Any:
                return self._answer(messages)

        return Agent(client=Scripted(), name="refunds", tools=tools, middleware=middleware)

    def _cycle(
        self,
        tools: list[Any],
        middleware: list[Any],
        kwargs_of: Callable[[Any, Any], JSON],
        first: JSON | None = None,
    ) -> JSON:
        from agent_framework import AgentSession, Message

        arguments, call_id = self.world.arguments(), f"call-{uuid.uuid4().hex[:12]}"
        agent = self._agent(tools, middleware, arguments, call_id)
        session = agent.create_session()
        response = asyncio.run(
            agent.run("refund", session=session, function_invocation_kwargs=first or {})
        )
        (request,) = response.user_input_requests
        saved = json.dumps(session.to_dict(), default=str)
        kwargs = kwargs_of(request, session)
        again = self._agent(tools, middleware, {}, call_id)
        restored = AgentSession.from_dict(json.loads(saved))
        answer = request.to_function_approval_response(True)
        out = asyncio.run(
            again.run(
                Message("user", [answer]), session=restored, function_invocation_kwargs=kwargs
            )
        )
        (result,) = [c for m in out.messages for c in m.contents if c.type == "function_result"]
        return tool_json(result.result)

    def adapter_cycle(self) -> str:
        from effectledger.callers.frameworks.maf import LEDGER_KEY

        def kwargs_of(request: Any, session: Any) -> JSON:
            shown = request.additional_properties[LEDGER_KEY]  # proposed at the pause
            self.world.app.approve(REVIEWER, shown["proposal_id"], digest=shown["digest"])
            return self.adapter.invocation(AGENT)  # the grant rides in the approval response

        tools = [self.adapter.tool]
        middleware = [self.adapter.pause_middleware, self.adapter.middleware]
        return str(
            self._cycle(tools, middleware, kwargs_of, self.adapter.invocation(AGENT))["outcome"]
        )

    @functools.cached_property
    def own_tool(self) -> Any:
        """The plain tool under MAF's own approval mode, built once as a host builds it."""
        from agent_framework import tool

        @tool(name=ACTION, approval_mode="always_require")
        def refund_order(order_id: str, amount_minor: int, currency: str, reason: str) -> str:
            """Refund an order."""
            return json.dumps({"outcome": "performed"})

        return refund_order

    def own_cycle(self) -> str:
        return str(self._cycle([self.own_tool], [], lambda request, session: {})["outcome"])


# -- Google ADK ---------------------------------------------------------------------------------


class ADK:
    """``Runner`` with a scripted ``BaseLlm`` and an ``InMemorySessionService``: one session per
    cycle, the pause answered with ADK's confirmation response in the same session."""

    app_name, user_id = "refunds", "customer-1"

    def __init__(self, world: World) -> None:
        from effectledger.callers.frameworks.adk import ledger_tool

        self.world = world
        self.adapter = ledger_tool(world.app, ACTION)

    def _model(self, arguments: Mapping[str, Any], call_id: str) -> Any:
        from google.adk.models.base_llm import BaseLlm
        from google.adk.models.llm_response import LlmResponse
        from google.genai import types

        call = types.FunctionCall(id=call_id, name=ACTION, args=dict(arguments))
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=0, candidates_token_count=0, total_token_count=0
        )

        class Scripted(BaseLlm):
            model: str = "scripted"

            async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
                last = llm_request.contents[-1].parts if llm_request.contents else []
                if any(p.function_response for p in last):
                    parts = [types.Part(text="done")]
                else:
                    parts = [types.Part(function_call=call)]
                content = types.Content(role="model", parts=parts)
                yield LlmResponse(content=content, usage_metadata=usage)

        return Scripted()

    def _cycle(self, tool: Any, answer: Callable[[Any], Any]) -> JSON:
        from google.adk.agents import LlmAgent
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.genai import types

        from effectledger.callers.frameworks.adk import acting_as

        arguments, call_id = self.world.arguments(), f"call-{uuid.uuid4().hex[:12]}"
        agent = LlmAgent(name="refunds", model=self._model(arguments, call_id), tools=[tool])

        async def go() -> JSON:
            service = InMemorySessionService()
            session = await service.create_session(app_name=self.app_name, user_id=self.user_id)
            runner = Runner(app_name=self.app_name, agent=agent, session_service=service)
            ask = types.Content(role="user", parts=[types.Part(text="refund")])
            where = {"user_id": self.user_id, "session_id": session.id}
            with acting_as(AGENT):
                paused = [e async for e in runner.run_async(**where, new_message=ask)]
                reply = answer(paused)
                done = [e async for e in runner.run_async(**where, new_message=reply)]
            (result,) = [
                p.function_response.response
                for e in done
                for p in (e.content.parts if e.content else [])
                if p.function_response and p.function_response.name == ACTION
            ]
            return dict(result or {})

        return asyncio.run(go())

    def adapter_cycle(self) -> str:
        from effectledger.callers.frameworks.adk import approve, confirmation_requests, reply

        def answer(paused: list[Any]) -> Any:
            (request,) = confirmation_requests(paused)
            grant = request.grant
            assert grant is not None
            self.world.app.approve(REVIEWER, grant.proposal_id, digest=grant.digest)
            return reply(approve(request))

        return str(self._cycle(self.adapter.tool, answer)["outcome"])

    @functools.cached_property
    def own_tool(self) -> Any:
        """The plain tool under ADK's own confirmation, built once as a host builds it."""
        from google.adk.tools import FunctionTool

        def refund_order(order_id: str, amount_minor: int, currency: str, reason: str) -> dict:
            """Refund an order."""
            return {"outcome": "performed"}

        return FunctionTool(refund_order, require_confirmation=True)

    def own_cycle(self) -> str:
        from google.genai import types

        def answer(paused: list[Any]) -> Any:
            (call,) = [
                c for e in paused for c in e.get_function_calls()
                if c.name == "adk_request_confirmation"
            ]  # fmt: skip
            response = types.FunctionResponse(
                id=call.id, name="adk_request_confirmation", response={"confirmed": True}
            )
            return types.Content(role="user", parts=[types.Part(function_response=response)])

        return str(self._cycle(self.own_tool, answer)["outcome"])


DRIVERS: dict[str, Callable[[World], Any]] = {
    "maf": MAF,
    "openai_agents": OpenAIAgents,
    "langgraph": LangGraph,
    "pydantic_ai": PydanticAI,
    "adk": ADK,
}


# -- counting connections -----------------------------------------------------------------------


def ledger_fds(path: Path | None) -> tuple[int, int]:
    """This process's open file descriptors on the ledger's file and on its WAL."""
    if path is None or not os.path.isdir("/proc/self/fd"):
        return (-1, -1)
    main = wal = 0
    target = str(path.resolve())
    for fd in os.listdir("/proc/self/fd"):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        main += name == target
        wal += name == f"{target}-wal"
    return (main, wal)


def store_connections(store: Any) -> int:
    """The store's own count of the connections it holds open."""
    counted = getattr(store, "open_connections", None)
    if counted is not None:
        return int(counted())
    return len(getattr(store, "_connections", ()))  # a store from before it could count


def connections(world: World, path: Path | None) -> str:
    main, wal = ledger_fds(path)
    text = f"store: {store_connections(world.store):>4}"
    if path is not None:
        text += f"   fds on the file: {main:>4}   on its WAL: {wal:>4}"
    return text


# -- measuring ----------------------------------------------------------------------------------


Samples = dict[str, list[tuple[float, float]]]


def measure(call: Callable[[], str], samples: Samples, name: str) -> str:
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = call()
    samples.setdefault(name, []).append((time.perf_counter() - wall, time.process_time() - cpu))
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--store", help="ledger URL (default: a fresh SQLite file)")
    parser.add_argument("--cycles", type=int, default=1000, help="cycles per path")
    parser.add_argument("--block", type=int, default=25, help="cycles of one path in a row")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    options = parser.parse_args()
    chosen = [name for name in options.frameworks.split(",") if name]
    unknown = sorted(set(chosen) - set(FRAMEWORKS))
    if unknown:
        parser.error(f"unknown frameworks {unknown}; choose from {', '.join(FRAMEWORKS)}")
    directory = Path(tempfile.mkdtemp(prefix="el-frameworks-bench-"))
    url = options.store or f"sqlite:///{directory / 'ledger.db'}"
    path = directory / "ledger.db" if options.store is None else None
    world = World(url, directory)
    drivers = {name: DRIVERS[name](world) for name in chosen}
    paths: dict[str, Callable[[], str]] = {}
    for name, driver in drivers.items():
        paths[name] = driver.adapter_cycle
        paths[f"{name} own pause"] = driver.own_cycle
    paths["plain ledger calls"] = lambda: plain_cycle(world)
    samples: Samples = {}
    performed = 0
    try:
        for name, cycle in paths.items():  # one warm-up cycle each: imports, first connection
            assert cycle() == "performed", name
            performed += not name.endswith("own pause")
        before = connections(world, path)
        for start in range(0, options.cycles, options.block):
            for name, cycle in paths.items():
                for _ in range(min(options.block, options.cycles - start)):
                    outcome = measure(cycle, samples, name)
                    assert outcome == "performed", (name, outcome)
                    performed += not name.endswith("own pause")
            print(f"  {start + options.block} cycles", file=sys.stderr, flush=True)
        after = connections(world, path)
        effects = world.receiver.counts().effects
        assert effects == performed, (effects, performed)
    finally:
        world.close()
    print(
        f"store: {url.split(':', 1)[0]}   {options.cycles} cycles per path, in blocks of "
        f"{options.block}; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'path':<28}{'wall p50 ms':>12}{'CPU ms':>9}{'x own pause':>13}{'beyond ms':>11}")
    plain_cpu = statistics.fmean(cpu for _, cpu in samples["plain ledger calls"]) * 1e3
    for name, values in samples.items():
        p50 = statistics.median(wall for wall, _ in values) * 1e3
        cpu = statistics.fmean(cpu for _, cpu in values) * 1e3
        ratio = beyond = ""
        if name in drivers:
            own = samples[f"{name} own pause"]
            own_p50 = statistics.median(wall for wall, _ in own) * 1e3
            own_cpu = statistics.fmean(c for _, c in own) * 1e3
            ratio = f"{p50 / own_p50:.2f} / {cpu / own_cpu:.2f}"
            beyond = f"{cpu - own_cpu - plain_cpu:.1f}"
        print(f"{name:<28}{p50:>12.1f}{cpu:>9.1f}{ratio:>13}{beyond:>11}")
    print("x own pause: wall p50 / CPU; beyond: the adapter's CPU less the own pause's and the")
    print("plain ledger calls' (what the adapter adds to the framework and the ledger)")
    print(f"open connections before: {before}")
    print(f"open connections after:  {after}")
    print(f"effects at the receiver: {effects} (one per performed cycle)")


if __name__ == "__main__":
    main()
