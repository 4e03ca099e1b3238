"""Reviewers racing on one proposal through ``decide``: a denial stays final, one effect at most.

``decide`` reads the proposal's standing, then reads it again under the proposal's trail lock as
it records the decision: racers are serialized by that lock and see each other's decisions, so
a proposal that needs one approval records exactly one grant. 16 threads and 4
processes decide at once on both backends, then the proposer performs: the durable facts (the
decision rows, the operation rows, the receiver's own count) must agree with the decisions.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import (
    ApprovalRefused,
    EffectLedger,
    EffectOutcome,
    SimulatedReceiver,
    connect,
)
from effectledger.model import Context
from tests.acceptance.app_support import AGENT, REFUND, declare_refund
from tests.conftest import count_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(store_url: str) -> Iterator[EffectLedger]:
    """The facade over the test's store, on the real clock."""
    with connect(store_url) as opened:
        yield opened


def _reviewer(number: int) -> Context:
    return Context(tenant_id="acme", actor_id=f"reviewer-{number}", roles=frozenset({"approver"}))


def _check(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str, proposal_id: str
) -> None:
    denials = count_rows(store_url, "approvals", "decision = 'denied'")
    result = app.perform(AGENT, proposal_id)
    again = app.perform(AGENT, proposal_id)
    assert denials <= 1  # after the first denial every decision is refused
    if denials:
        assert result.outcome is EffectOutcome.DENIED
        assert count_rows(store_url, "operations") == 0
        assert receiver.counts().effects == 0
    else:
        assert result.outcome is EffectOutcome.PERFORMED
        assert again.outcome is EffectOutcome.REPLAYED
        assert count_rows(store_url, "operations") == 1
        assert receiver.counts().effects == 1


@pytest.mark.parametrize("deny_every", [0, 4])
def test_sixteen_threads_decide_one_proposal(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str, deny_every: int
) -> None:
    """16 reviewers deciding at once leave one grant or one denial at most, and one effect."""
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    barrier = threading.Barrier(16)
    outcomes: list[str] = []

    def decide(number: int) -> None:
        approve = not (deny_every and number % deny_every == 0)
        barrier.wait()
        try:
            made = app.decide(
                _reviewer(number),
                proposal.proposal_id,
                digest=proposal.digest,
                approve=approve,
                reason="race",
            )
            outcomes.append("granted" if made.granted else "denied")
        except ApprovalRefused as exc:
            outcomes.append(str(exc.details["reason"]))

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 16
    assert set(outcomes) <= {"granted", "denied", "proposal_approved", "proposal_denied"}
    assert outcomes.count("granted") == count_rows(store_url, "approvals", "decision = 'granted'")
    assert outcomes.count("denied") == count_rows(store_url, "approvals", "decision = 'denied'")
    assert "granted" in outcomes or "denied" in outcomes
    assert count_rows(store_url, "approvals", "decision = 'granted'") <= 1  # it needs one
    if not deny_every:
        assert outcomes.count("granted") == 1
        assert outcomes.count("proposal_approved") == 15
    _check(app, receiver, store_url, proposal.proposal_id)


@pytest.mark.slow
def test_four_processes_decide_one_proposal(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Four reviewer processes, two approving and two denying, leave one final outcome."""
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.races.desk_decider",
                store_url,
                str(receiver.path),
                proposal.proposal_id,
                proposal.digest,
                f"reviewer-{number}",
                "approve" if number % 2 else "deny",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for number in range(4)
    ]
    outcomes = [worker.communicate(timeout=120)[0].strip() for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outcomes
    assert set(outcomes) <= {"granted", "denied", "proposal_approved", "proposal_denied"}
    assert outcomes.count("denied") == count_rows(store_url, "approvals", "decision = 'denied'")
    assert outcomes.count("granted") == count_rows(store_url, "approvals", "decision = 'granted'")
    assert outcomes.count("granted") <= 1  # the policy needs one approval: never a second
    _check(app, receiver, store_url, proposal.proposal_id)
