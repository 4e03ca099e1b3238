"""Authority under real concurrency: 16 threads and 4 processes, on both backends.

Every check that reads a total and then writes (budget, capacity, approval use, the trail) must
hold when callers race; each test counts the durable rows and the receiver's own effects.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from effectledger import EffectLedger, SimulatedReceiver
from effectledger.authority.capacity import totals_mismatches_in
from effectledger.events.chain import verify_chain
from effectledger.model import EffectResult
from tests.conftest import count_rows
from tests.faults._harness import spawn_all
from tests.races.world import (
    AGENT,
    MALLORY,
    REFUND_30,
    approve_in_process,
    approver,
    build,
    close,
    perform_in_process,
)

T = TypeVar("T")
THREADS = 16
PROCESSES = 4


def race(count: int, call: Callable[[int], T]) -> list[T]:
    """Run ``call(i)`` for ``i < count`` in as many threads, released together."""
    barrier = threading.Barrier(count)
    results: list[T | BaseException | None] = [None] * count

    def one(index: int) -> None:
        barrier.wait()
        try:
            results[index] = call(index)
        except BaseException as exc:  # reported below, with the index
            results[index] = exc

    threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    failures = [result for result in results if isinstance(result, BaseException)]
    assert not failures, f"{len(failures)} call(s) raised, first: {failures[0]!r}"
    return [result for result in results if not isinstance(result, BaseException)]  # type: ignore[misc]


@pytest.fixture
def services(store_url: str, tmp_path: Path) -> Iterator[Callable[[str], EffectLedger]]:
    """Services over one ledger and one receiver file, one per policy asked for."""
    made: list[EffectLedger] = []

    def make(policy: str = "approval") -> EffectLedger:
        made.append(build(store_url, tmp_path, policy))
        return made[-1]

    yield make
    for service in made:
        close(service)


def effects(tmp_path: Path) -> int:
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    try:
        return receiver.counts().effects
    finally:
        receiver.close()


def proposals(service: EffectLedger, count: int, *, approve: bool) -> list[tuple[str, str | None]]:
    """``count`` refund proposals of 30 by the agent, each approved by one reviewer if asked."""
    made: list[tuple[str, str | None]] = []
    for index in range(count):
        arguments = {**REFUND_30, "order_id": f"ord-{2000 + index}"}
        proposal = service.propose(AGENT, "refund_order", arguments)
        approval_id = None
        if approve:
            approval_id = service.approve(
                approver(0), proposal.proposal_id, digest=proposal.digest
            ).approval_id
        made.append((proposal.proposal_id, approval_id))
    return made


def spawn_performs(
    store_url: str, tmp_path: Path, policy: str, calls: list[tuple[str, str, str | None]]
) -> list[tuple[str, str | None, str | None]]:
    """Split ``calls`` over :data:`PROCESSES` spawned processes released together."""
    per_worker = [calls[index::PROCESSES] for index in range(PROCESSES)]
    reports = spawn_all(
        perform_in_process, [(store_url, str(tmp_path), policy, chunk) for chunk in per_worker]
    )
    return [tuple(outcome) for report in reports for outcome in report["outcomes"]]  # type: ignore[misc]


# -- totals that gate admission --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_preauthorized_budget_is_never_overspent(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 racing pre-authorized refunds of 30 against a budget of 100 admit exactly three."""
    service = services("budget")
    made = proposals(service, THREADS, approve=False)
    if mode == "threads":
        outcomes = [
            (r.outcome, r.reason)
            for r in race(THREADS, lambda i: service.perform(AGENT, made[i][0]))
        ]
    else:
        calls = [(AGENT.actor_id, proposal_id, None) for proposal_id, _ in made]
        outcomes = [(o, r) for o, r, _ in spawn_performs(store_url, tmp_path, "budget", calls)]
    assert Counter(outcomes) == {("performed", None): 3, ("denied", "policy_denied"): 13}
    assert count_rows(store_url, "operations") == 3
    assert count_rows(store_url, "approval_consumptions") == 3
    assert effects(tmp_path) == 3


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_capacity_limit_is_never_overspent(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 racing approved refunds of 30 against a pool limit of 100 admit exactly three."""
    service = services("approval")
    service.authority.set_capacity_limit("acme", "refunds", 100)
    made = proposals(service, THREADS, approve=True)
    if mode == "threads":
        outcomes = [
            (r.outcome, r.reason)
            for r in race(
                THREADS, lambda i: service.perform(AGENT, made[i][0], approval=made[i][1])
            )
        ]
    else:
        calls = [(AGENT.actor_id, p, a) for p, a in made]
        outcomes = [(o, r) for o, r, _ in spawn_performs(store_url, tmp_path, "approval", calls)]
    assert Counter(outcomes) == {("performed", None): 3, ("denied", "capacity_exceeded"): 13}
    assert count_rows(store_url, "operations") == 3
    usage = service.authority.capacity(AGENT, "refunds")
    assert (usage.held, usage.committed) == (0, 90)
    assert service.ledger.store.read(totals_mismatches_in) == []
    assert effects(tmp_path) == 3


# -- one proposal, many callers -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_one_proposal_with_many_approvals_spends_exactly_one(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 performs of one proposal, each with its own valid approval, consume one approval: one
    is performed, the others replay the recorded state."""
    service = services("approval")
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approvals = [
        service.approve(approver(i), proposal.proposal_id, digest=proposal.digest).approval_id
        for i in range(THREADS)
    ]
    if mode == "threads":
        results = race(
            THREADS,
            lambda i: service.perform(AGENT, proposal.proposal_id, approval=approvals[i]),
        )
        outcomes = [(r.outcome, r.reason) for r in results]
    else:
        calls = [(AGENT.actor_id, proposal.proposal_id, a) for a in approvals]
        outcomes = [(o, r) for o, r, _ in spawn_performs(store_url, tmp_path, "approval", calls)]
    assert Counter(outcomes) == {("performed", None): 1, ("replayed", None): 15}
    assert count_rows(store_url, "approval_consumptions") == 1
    assert count_rows(store_url, "attempts") == 1
    assert effects(tmp_path) == 1
    verify_chain(service.ledger.events(AGENT, proposal.operation_id))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_exact_replays_report_one_performance_and_no_denial(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 identical performs: one reports performed, 15 replayed, no denial reaches the trail."""
    service = services("approval")
    ((proposal_id, approval_id),) = proposals(service, 1, approve=True)
    if mode == "threads":
        results = race(THREADS, lambda i: service.perform(AGENT, proposal_id, approval=approval_id))
        outcomes = [(r.outcome, str(r.state)) for r in results]
    else:
        calls = [(AGENT.actor_id, proposal_id, approval_id)] * THREADS
        outcomes = [(o, s) for o, _, s in spawn_performs(store_url, tmp_path, "approval", calls)]
    # A replay that reads while the winner's submission is in flight truthfully says so.
    assert Counter(o for o, _ in outcomes) == {"performed": 1, "replayed": 15}
    assert ("performed", "SUCCEEDED") in outcomes
    assert {s for _, s in outcomes} <= {"SUCCEEDED", "IN_PROGRESS"}
    operation_id = service.authority.get_proposal(AGENT, proposal_id).operation_id
    trail = [e.event_type for e in service.ledger.events(AGENT, operation_id)]
    assert "AdmissionDenied" not in trail
    assert count_rows(store_url, "attempts") == 1
    assert count_rows(store_url, "approval_consumptions") == 1
    assert effects(tmp_path) == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_approvers_deciding_at_once_are_all_recorded(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 approvers approving one proposal at once all succeed, chained one after another."""
    service = services("approval")
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    if mode == "threads":
        race(
            THREADS,
            lambda i: service.approve(approver(i), proposal.proposal_id, digest=proposal.digest),
        )
    else:
        per_worker = [list(range(THREADS))[i::PROCESSES] for i in range(PROCESSES)]
        spawn_all(
            approve_in_process,
            [
                (store_url, str(tmp_path), proposal.proposal_id, proposal.digest, chunk)
                for chunk in per_worker
            ],
        )
    assert count_rows(store_url, "approvals") == THREADS
    trail = service.ledger.events(AGENT, proposal.operation_id)
    verify_chain(trail)
    assert [e.event_type for e in trail].count("ApprovalGranted") == THREADS


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_the_proposer_racing_denied_callers_performs_truthfully(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """The proposer's perform, raced by 15 denied performs of another actor, sends once."""
    service = services("approval")
    made = proposals(service, 3, approve=True)
    for proposal_id, approval_id in made:
        calls = [(AGENT.actor_id, proposal_id, approval_id)] + [
            (MALLORY.actor_id, proposal_id, approval_id)
        ] * (THREADS - 1)
        if mode == "threads":

            def call(i: int, calls: list[tuple[str, str, str | None]] = calls) -> EffectResult:
                context = AGENT if calls[i][0] == AGENT.actor_id else MALLORY
                return service.perform(context, calls[i][1], approval=calls[i][2])

            results = race(THREADS, call)
            outcomes = [(r.outcome, r.reason, str(r.state)) for r in results]
        else:
            outcomes = spawn_performs(store_url, tmp_path, "approval", calls)
        assert Counter(outcomes) == {
            ("performed", None, "SUCCEEDED"): 1,
            ("denied", "actor_mismatch", "None"): THREADS - 1,
        }
    assert count_rows(store_url, "attempts") == 3
    assert effects(tmp_path) == 3


def test_a_caller_that_claimed_nothing_never_reports_performed(
    services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """Of 16 threads performing one approved proposal, exactly one reports performed."""
    service = services("approval")
    ((proposal_id, approval_id),) = proposals(service, 1, approve=True)
    results = race(THREADS, lambda i: service.perform(AGENT, proposal_id, approval=approval_id))
    assert sum(r.outcome == "performed" for r in results) == 1
    assert count_rows(store_url, "attempts") == 1
    assert effects(tmp_path) == 1
