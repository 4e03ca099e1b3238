"""LangGraph's pause is LangChain's human-in-the-loop request; each decision acts in the ledger.

A real ``create_agent`` graph with a scripted model pauses on refund calls with the
``HITLRequest`` that ``HumanInTheLoopMiddleware`` emits (what Agent Inbox and Studio render).
Resumed with a ``HITLResponse``, on both backends: ``approve`` performs the grant of this
resume; ``edit`` denies the call as proposed and performs the edited call as a new proposal
the host's reviewer approves; ``reject`` and ``respond`` deny with the reviewer's message,
which the model reads. Each test checks the destination's own count of effects and the trail:
which proposal was approved or denied, by whom, and which one the operation performed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectledger import Proposal
from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import (
    AGENT,
    MALLORY,
    OUTSIDER,
    REFUND_30,
    REVIEWER,
    World,
    fresh_world,
)
from tests.conftest import count_rows, raw_sql
from tests.frameworks.drivers import (
    ACTION,
    APPROVE,
    Answered,
    LangGraphDriver,
    LangGraphHost,
    tool_json,
)

EDITED = {**REFUND_30, "amount_minor": 25}
SECOND = {**REFUND_30, "order_id": "ord-2002", "amount_minor": 40}


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def decisions_rows(world: World) -> Counter[tuple[object, ...]]:
    """Every recorded decision (proposal, granted or denied, by whom, why), counted."""
    rows = raw_sql(
        world.store_url, "SELECT proposal_id, decision, approver_id, reason FROM approvals"
    )
    return Counter(tuple(row) for row in rows)


def trail(world: World, proposal: Proposal) -> list[tuple[str, str]]:
    """The proposal's trail as (event, actor) pairs."""
    return [(e.event_type, e.actor) for e in world.app.events(REVIEWER, proposal.operation_id)]


def answers(state: Any) -> dict[str, dict[str, Any]]:
    """The tool messages of a final state by tool-call id, as JSON."""
    return {m.tool_call_id: tool_json(m.content) for m in state["messages"] if m.type == "tool"}


PERFORMED = [
    ("ProposalRecorded", AGENT.actor_id),
    ("ApprovalGranted", REVIEWER.actor_id),
    ("OperationAdmitted", AGENT.actor_id),
]


def test_pause_is_langchains_human_in_the_loop_request(world: World) -> None:
    """The interrupt's value is a ``HITLRequest``: the call's name, the proposal's arguments,
    a description naming proposal and digest, a review config with the allowed decisions, the
    ledger's part under ``effectledger``; its resume schema takes LangChain's ``HITLResponse``."""
    from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
    from pydantic import TypeAdapter

    from effectledger.callers.frameworks.langgraph import ReviewResponse

    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    value = paused.handle.value
    TypeAdapter(HITLRequest).validate_python(value)  # the shape LangChain's UIs read
    proposal = driver.propose(AGENT, paused)
    (request,) = value["action_requests"]
    assert (request["name"], request["args"]) == (ACTION, dict(proposal.arguments))
    assert proposal.proposal_id in request["description"]
    assert proposal.digest in request["description"]
    assert request["effectledger"] == {
        "tool_call_id": "call-1",
        "proposal_id": proposal.proposal_id,
        "digest": proposal.digest,
    }
    assert value["review_configs"] == [
        {"action_name": ACTION, "allowed_decisions": ["approve", "edit", "reject", "respond"]}
    ]
    assert paused.handle.response_schema == TypeAdapter(ReviewResponse).json_schema()
    answer = {
        "decisions": [
            {"type": "approve"},
            {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}},
            {"type": "reject"},
            {"type": "respond", "message": "no"},
        ]
    }
    assert TypeAdapter(HITLResponse).validate_python(answer) == answer  # LangChain's, as ours
    assert ReviewResponse.model_validate(answer).model_dump(exclude_none=True) == answer
    assert count_rows(world.store_url, "proposals") == 1
    assert world.receiver.counts().effects == 0


