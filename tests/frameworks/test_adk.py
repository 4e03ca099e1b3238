"""Google ADK's own confirmation flow with the ledger as the gate, on both backends.

A real ``LlmAgent`` under ``Runner`` and ``InMemorySessionService`` with a scripted offline
model: the pause carries the ledger's proposal and digest; a rejected confirmation and a
ledger denial reach the model with their reason; one answer can approve one call of a batch
and reject the other; the identity is read from the application's own object on every run;
ADK's invocation is part of the call's scope. The receiver's own effect count is the fact
checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from effectledger import Context
from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, MALLORY, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import ACTION, ADKDriver, tool_answer

REFUND_2 = {**REFUND_30, "order_id": "ord-1002"}


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def _call(call_id: str, arguments: dict[str, Any]) -> Any:
    from google.genai import types

    return types.FunctionCall(id=call_id, name=ACTION, args=dict(arguments))


def _text(text: str) -> Any:
    from google.genai import types

    return types.Content(role="user", parts=[types.Part(text=text)])


def _answers(events: list[Any]) -> dict[str, dict[str, Any]]:
    """The ledger tool's answers among ``events``, by function-call id."""
    return {
        str(p.function_response.id): dict(p.function_response.response)
        for e in events
        for p in (e.content.parts if e.content else [])
        if p.function_response and p.function_response.name == ACTION
    }


def _results_in(saved: str) -> int:
    """How many results of the ledger tool a saved session holds."""
    return sum(
        1
        for event in json.loads(saved)["events"]
        for part in ((event.get("content") or {}).get("parts") or [])
        if (part.get("function_response") or {}).get("name") == ACTION
    )


def test_the_pause_carries_the_proposal_and_its_digest(world: World) -> None:
    """ADK's confirmation request carries the recorded proposal's id and digest; nothing is
    performed and the model is not asked to summarize the pause."""
    driver = ADKDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    request = paused.handle
    proposal = world.app.proposal(AGENT, request.grant.proposal_id)
    assert request.grant == Grant.of(proposal)
    assert (request.call_id, request.tool_name, dict(request.arguments)) == (
        "call-1",
        ACTION,
        REFUND_30,
    )
    assert proposal.proposal_id in request.hint
    assert count_rows(world.store_url, "proposals") == 1
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().effects == 0
    assert driver.seen == []


def test_a_rejected_confirmation_performs_nothing_and_the_model_reads_why(world: World) -> None:
    """Rejected in ADK (even with the ledger's approval granted), the call is never performed;
    the model reads ``approval_denied`` with the reviewer's words."""
    from effectledger.callers.frameworks.adk import reject, reply

    driver = ADKDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    world.app.approve(REVIEWER, paused.handle.grant.proposal_id, digest=paused.handle.grant.digest)
    message = reply(reject(paused.handle, "the customer withdrew the request"))
    events, _ = driver.run([], paused.saved, message, AGENT)
    answer = tool_answer(events)
    assert (answer["outcome"], answer["reason"]) == ("denied", "approval_denied")
    assert answer["note"] == "the customer withdrew the request"
    assert driver.seen[-1].response["note"] == "the customer withdrew the request"
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "operations") == 0


def test_a_ledger_denial_reaches_the_model_with_its_reason(world: World) -> None:
    """The reviewer denies the proposal in the ledger; confirmed in ADK, the call is refused
    and the model reads the reviewer's reason."""
    from effectledger.callers.frameworks.adk import approve, reply

    driver = ADKDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    grant = paused.handle.grant
    world.app.deny(REVIEWER, grant.proposal_id, digest=grant.digest, reason="over the refund limit")
    events, _ = driver.run([], paused.saved, reply(approve(paused.handle)), AGENT)
    answer = tool_answer(events)
    assert (answer["outcome"], answer["reason"]) == ("denied", "approval_denied")
    assert answer["note"] == "over the refund limit"
    assert driver.seen[-1].response["note"] == "over the refund limit"
    assert world.receiver.counts().effects == 0


