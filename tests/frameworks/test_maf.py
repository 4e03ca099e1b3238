"""Microsoft Agent Framework's own approval content types carry the ledger's part, on both
backends.

A real ``Agent`` with a scripted offline chat client, the adapter's pause and gate middleware,
and the host's identity in ``function_invocation_kwargs``: the run pauses with MAF's
``function_approval_request`` (what DevUI renders: the call's name and the arguments MAF will
run), the call already proposed in the ledger, and the request's ``additional_properties``
carry the proposal id, its digest, its tenant and the action's declared summary, streamed
updates included. The response MAF makes from the request carries them back, and the gate
performs the grant it carries; the receiver's own count of effects is the fact checked.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectledger import Display, InvalidInput
from effectledger.callers.frameworks.gate import Grant
from effectledger.callers.frameworks.maf import LEDGER_KEY
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import ACTION, MAFDriver, tool_json

SUMMARY = Display(
    summary="Refund {amount_minor} on order {order_id}", money={"amount_minor": "currency"}
)


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver; the refund action declares the summary a reviewer reads."""
    with fresh_world(store_url, tmp_path / "world", display=SUMMARY) as made:
        yield made


def _resume(driver: MAFDriver, saved: str, answers: list[Any], **kwargs: Any) -> dict[str, Any]:
    """Resume the saved session with MAF's approval ``answers``; the tool's results by call id."""
    from agent_framework import AgentSession, Message

    session = AgentSession.from_dict(json.loads(saved))
    response = asyncio.run(
        driver.agent([]).run(
            Message("user", answers), session=session, function_invocation_kwargs=kwargs
        )
    )
    return {
        c.call_id: tool_json(c.result)
        for m in response.messages
        for c in m.contents
        if c.type == "function_result"
    }


def test_the_pause_carries_the_ledgers_part_in_mafs_approval_request(world: World) -> None:
    """Run with the host's identity, the pause is MAF's ``function_approval_request``: its
    function call is the proposal's action and arguments (what DevUI shows), and its
    ``additional_properties`` carry the call id, the recorded proposal's grant and the
    declared summary, through ``to_dict`` and into the response MAF makes from it. Nothing is
    performed."""
    driver = MAFDriver(world.app)
    response, session = driver.run([("call-1", REFUND_30)], AGENT)
    (request,) = response.user_input_requests
    assert request.type == "function_approval_request"
    part = request.additional_properties[LEDGER_KEY]
    proposal = world.app.proposal(AGENT, part["proposal_id"])
    assert part == {
        "tool_call_id": "call-1",
        **Grant.of(proposal).to_dict(),
        "summary": "Refund 0.30 EUR on order ord-1001",
    }
    assert proposal.proposer_id == AGENT.actor_id
    call = request.function_call
    assert (call.call_id, call.name, call.parse_arguments()) == (
        "call-1",
        ACTION,
        dict(proposal.arguments),
    )
    assert json.loads(json.dumps(request.to_dict()))["additional_properties"][LEDGER_KEY] == part
    answer = request.to_function_approval_response(True)
    assert (answer.type, answer.additional_properties[LEDGER_KEY]) == (
        "function_approval_response",
        part,
    )
    assert driver.propose(AGENT, _paused(request, session)) == proposal  # the same proposal
    assert count_rows(world.store_url, "proposals") == 1
    assert world.receiver.counts().submissions == 0


def test_a_streamed_pause_carries_the_ledgers_part(world: World) -> None:
    """Streamed (as DevUI runs an agent), the update that brings the approval request carries
    the ledger's part, and so does the final response."""
    driver = MAFDriver(world.app)
    agent = driver.agent([("call-1", REFUND_30)])
    session = agent.create_session()

    async def run() -> tuple[list[Any], Any]:
        stream = agent.run(
            "refund",
            session=session,
            stream=True,
            function_invocation_kwargs=driver.adapter.invocation(AGENT),
        )
        updates = [update async for update in stream]
        return updates, await stream.get_final_response()

    updates, final = asyncio.run(run())
    streamed = [c for u in updates for c in u.contents if c.type == "function_approval_request"]
    (request,) = final.user_input_requests
    assert [c.additional_properties[LEDGER_KEY] for c in streamed] == [
        request.additional_properties[LEDGER_KEY]
    ]
    grant = Grant.coerce(request.additional_properties[LEDGER_KEY])
    assert grant is not None
    assert world.app.proposal(AGENT, grant.proposal_id).digest == grant.digest
    assert count_rows(world.store_url, "proposals") == 1


