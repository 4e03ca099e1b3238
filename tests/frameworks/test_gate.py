"""Replay and tamper through each framework's own pause, on both backends.

Each test pauses a scripted model's refund in the framework's own loop, lets the reviewer
approve the ledger's proposal, and resumes the saved state the way the test names: twice, from
new objects, edited, as another actor, without an identity, after the world moved, at once
from many threads. The receiver's own effect count is the fact checked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

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
from tests.conftest import count_rows
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS, Driver, Paused

pytestmark = [
    pytest.mark.parametrize("framework", FRAMEWORKS),
]


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def paused_and_approved(world: World, framework: str) -> tuple[Driver, Paused, Grant]:
    """The framework paused on a refund of 30; the reviewer approved its proposal."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    return driver, paused, Grant.of(proposal)


def test_resume_twice_performs_once(world: World, framework: str) -> None:
    """The same approved saved state resumed twice, once by new objects, is one effect."""
    driver, paused, grant = paused_and_approved(world, framework)
    first = driver.resume(paused, AGENT, grant)
    again = DRIVERS[framework](world.app) if framework != "langgraph" else driver
    second = again.resume(paused, AGENT, grant)
    assert (first["outcome"], second["outcome"]) == ("performed", "replayed")
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1


def test_edited_saved_state_is_refused(world: World, framework: str) -> None:
    """Arguments edited in the saved state, its own integrity data included, make no effect."""
    driver, paused, grant = paused_and_approved(world, framework)
    result = driver.resume(driver.edited(paused, 3000), AGENT, grant)
    assert (result["outcome"], result["reason"]) == ("denied", "digest_mismatch")
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "operations") == 0


def test_another_actor_or_tenant_on_resume_is_refused(world: World, framework: str) -> None:
    """Another actor or another tenant resuming the approved state acts on nothing: the grant
    names its tenant, so another tenant's identity is stopped at the tenant step
    (``tenant_mismatch``, the direct API's trace, nothing read); a grant naming none reaches the
    ledger, where the proposal is ``not_found`` to that tenant."""
    driver, paused, grant = paused_and_approved(world, framework)
    assert grant.tenant_id == "acme"
    assert driver.resume(paused, MALLORY, grant)["reason"] == "actor_mismatch"
    events = count_rows(world.store_url, "audit_events")
    named = driver.resume(paused, OUTSIDER, grant)
    assert named["reason"] == "tenant_mismatch"
    assert [step[0] for step in named["trace"]] == ["request", "tenant"]
    assert count_rows(world.store_url, "audit_events") == events
    unnamed = Grant(proposal_id=grant.proposal_id, digest=grant.digest)
    assert driver.resume(paused, OUTSIDER, unnamed)["reason"] == "not_found"
    assert world.receiver.counts().effects == 0
    assert driver.resume(paused, AGENT, grant)["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_resume_without_identity_is_refused(world: World, framework: str) -> None:
    """A resume without the host's identity is refused before anything is read or written."""
    driver, paused, grant = paused_and_approved(world, framework)
    events = count_rows(world.store_url, "audit_events")
    result = driver.resume(paused, None, grant)
    assert result["error"]["code"] == "not_authenticated"
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "audit_events") == events


def test_resume_without_grant_is_refused(world: World, framework: str) -> None:
    """A framework approval with no ledger grant for the call performs nothing."""
    driver, paused, _ = paused_and_approved(world, framework)
    result = driver.resume(paused, AGENT, None)
    assert (result["outcome"], result["reason"]) == ("denied", "approval_missing")
    assert world.receiver.counts().effects == 0


@pytest.mark.parametrize("change", ["expired", "stale_resource_version"])
def test_world_moved_between_pause_and_resume(world: World, framework: str, change: str) -> None:
    """An expired proposal or a changed order between pause and resume is never sent."""
    driver, paused, grant = paused_and_approved(world, framework)
    if change == "expired":
        world.clock.advance(timedelta(minutes=16))
    else:
        world.orders.change("acme", "ord-1001")
    result = driver.resume(paused, AGENT, grant)
    assert (result["outcome"], result["reason"]) == ("denied", change)
    assert world.receiver.counts().effects == 0
    assert world.app.capacity(REVIEWER, "refunds").held == 0


def test_concurrent_resumes_make_one_effect(world: World, framework: str) -> None:
    """Eight threads resuming the same approved state at once make exactly one effect.

    LangGraph hands a resume addressed at the thread's latest checkpoint the writes another run
    already made there: a resume that starts between the first run's answer and its next
    checkpoint is given that answer, the same message, not a perform of its own. So for
    LangGraph every ``performed`` must be that one answer; elsewhere there is one."""
    driver, paused, grant = paused_and_approved(world, framework)
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    performed: set[str] = set()
    lock = threading.Lock()

    def resume() -> None:
        own = DRIVERS[framework](world.app) if framework != "langgraph" else driver
        barrier.wait(timeout=30)
        answer = own.resume(paused, AGENT, grant)
        with lock:
            outcomes.append(str(answer.get("outcome")))
            if answer.get("outcome") == "performed":
                performed.add(json.dumps(answer, sort_keys=True))

    threads = [threading.Thread(target=resume) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if framework == "langgraph":
        assert len(outcomes) == 8
        assert set(outcomes) <= {"performed", "replayed"}
        assert len(performed) == 1, performed
    else:
        assert sorted(outcomes) == ["performed"] + ["replayed"] * 7
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1


def test_identity_edited_in_saved_state_acts_as_the_host(world: World, framework: str) -> None:
    """An identity written into the saved state is ignored: the call acts as the host's actor."""
    driver, paused, grant = paused_and_approved(world, framework)
    forged = {"tenant_id": "acme", "actor_id": "mallory", "roles": ["approver"]}
    if framework == "maf":
        state = json.loads(paused.saved)
        state["state"]["effectledger_context"] = forged
        paused = Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)
    elif framework == "openai_agents":
        state = json.loads(paused.saved)
        state["context"]["context"] = {"effectledger_context": forged, **forged}
        paused = Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)
    elif framework == "adk":
        state = json.loads(paused.saved)
        state["state"]["effectledger_context"] = forged
        for event in state["events"]:
            event["custom_metadata"] = {"effectledger_context": forged}
        paused = Paused(json.dumps(state), paused.call_id, paused.handle, paused.scope)
    # LangGraph and Pydantic AI keep no identity in their saved state: runtime.context / deps
    result = driver.resume(paused, AGENT, grant)
    assert result["outcome"] == "performed"
    assert world.app.operation(AGENT, result["operation_id"]).requester_id == AGENT.actor_id
    assert world.receiver.counts().effects == 1