def test_one_answer_approves_one_call_of_a_batch_and_rejects_the_other(world: World) -> None:
    """Two calls in one model turn pause together; one reply approves the first and rejects
    the second: one effect, the second never performed."""
    from effectledger.callers.frameworks.adk import approve, confirmation_requests, reject, reply

    driver = ADKDriver(world.app)
    calls = [_call("call-1", REFUND_30), _call("call-2", REFUND_2)]
    events, saved = driver.run(calls, None, _text("two refunds"), AGENT)
    first, second = confirmation_requests(events)
    assert (first.call_id, second.call_id) == ("call-1", "call-2")
    for request in (first, second):
        world.app.approve(REVIEWER, request.grant.proposal_id, digest=request.grant.digest)
    message = reply(approve(first), reject(second, "one refund per order"))
    events, _ = driver.run([], saved, message, AGENT)
    answers = _answers(events)
    assert answers["call-1"]["outcome"] == "performed"
    assert (answers["call-2"]["outcome"], answers["call-2"]["note"]) == (
        "denied",
        "one refund per order",
    )
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "operations") == 1


@dataclass
class AppRequest:
    """An application's own per-request object: its user, and the ledger identity it holds."""

    user: str
    context: Context


@dataclass
class OtherRequest:
    """An application object that keeps the identity under a name of its own."""

    who: Context


def test_the_applications_own_object_gives_the_identity(world: World) -> None:
    """The host's own object reaches the tool: its ``context`` attribute by default, or what a
    ``context_of`` callable reads; an object without one is refused with nothing written."""
    from effectledger.callers.frameworks.adk import approve, ledger_tool, reply

    driver = ADKDriver(world.app)
    message = _text("refund")
    events, _ = driver.run([_call("call-1", REFUND_30)], None, message, OtherRequest(AGENT))
    assert tool_answer(events)["error"]["code"] == "not_authenticated"
    assert count_rows(world.store_url, "proposals") == 0

    paused = driver.pause(AppRequest("ann", AGENT), REFUND_30, "call-1")  # type: ignore[arg-type]
    world.app.approve(REVIEWER, paused.handle.grant.proposal_id, digest=paused.handle.grant.digest)
    driver.adapter = ledger_tool(world.app, ACTION, context_of=lambda request: request.who)
    events, _ = driver.run([], paused.saved, reply(approve(paused.handle)), OtherRequest(AGENT))
    assert tool_answer(events)["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_an_answer_given_twice_in_one_session_runs_once(world: World) -> None:
    """The same confirmation answered again in the live session is not run again (ADK's own
    bookkeeping); restored from the saved pause, it replays: one effect either way."""
    from effectledger.callers.frameworks.adk import approve, reply

    driver = ADKDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    world.app.approve(REVIEWER, paused.handle.grant.proposal_id, digest=paused.handle.grant.digest)
    message = reply(approve(paused.handle))
    events, after = driver.run([], paused.saved, message, AGENT)
    assert tool_answer(events)["outcome"] == "performed"
    events, _ = driver.run([], after, message, AGENT)
    assert _answers(events) == {}
    events, _ = driver.run([], paused.saved, message, AGENT)
    assert tool_answer(events)["outcome"] == "replayed"
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1


def test_a_later_invocation_reusing_the_call_id_is_its_own_proposal(world: World) -> None:
    """The invocation is part of the scope: in the same session, a later turn whose model
    reuses ``call-1`` is a new proposal and, approved, a second effect."""
    from effectledger.callers.frameworks.adk import approve, confirmation_requests, reply

    driver = ADKDriver(world.app)
    call = _call("call-1", REFUND_30)
    performed = []
    saved = None
    for turn in ("refund", "and once more"):
        events, saved = driver.run([call], saved, _text(turn), AGENT)
        (request,) = confirmation_requests(events)
        world.app.approve(REVIEWER, request.grant.proposal_id, digest=request.grant.digest)
        events, saved = driver.run([], saved, reply(approve(request)), AGENT)
        performed.append((request.grant.proposal_id, tool_answer(events)["outcome"]))
    assert performed[0][0] != performed[1][0]
    assert [outcome for _, outcome in performed] == ["performed", "performed"]
    assert count_rows(world.store_url, "proposals") == 2
    assert world.receiver.counts().effects == 2


def test_an_early_or_wrong_answer_leaves_the_confirmation_open(world: World) -> None:
    """Answered before the ledger approved, with a forged grant or as another actor, the
    resume raises ``admission_denied`` to the host and performs nothing; ADK's confirmation
    stays open, so the right answer afterwards performs once."""
    from effectledger import AdmissionDenied
    from effectledger.callers.frameworks.adk import approve, reply

    driver = ADKDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    grant = paused.handle.grant
    forged = Grant(proposal_id="prop-forged", digest=grant.digest)
    saved = paused.saved
    for answer, who, reason in (
        (approve(paused.handle), AGENT, "approval_missing"),
        (approve(paused.handle, forged), AGENT, "not_found"),
        (approve(paused.handle), MALLORY, "actor_mismatch"),
    ):
        if reason == "not_found":
            world.app.approve(REVIEWER, grant.proposal_id, digest=grant.digest)
        with pytest.raises(AdmissionDenied) as refused:
            driver.run([], saved, reply(answer), who)
        assert refused.value.reason == reason
        assert refused.value.details["answer"]["outcome"] == "denied"
        saved = driver.saved  # the session as the failed resume left it: the answer, no result
        assert _results_in(saved) == 1  # the pause's placeholder only
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "operations") == 0
    events, saved = driver.run([], saved, reply(approve(paused.handle)), AGENT)
    assert tool_answer(events)["outcome"] == "performed"
    events, _ = driver.run([], saved, reply(approve(paused.handle)), AGENT)
    assert _answers(events) == {}
    assert world.receiver.counts().effects == 1