def test_accept_performs_the_granted_digest_once(world: World) -> None:
    """``approve`` with this resume's grant performs the approved digest once; resumed again
    it replays; the operation performed is the approved proposal, on its approval."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    approval = world.app.approve(REVIEWER, proposal)
    host = LangGraphHost(AGENT, {"call-1": proposal})
    first = answers(driver.decide(paused, host, APPROVE))["call-1"]
    again = answers(driver.decide(paused, host, APPROVE))["call-1"]
    assert (first["outcome"], again["outcome"]) == ("performed", "replayed")
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1
    operation = world.app.operation(AGENT, first["operation_id"])
    assert (operation.proposal_id, operation.approval_id) == (
        proposal.proposal_id,
        approval.approval_id,
    )
    assert trail(world, proposal)[:3] == PERFORMED
    assert decisions_rows(world) == Counter([(proposal.proposal_id, "granted", "rita", None)])


def test_accept_without_a_grant_then_with_it_performs_once(world: World) -> None:
    """``approve`` without this resume's grant performs nothing; the same paused checkpoint
    resumed with the grant performs once: the grant is never one a checkpoint kept."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    early = answers(driver.decide(paused, LangGraphHost(AGENT), APPROVE))["call-1"]
    assert (early["outcome"], early["reason"]) == ("denied", "approval_missing")
    assert world.receiver.counts().effects == 0
    late = answers(driver.decide(paused, LangGraphHost(AGENT, {"call-1": proposal}), APPROVE))
    assert late["call-1"]["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_edit_performs_the_edited_call_under_a_new_approval(world: World) -> None:
    """``edit`` by the host's reviewer denies the call as proposed (already approved, never
    performed) and performs the edited call as a new proposal approved as edited; resumed
    twice it is one effect, and the old approval never performs anything."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    original = driver.propose(AGENT, paused)
    old_approval = world.app.approve(REVIEWER, original)
    host = LangGraphHost(AGENT, {"call-1": original}, reviewer=REVIEWER)
    edit = {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}}
    first = answers(driver.decide(paused, host, edit))["call-1"]
    again = answers(driver.decide(paused, host, edit))["call-1"]
    assert (first["outcome"], again["outcome"]) == ("performed", "replayed")
    assert "replaced this call" in first["note"]
    assert world.receiver.counts().effects == 1
    assert world.app.capacity(REVIEWER, "refunds").committed == 25

    operation = world.app.operation(AGENT, first["operation_id"])
    edited = world.app.proposal(AGENT, str(operation.proposal_id))
    assert dict(edited.arguments)["amount_minor"] == 25
    assert edited.digest != original.digest
    assert edited.correlation["tool_call_id"] == "call-1"
    assert decisions_rows(world) == Counter(
        [
            (original.proposal_id, "granted", "rita", None),
            (original.proposal_id, "denied", "rita", "edited by the reviewer"),
            (edited.proposal_id, "granted", "rita", None),
        ]
    )
    assert operation.approval_id != old_approval.approval_id
    assert trail(world, edited)[:3] == PERFORMED
    assert [event for event, _ in trail(world, original)] == [
        "ProposalRecorded",
        "ApprovalGranted",
        "ApprovalDenied",
    ]
    # the old approval presented for the original call performs nothing
    stale = world.app.perform(AGENT, original, approval=old_approval)
    assert (stale.outcome, stale.reason) == ("denied", "approval_denied")
    assert world.receiver.counts().effects == 1
    assert world.service.authority.approval_consumed_by(AGENT, old_approval.approval_id) is None


def test_edit_needs_the_hosts_reviewer(world: World) -> None:
    """An ``edit`` resumed without a reviewer in the host's context, or with one who is no
    approver, decides and performs nothing; the same pause resumed with the reviewer performs
    the edit once."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    edit = {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}}
    missing = answers(driver.decide(paused, LangGraphHost(AGENT), edit))["call-1"]
    assert missing["error"]["code"] == "not_authenticated"
    refused = answers(driver.decide(paused, LangGraphHost(AGENT, reviewer=MALLORY), edit))
    assert refused["call-1"]["error"]["code"] == "not_permitted"
    assert not decisions_rows(world)
    assert count_rows(world.store_url, "proposals") == 1
    assert world.receiver.counts().effects == 0
    done = answers(driver.decide(paused, LangGraphHost(AGENT, reviewer=REVIEWER), edit))
    assert done["call-1"]["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_edit_to_invalid_arguments_writes_nothing(world: World) -> None:
    """An edit whose arguments the action refuses is ``invalid_input`` naming the field, and
    nothing is decided or proposed."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    edit = {
        "type": "edit",
        "edited_action": {"name": ACTION, "args": {**EDITED, "amount_minor": -5}},
    }
    host = LangGraphHost(AGENT, reviewer=REVIEWER)
    answer = answers(driver.decide(paused, host, edit))["call-1"]
    assert answer["error"]["code"] == "invalid_input"
    assert "amount_minor" in str(answer["error"])
    assert not decisions_rows(world)
    assert count_rows(world.store_url, "proposals") == 1
    assert world.receiver.counts().effects == 0


@pytest.mark.parametrize("kind", ["reject", "respond"])
def test_reject_and_respond_deny_with_the_message(world: World, kind: str) -> None:
    """``reject`` and ``respond`` record the reviewer's denial with the message, and the model
    reads it as the tool's result; resumed twice, still one denial and no effect."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    host = LangGraphHost(AGENT, reviewer=REVIEWER)
    decision = {"type": kind, "message": "Refund only the shipping, please."}
    first = answers(driver.decide(paused, host, decision))["call-1"]
    again = answers(driver.decide(paused, host, decision))["call-1"]
    for answer in (first, again):
        assert (answer["outcome"], answer["reason"]) == ("denied", "approval_denied")
        assert answer["note"] == "Refund only the shipping, please."
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "operations") == 0
    assert decisions_rows(world) == Counter(
        [(proposal.proposal_id, "denied", "rita", "Refund only the shipping, please.")]
    )
    assert [event for event, _ in trail(world, proposal)][:2] == [
        "ProposalRecorded",
        "ApprovalDenied",
    ]


def test_batch_with_one_call_accepted_and_one_rejected(world: World) -> None:
    """Two calls in one pause, one review: the approved one performs, the rejected one is
    denied with its message; one effect, each proposal's trail its own."""
    driver = LangGraphDriver(world.app)
    calls = [
        {"name": ACTION, "args": REFUND_30, "id": "call-1"},
        {"name": ACTION, "args": SECOND, "id": "call-2"},
    ]
    paused = driver.pause_calls(AGENT, calls)
    assert len(paused.handle.value["action_requests"]) == 2
    proposals = driver.adapter.proposals(AGENT, paused.handle)
    world.app.approve(REVIEWER, proposals["call-1"])
    host = LangGraphHost(AGENT, {"call-1": proposals["call-1"]}, reviewer=REVIEWER)
    reject = {"type": "reject", "message": "Not this order."}
    out = answers(driver.decide(paused, host, APPROVE, reject))
    assert out["call-1"]["outcome"] == "performed"
    assert (out["call-2"]["outcome"], out["call-2"]["note"]) == ("denied", "Not this order.")
    assert world.receiver.counts().effects == 1
    assert world.app.capacity(REVIEWER, "refunds").committed == 30
    assert decisions_rows(world) == Counter(
        [
            (proposals["call-1"].proposal_id, "granted", "rita", None),
            (proposals["call-2"].proposal_id, "denied", "rita", "Not this order."),
        ]
    )
    assert trail(world, proposals["call-1"])[:3] == PERFORMED


def test_a_resume_by_an_identity_that_did_not_pause_writes_nothing_of_its_own(
    world: World,
) -> None:
    """Another actor of the tenant, or another tenant, resuming the agent's paused review gets
    the ledger's refusal for that identity (with a grant of the call: ``actor_mismatch``,
    ``not_found``; without one: ``not_found``) and nothing of theirs is written: no proposal
    row, no decision. The agent's own resume then performs once."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    unnamed = Grant(proposal_id=proposal.proposal_id, digest=proposal.digest)
    reject = {"type": "reject", "message": "No."}
    for who, grants, decision, reason in (
        (MALLORY, {"call-1": unnamed}, APPROVE, "actor_mismatch"),
        (OUTSIDER, {"call-1": unnamed}, APPROVE, "not_found"),
        (MALLORY, {}, reject, "not_found"),
        (OUTSIDER, {}, APPROVE, "not_found"),
    ):
        host = LangGraphHost(who, dict(grants), reviewer=REVIEWER)
        answer = answers(driver.decide(paused, host, decision))["call-1"]
        assert (answer["outcome"], answer["reason"]) == ("denied", reason), who
    assert count_rows(world.store_url, "proposals") == 1
    assert count_rows(world.store_url, "audit_events", "event_type = 'ProposalRecorded'") == 1
    assert decisions_rows(world) == Counter([(proposal.proposal_id, "granted", "rita", None)])
    assert count_rows(world.store_url, "operations") == 0
    host = LangGraphHost(AGENT, {"call-1": proposal})
    assert answers(driver.decide(paused, host, APPROVE))["call-1"]["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_decisions_that_do_not_fit_the_review_write_nothing(world: World) -> None:
    """Fewer decisions than calls, or a decision the review config does not allow, answers
    ``invalid_input`` and decides nothing; a resume value that is no ``HITLResponse`` is
    refused by LangGraph before it is saved, and the pause can then be answered."""
    from langgraph.types import Command
    from pydantic import ValidationError

    from effectledger.callers.frameworks.langgraph import ledger_middleware

    driver = LangGraphDriver(world.app)
    driver.adapter = ledger_middleware(world.app, ACTION, allowed_decisions=["approve", "reject"])
    calls = [
        {"name": ACTION, "args": REFUND_30, "id": "call-1"},
        {"name": ACTION, "args": SECOND, "id": "call-2"},
    ]
    short = driver.pause_calls(AGENT, calls)
    host = LangGraphHost(AGENT, reviewer=REVIEWER)
    out = answers(driver.decide(short, host, APPROVE))
    assert {a["error"]["code"] for a in out.values()} == {"invalid_input"}

    paused = driver.pause(AGENT, REFUND_30, "call-3")
    assert paused.handle.value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    edit = {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}}
    assert answers(driver.decide(paused, host, edit))["call-3"]["error"]["code"] == "invalid_input"
    assert not decisions_rows(world)

    other = driver.pause(AGENT, REFUND_30, "call-4")
    graph = driver._agent(None)
    with pytest.raises(ValidationError):
        graph.invoke(
            Command(resume={other.handle.id: {"approve": True}}), other.saved, context=host
        )
    reject = {"type": "reject", "message": "No."}
    assert answers(driver.decide(other, host, reject))["call-4"]["reason"] == "approval_denied"
    assert world.receiver.counts().effects == 0


def test_a_call_the_middleware_refuses_is_answered_without_a_pause(world: World) -> None:
    """Arguments the action refuses are answered at once (``invalid_input``), nothing paused
    or written."""
    driver = LangGraphDriver(world.app)
    with pytest.raises(Answered) as answered:
        driver.pause(AGENT, {**REFUND_30, "amount_minor": -1}, "call-1")
    assert answered.value.answer["error"]["code"] == "invalid_input"
    assert count_rows(world.store_url, "proposals") == 0


def test_async_run_reviews_and_performs_once(world: World) -> None:
    """Run with ``ainvoke``, the review pauses the same way and ``approve`` performs once."""
    import asyncio

    driver = LangGraphDriver(world.app)
    graph = driver._agent([{"name": ACTION, "args": REFUND_30, "id": "call-1"}])
    config = {"configurable": {"thread_id": "async"}}
    ask = {"messages": [{"role": "user", "content": "refund"}]}
    paused = asyncio.run(graph.ainvoke(ask, config, context=LangGraphHost(AGENT), version="v2"))
    (interrupt,) = paused.interrupts
    proposal = driver.adapter.proposal(AGENT, interrupt)
    world.app.approve(REVIEWER, proposal)
    command = driver.adapter.resume({interrupt.id: [APPROVE]})
    host = LangGraphHost(AGENT, {"call-1": proposal})
    out = asyncio.run(graph.ainvoke(command, config, context=host, version="v2"))
    assert answers(out.value)["call-1"]["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_edit_of_a_call_performed_meanwhile_reports_what_happened(world: World) -> None:
    """An ``edit`` of a call whose proposal was performed meanwhile performs nothing more: the
    model reads the recorded result, and no edited proposal is made."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    original = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, original)
    assert world.app.perform(AGENT, original).outcome == "performed"
    edit = {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}}
    answer = answers(driver.decide(paused, LangGraphHost(AGENT, reviewer=REVIEWER), edit))
    assert answer["call-1"]["outcome"] == "replayed"
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "proposals") == 1
    assert world.app.capacity(REVIEWER, "refunds").committed == 30