def test_the_response_carries_the_grant_the_gate_performs(world: World) -> None:
    """Approved in the ledger and in MAF, the resume needs only the host's identity: the
    response made from the request carries the grant and the gate performs it once; resumed
    again it replays. A response without the grant, and no grant from the host, is
    ``approval_missing`` first; nothing is sent then."""
    from agent_framework import Content

    driver = MAFDriver(world.app)
    response, session = driver.run([("call-1", REFUND_30)], AGENT)
    (request,) = response.user_input_requests
    saved = json.dumps(session.to_dict(), default=str)
    part = request.additional_properties[LEDGER_KEY]
    world.app.approve(REVIEWER, part["proposal_id"], digest=part["digest"])
    bare = Content.from_function_approval_response(
        True, id=request.id, function_call=request.function_call
    )
    early = _resume(driver, saved, [bare], **driver.adapter.invocation(AGENT))["call-1"]
    assert (early["outcome"], early["reason"]) == ("denied", "approval_missing")
    assert world.receiver.counts().submissions == 0
    answer = request.to_function_approval_response(True)
    first = _resume(driver, saved, [answer], **driver.adapter.invocation(AGENT))["call-1"]
    again = _resume(driver, saved, [answer], **driver.adapter.invocation(AGENT))["call-1"]
    assert (first["outcome"], again["outcome"]) == ("performed", "replayed")
    assert world.receiver.counts().effects == 1
    assert world.app.operation(AGENT, first["operation_id"]).proposal_id == part["proposal_id"]


def test_a_carried_grant_of_another_sessions_call_is_refused(world: World) -> None:
    """Two sessions reuse ``call-1``; a response carrying the other session's grant is
    ``digest_mismatch`` and sends nothing, the host's own grant for the call comes before the
    one the response carries, and the session's own performs: one effect per session."""
    driver = MAFDriver(world.app)
    first, first_session = driver.run([("call-1", REFUND_30)], AGENT)
    second, second_session = driver.run([("call-1", REFUND_30)], AGENT)
    (mine,) = second.user_input_requests
    (theirs,) = first.user_input_requests
    for request in (mine, theirs):
        part = request.additional_properties[LEDGER_KEY]
        world.app.approve(REVIEWER, part["proposal_id"], digest=part["digest"])
    saved = json.dumps(second_session.to_dict(), default=str)
    crossed = mine.to_function_approval_response(True)
    crossed.additional_properties[LEDGER_KEY] = theirs.additional_properties[LEDGER_KEY]
    refused = _resume(driver, saved, [crossed], **driver.adapter.invocation(AGENT))["call-1"]
    assert (refused["outcome"], refused["reason"]) == ("denied", "digest_mismatch")
    assert world.receiver.counts().submissions == 0
    own = Grant.coerce(mine.additional_properties[LEDGER_KEY])
    assert own is not None
    kwargs = driver.adapter.invocation(AGENT, {"call-1": own})
    assert _resume(driver, saved, [crossed], **kwargs)["call-1"]["outcome"] == "performed"
    first_saved = json.dumps(first_session.to_dict(), default=str)
    answer = theirs.to_function_approval_response(True)
    assert (
        _resume(driver, first_saved, [answer], **driver.adapter.invocation(AGENT))["call-1"][
            "outcome"
        ]
        == "performed"
    )
    assert world.receiver.counts().effects == 2


def test_a_pause_the_ledger_refuses_says_why_and_writes_nothing(world: World) -> None:
    """Without the host's identity the pause proposes nothing (the host proposes it itself);
    with it, a model's call with a smuggled field still pauses in MAF, its request carrying the
    ledger's ``invalid_input`` naming the field, and no proposal is written."""
    driver = MAFDriver(world.app)
    response, _ = driver.run([("call-1", REFUND_30)])
    (request,) = response.user_input_requests
    assert LEDGER_KEY not in (request.additional_properties or {})
    smuggled = {**REFUND_30, "approved_by": "admin"}
    response, session = driver.run([("call-2", smuggled)], AGENT)
    (request,) = response.user_input_requests
    error = request.additional_properties[LEDGER_KEY]["error"]
    assert (error["code"], error["details"]["field"]) == ("invalid_input", "approved_by")
    with pytest.raises(InvalidInput):
        driver.propose(AGENT, _paused(request, session))
    assert count_rows(world.store_url, "proposals") == 0
    assert count_rows(world.store_url, "audit_events") == 0