def test_a_resume_outside_acting_as_raises_and_writes_nothing(world: World) -> None:
    """A confirmed answer run without the host's identity raises ``not_authenticated`` before
    anything is read or written, and leaves the confirmation open."""
    from effectledger.callers.frameworks.adk import approve, reply
    from effectledger.errors import NotAuthenticated

    driver = ADKDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    grant = paused.handle.grant
    world.app.approve(REVIEWER, grant.proposal_id, digest=grant.digest)
    events = count_rows(world.store_url, "audit_events")
    with pytest.raises(NotAuthenticated):
        driver.run([], paused.saved, reply(approve(paused.handle)), None)
    assert count_rows(world.store_url, "audit_events") == events
    done, _ = driver.run([], driver.saved, reply(approve(paused.handle)), AGENT)
    assert tool_answer(done)["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_smuggled_fields_are_invalid_input_and_write_nothing(world: World) -> None:
    """A model call with fields the action does not declare is answered ``invalid_input`` at
    the pause: no proposal, no confirmation request."""
    from effectledger.callers.frameworks.adk import confirmation_requests

    driver = ADKDriver(world.app)
    smuggled = {**REFUND_30, "approved_by": "rita", "tenant_id": "globex"}
    events, _ = driver.run([_call("call-1", smuggled)], None, _text("refund"), AGENT)
    assert tool_answer(events)["error"]["code"] == "invalid_input"
    assert confirmation_requests(events) == []
    assert count_rows(world.store_url, "proposals") == 0


def test_the_sync_runner_carries_the_hosts_identity(world: World) -> None:
    """``Runner.run``, ADK's synchronous form on a thread of its own, reads the identity set
    by ``acting_as`` too: the pause proposes as the host, the answer performs once."""
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    from effectledger.callers.frameworks.adk import (
        acting_as,
        approve,
        confirmation_requests,
        reply,
    )

    driver = ADKDriver(world.app)
    service = InMemorySessionService()
    session = service.create_session_sync(app_name="refunds", user_id="customer-1")
    runner = Runner(
        app_name="refunds",
        agent=driver.agent([_call("call-1", REFUND_30)]),
        session_service=service,
    )

    def run(message: Any) -> list[Any]:
        with acting_as(AppRequest("ann", AGENT)):
            return list(
                runner.run(user_id="customer-1", session_id=session.id, new_message=message)
            )

    (request,) = confirmation_requests(run(_text("refund")))
    assert world.app.proposal(AGENT, request.grant.proposal_id).proposer_id == AGENT.actor_id
    world.app.approve(REVIEWER, request.grant.proposal_id, digest=request.grant.digest)
    assert tool_answer(run(reply(approve(request))))["outcome"] == "performed"
    assert world.receiver.counts().effects == 1