def test_concurrent_resumes_of_one_edit_make_one_effect(world: World) -> None:
    """Four threads resuming the same paused review with the same ``edit`` at once make one
    edited proposal, one approval of it and one effect."""
    import threading

    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    host = LangGraphHost(AGENT, reviewer=REVIEWER)
    edit = {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}}
    barrier = threading.Barrier(4)
    outcomes: list[str] = []
    lock = threading.Lock()

    def resume() -> None:
        barrier.wait(timeout=30)
        answer = answers(driver.decide(paused, host, edit))["call-1"]
        with lock:
            outcomes.append(str(answer.get("outcome", answer.get("error"))))

    threads = [threading.Thread(target=resume) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["performed"] + ["replayed"] * 3
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "proposals") == 2
    assert count_rows(world.store_url, "approvals", "decision = 'granted'") == 1
    assert count_rows(world.store_url, "approvals", "decision = 'denied'") == 1


def test_a_ledger_call_reaching_the_tools_node_is_refused(world: World) -> None:
    """A ledger call handed to the tools node without the review (an edited checkpoint's
    ``Send``) is answered ``not_permitted``: the tool never runs, nothing is written."""
    from langgraph.prebuilt.tool_node import ToolCallRequest

    driver = LangGraphDriver(world.app)
    call = {"name": ACTION, "args": REFUND_30, "id": "call-1", "type": "tool_call"}
    request = ToolCallRequest(tool_call=call, tool=driver.adapter.tool, state={}, runtime=None)
    ran: list[object] = []
    message = driver.adapter.middleware.wrap_tool_call(request, ran.append)
    assert ran == []
    assert tool_json(message.content)["error"]["code"] == "not_permitted"
    assert count_rows(world.store_url, "proposals") == 0
    assert world.receiver.counts().effects == 0


