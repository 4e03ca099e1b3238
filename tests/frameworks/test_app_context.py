"""An application's own context object is the run context; the ledger's identity is read from it.

Through each framework's own loop (MAF, OpenAI Agents, Pydantic AI), on both backends: an
application's dataclass carrying the ledger's ``Context`` (in a ``ledger_context`` field, or
where a ``context_of=`` reader finds it) pauses, is approved and performs once; the same
application object without an identity is refused (``not_authenticated``) with nothing
written, on the proposal and on the resume. The identity still comes from the host on every
resume: an OpenAI Agents state saved with the identity in its context and restored without the
host's context performs nothing. The adapters' own ``HostRun`` still works as a run context.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from effectledger import Context
from effectledger.callers.frameworks.gate import CarriesLedgerContext, Grant, ledger_context_of
from effectledger.errors import NotAuthenticated
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import DRIVERS, Answered, Driver, OpenAIAgentsDriver, tool_json

OWN_CONTEXT = ("maf", "openai_agents", "pydantic_ai")
"""The adapters that read the identity from an application's context with ``ledger_context_of``
by default (LangGraph reads ``runtime.context`` with its own reader)."""


@dataclass(frozen=True)
class Shop:
    """An application's run context: its own data and the ledger's identity as one field."""

    customer: str
    ledger_context: Context | None


@dataclass(frozen=True)
class Session:
    """An application's context that keeps the identity under its own name."""

    user: Context | None
    locale: str = "en"


