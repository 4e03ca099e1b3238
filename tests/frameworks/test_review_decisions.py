"""What a reviewer's decisions do through each framework's own loop, on both backends.

A real agent of each framework with a scripted offline model: a batch in which the framework
approves one call and rejects the other performs the first once and never the second; a resume
without the grant is refused and the same saved pause resumed with the right grant performs
once; a reviewer's denial in the ledger reaches the model with its reason, in the tool result
the model is given on its next turn. The receiver's own count of effects is the fact checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS

SECOND = {**REFUND_30, "order_id": "ord-2002", "amount_minor": 40}
REASON = "the order was refunded by bank transfer already"

pytestmark = pytest.mark.parametrize("framework", FRAMEWORKS)


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def test_a_batch_with_one_call_approved_and_one_rejected_in_the_framework(
    world: World, framework: str
) -> None:
    """One model turn makes two calls; both are proposed and approved in the ledger, and the
    framework's resume approves the first and rejects the second: one effect, the first's; the
    second is never admitted and the model reads the rejection, with its reason where the
    framework carries one (MAF's rejection is its own fixed words)."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause_batch(AGENT, [("call-1", REFUND_30), ("call-2", SECOND)])
    proposals = driver.propose_batch(AGENT, paused)
    assert sorted(proposals) == ["call-1", "call-2"]
    for proposal in proposals.values():
        world.app.approve(REVIEWER, proposal)
    answers = driver.resume_batch(
        paused,
        AGENT,
        {"call-1": Grant.of(proposals["call-1"])},
        {"call-2": "one refund per order"},
        reviewer=REVIEWER,
    )
    assert answers["call-1"]["outcome"] == "performed"
    assert answers["call-2"].get("outcome") != "performed"
    said = "rejected" if framework == "maf" else "one refund per order"
    assert said in str(answers["call-2"])
    assert any(said in text for text in driver.shown)
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "operations") == 1
    operation = world.app.operation(AGENT, answers["call-1"]["operation_id"])
    assert operation.proposal_id == proposals["call-1"].proposal_id
    assert world.app.capacity(REVIEWER, "refunds").committed == REFUND_30["amount_minor"]


def test_a_resume_without_a_grant_then_with_the_right_one_performs_once(
    world: World, framework: str
) -> None:
    """The framework approves before the host has the ledger's grant: ``approval_missing``,
    nothing sent; the same saved pause resumed with the grant performs once, and again
    replays."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    early = driver.resume(paused, AGENT, None)
    assert (early["outcome"], early["reason"]) == ("denied", "approval_missing")
    assert world.receiver.counts().submissions == 0
    grant = Grant.of(proposal)
    assert driver.resume(paused, AGENT, grant)["outcome"] == "performed"
    assert driver.resume(paused, AGENT, grant)["outcome"] == "replayed"
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1


def test_a_ledger_denial_reaches_the_model_with_its_reason(world: World, framework: str) -> None:
    """The reviewer denies the proposal in the ledger with a reason; the framework's approved
    resume is ``denied`` / ``approval_denied`` with the reason as ``note``, and the model's
    next turn is given that result; nothing is admitted or sent."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.deny(REVIEWER, proposal, reason=REASON)
    answer = driver.resume(paused, AGENT, Grant.of(proposal))
    assert (answer["outcome"], answer["reason"], answer["note"]) == (
        "denied",
        "approval_denied",
        REASON,
    )
    assert any(REASON in text and "approval_denied" in text for text in driver.shown)
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().submissions == 0