def test_a_resume_while_another_run_answers_is_handed_that_answer_and_performs_nothing(
    world: World,
) -> None:
    """LangGraph hands a resume addressed at the thread's latest checkpoint the writes another
    run already made there. A resume that starts after the first run wrote its answer, before
    that run's next checkpoint, is given the first run's answer (``performed``, the same
    message) and runs nothing: one effect, one attempt, one acceptance in the trail. A resume
    after both ended performs nothing either: it is handed that answer too, or ``replayed``."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    grant = Grant.of(proposal)
    saver = driver.saver
    put_writes, put = saver.put_writes, saver.put
    answered, held, go_on = threading.Event(), threading.Event(), threading.Event()

    def noting_the_answer(*args: Any, **kwargs: Any) -> Any:
        writes = args[1] if len(args) > 1 else kwargs["writes"]
        done = put_writes(*args, **kwargs)
        if any(channel == "messages" for channel, _ in writes):
            answered.set()
        return done

    def held_once_answered(*args: Any, **kwargs: Any) -> Any:
        if answered.is_set() and not held.is_set():
            held.set()  # the first run's answer is written; its next checkpoint waits
            go_on.wait(30)
        return put(*args, **kwargs)

    saver.put_writes = noting_the_answer  # type: ignore[method-assign]
    saver.put = held_once_answered  # type: ignore[method-assign]
    first: dict[str, Any] = {}
    run = threading.Thread(target=lambda: first.update(driver.resume(paused, AGENT, grant)))
    run.start()
    try:
        assert held.wait(30)
        handed = driver.resume(paused, AGENT, grant)
    finally:
        go_on.set()
        run.join(60)
    saver.put_writes, saver.put = put_writes, put  # type: ignore[method-assign]
    assert first["outcome"] == handed["outcome"] == "performed"
    assert handed == first  # the same answer, not a perform of its own
    third = driver.resume(paused, AGENT, grant)  # handed the same answer again, or replayed
    assert third == first or third["outcome"] == "replayed"
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1
    accepted = [event for event, _ in trail(world, proposal) if event.startswith("Provider")]
    assert accepted == ["ProviderAcceptanceConfirmed"]