READERS: dict[str, tuple[Any, Any]] = {
    # reader name -> (context_of given to the adapter, how the application's object is made)
    "ledger_context": (None, lambda who: Shop(customer="c-42", ledger_context=who)),
    "context_of": (lambda session: session.user, lambda who: Session(user=who)),
}


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def _driver(world: World, framework: str, reader: str) -> tuple[Driver, Any]:
    context_of, make = READERS[reader]
    driver: Driver = DRIVERS[framework](world.app, context_of)
    return driver, make


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("framework", OWN_CONTEXT)
def test_own_context_performs_once(world: World, framework: str, reader: str) -> None:
    """The application's own context, paused, approved and resumed (twice), is one effect
    made as the identity it carries."""
    driver, make = _driver(world, framework, reader)
    paused = driver.pause(make(AGENT), REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    first = driver.resume(paused, make(AGENT), Grant.of(proposal))
    again = driver.resume(paused, make(AGENT), Grant.of(proposal))
    assert (first["outcome"], again["outcome"]) == ("performed", "replayed")
    assert world.app.operation(AGENT, first["operation_id"]).requester_id == AGENT.actor_id
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("framework", OWN_CONTEXT)
def test_own_context_without_identity_is_refused(world: World, framework: str, reader: str) -> None:
    """An application context that carries no identity is refused (``not_authenticated``) on
    the resume with nothing written; the same call resumed with the identity then performs."""
    driver, make = _driver(world, framework, reader)
    paused = driver.pause(make(AGENT), REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    events = count_rows(world.store_url, "audit_events")
    try:
        refused = driver.resume(paused, make(None), Grant.of(proposal))
    except NotAuthenticated as exc:  # OpenAI Agents' resume refuses before it reads the state
        refused = {"error": exc.to_dict()}
    assert refused["error"]["code"] == "not_authenticated"
    assert count_rows(world.store_url, "audit_events") == events
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().effects == 0
    assert driver.resume(paused, make(AGENT), Grant.of(proposal))["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("framework", OWN_CONTEXT)
def test_proposal_without_identity_writes_nothing(
    world: World, framework: str, reader: str
) -> None:
    """A call proposed with an application context that carries no identity is refused
    (``not_authenticated``) and no proposal is written."""
    driver, make = _driver(world, framework, reader)
    if framework == "pydantic_ai":  # the tool proposes at the pause, as ``deps``
        with pytest.raises(Answered) as answered:
            driver.pause(make(None), REFUND_30, "call-1")
        assert answered.value.answer["error"]["code"] == "not_authenticated"
    else:
        paused = driver.pause(make(None), REFUND_30, "call-1")
        adapter: Any = driver.adapter  # type: ignore[attr-defined]
        propose = adapter.propose_request if framework == "maf" else adapter.propose_item
        where = {"session": paused.scope} if framework == "maf" else {"scope": paused.scope}
        with pytest.raises(NotAuthenticated):
            propose(make(None), paused.handle, **where)
    assert count_rows(world.store_url, "proposals") == 0
    assert count_rows(world.store_url, "audit_events") == 0


def test_openai_agents_saved_identity_is_never_the_hosts(world: World) -> None:
    """An OpenAI Agents state saved with the identity written into its context and restored
    by the SDK without the host's context performs nothing, even with this resume's grants;
    the host's live context then performs once."""
    from agents import Runner, RunState

    driver = OpenAIAgentsDriver(world.app)
    tool = driver.adapter
    shop = Shop(customer="c-42", ledger_context=AGENT)
    agent = driver._agent([("call-1", REFUND_30)])
    paused = asyncio.run(Runner.run(agent, "refund", context=shop))
    saved = paused.to_state().to_string(
        context_serializer=lambda app: {
            "customer": app.customer,
            "ledger_context": {"tenant_id": "acme", "actor_id": "agent-7", "roles": ["agent"]},
        }
    )
    proposals = tool.propose_interruptions(shop, paused, scope="chat-1")
    for proposal in proposals.values():
        world.app.approve(REVIEWER, proposal)

    async def resume_from_saved_context() -> Any:
        state = await RunState.from_string(driver._agent([]), saved)
        for item in state.get_interruptions():
            state.approve(item)
        with tool.granted(proposals, scope="chat-1"):
            return await Runner.run(driver._agent([]), state)

    refused = asyncio.run(resume_from_saved_context())
    (output,) = [i.output for i in refused.new_items if i.type == "tool_call_output_item"]
    assert tool_json(output)["error"]["code"] == "not_authenticated"
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().effects == 0
    done = asyncio.run(tool.resume(driver._agent([]), saved, shop, proposals, scope="chat-1"))
    (output,) = [i.output for i in done.new_items if i.type == "tool_call_output_item"]
    assert json.loads(output)["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_openai_agents_host_run_still_carries_grants(world: World) -> None:
    """``HostRun`` as the run context of a host driving the SDK's ``RunState`` itself carries
    the identity, the grants and the scope: the call performs once."""
    from agents import RunContextWrapper, Runner, RunState

    driver = OpenAIAgentsDriver(world.app)
    tool = driver.adapter
    paused = driver.pause(AGENT, REFUND_30, "call-1")  # HostRun as the run context
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)

    async def resume() -> Any:
        host = tool.host(AGENT, {paused.call_id: proposal}, scope=paused.scope)
        agent = driver._agent([])
        state = await RunState.from_string(
            agent, paused.saved, context_override=RunContextWrapper(context=host)
        )
        for item in state.get_interruptions():
            state.approve(item)
        return await Runner.run(agent, state)

    result = asyncio.run(resume())
    (output,) = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
    assert json.loads(output)["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_ledger_context_of_reads_the_documented_places() -> None:
    """The default reader takes a Context, a ``ledger_context`` or a ``context`` attribute, and
    nothing else: a mapping (what a saved state restores) or another type there is no identity."""
    assert ledger_context_of(AGENT) is AGENT
    assert ledger_context_of(Shop(customer="c", ledger_context=AGENT)) is AGENT
    assert isinstance(Shop(customer="c", ledger_context=AGENT), CarriesLedgerContext)
    assert ledger_context_of(Session(user=AGENT)) is None
    assert ledger_context_of({"ledger_context": AGENT}) is None
    assert ledger_context_of(Shop(customer="c", ledger_context={"actor_id": "x"})) is None  # type: ignore[arg-type]