def _paused(request: Any, session: Any) -> Any:
    from tests.frameworks.drivers import Paused

    return Paused(json.dumps(session.to_dict(), default=str), "", request, session.session_id)


def test_a_host_running_the_agent_as_devui_does_gives_identity_and_grants_itself(
    world: World,
) -> None:
    """DevUI runs the agent without ``function_invocation_kwargs`` and rebuilds each approval
    response without the ledger's part; a host middleware ahead of the pause supplies the
    identity and re-derives each answered call's grant (proposing it again returns its
    proposal, nothing written): the call performs once."""
    from agent_framework import Agent, AgentMiddleware, Content, Message

    driver = MAFDriver(world.app)
    tool = driver.adapter

    class DevUIHost(AgentMiddleware):
        async def process(self, context: Any, call_next: Any) -> None:
            answered = [
                c
                for m in context.messages
                for c in m.contents
                if c.type == "function_approval_response" and c.function_call.name == ACTION
            ]
            grants = {
                c.function_call.call_id: tool.propose_request(AGENT, c, session=context.session)
                for c in answered
            }
            context.function_invocation_kwargs.update(tool.invocation(AGENT, grants))
            await call_next()

    scripted = driver.agent([("call-1", REFUND_30)])
    agent = Agent(
        client=scripted.client,
        name="refunds",
        tools=[tool.tool],
        middleware=[DevUIHost(), tool.pause_middleware, tool.middleware],
    )
    session = agent.create_session()
    (request,) = asyncio.run(agent.run("refund", session=session)).user_input_requests
    part = request.additional_properties[LEDGER_KEY]
    world.app.approve(REVIEWER, part["proposal_id"], digest=part["digest"])
    events = count_rows(world.store_url, "audit_events")
    rebuilt = Content.from_function_approval_response(  # what DevUI sends back
        True, id=request.id, function_call=request.function_call
    )
    out = asyncio.run(agent.run(Message("user", [rebuilt]), session=session))
    (result,) = [c for m in out.messages for c in m.contents if c.type == "function_result"]
    assert tool_json(result.result)["outcome"] == "performed"
    assert count_rows(world.store_url, "proposals") == 1
    assert count_rows(world.store_url, "audit_events") > events  # admitted, sent, recorded
    assert world.receiver.counts().effects == 1


def test_the_ledgers_calls_run_off_the_event_loop(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause's proposal and the gate's perform (a commit and the destination's reply) run
    on a thread of their own, never on the event loop that runs the agent: the loop keeps
    serving other tasks while the ledger works. The refund is still performed once."""
    driver = MAFDriver(world.app)
    loop_threads: set[int] = set()
    ledger_threads: list[int] = []
    gate = driver.adapter.gate
    for name in ("propose", "perform"):
        original = getattr(gate, name)

        def spy(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            ledger_threads.append(threading.get_ident())
            return _original(*args, **kwargs)

        monkeypatch.setattr(gate, name, spy)

    async def run(call: Any) -> Any:
        loop_threads.add(threading.get_ident())
        return await call

    agent = driver.agent([("call-1", REFUND_30)])
    session = agent.create_session()
    response = asyncio.run(
        run(
            agent.run(
                "refund",
                session=session,
                function_invocation_kwargs=driver.adapter.invocation(AGENT),
            )
        )
    )
    (request,) = response.user_input_requests
    part = request.additional_properties[LEDGER_KEY]
    world.app.approve(REVIEWER, part["proposal_id"], digest=part["digest"])
    from agent_framework import Message

    answer = request.to_function_approval_response(True)
    asyncio.run(
        run(
            driver.agent([]).run(
                Message("user", [answer]),
                session=session,
                function_invocation_kwargs=driver.adapter.invocation(AGENT),
            )
        )
    )
    assert len(ledger_threads) == 2  # one proposal at the pause, one perform at the resume
    assert not loop_threads & set(ledger_threads)
    assert world.receiver.counts().effects == 1
