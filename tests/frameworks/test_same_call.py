"""A tool call proposed again is the same proposal; other content under its id is a conflict.

Raced by 16 threads and by 4 processes on both backends, counting proposal rows.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, NotFound, OperationIdTaken
from effectledger.callers.frameworks.gate import LedgerGate
from tests.callers.scenarios import (
    AGENT,
    MALLORY,
    OUTSIDER,
    REFUND_30,
    REVIEWER,
    build_world,
    fresh_world,
)
from tests.conftest import count_rows


def test_same_call_returns_the_recorded_proposal(store_url: str, tmp_path: Path) -> None:
    """The same actor, call id and arguments give back one proposal; other arguments conflict."""
    with fresh_world(store_url, tmp_path) as world:
        gate = LedgerGate(world.app, "refund_order", framework="langgraph")
        first = gate.propose(AGENT, "call-1", REFUND_30)
        assert gate.propose(AGENT, "call-1", REFUND_30) == first
        with pytest.raises(OperationIdTaken):
            gate.propose(AGENT, "call-1", {**REFUND_30, "amount_minor": 35})
        other = gate.propose(MALLORY, "call-1", REFUND_30)
        assert other.proposal_id != first.proposal_id
        assert count_rows(store_url, "proposals") == 2
        assert count_rows(store_url, "audit_events", "event_type = 'ProposalRecorded'") == 2


def test_a_call_proposal_is_found_under_its_operation_id_by_its_proposer(
    store_url: str, tmp_path: Path
) -> None:
    """``proposal_for`` reads the proposal recorded under an operation id for its proposer and
    the tenant's reviewers; another actor, another tenant and an id without one find nothing
    (``NotFound``), and the gate's ``recorded`` answers None for them; nothing is written."""
    with fresh_world(store_url, tmp_path) as world:
        gate = LedgerGate(world.app, "refund_order", framework="langgraph")
        first = gate.propose(AGENT, "call-1", REFUND_30, scope="thread-a")
        events = count_rows(store_url, "audit_events")
        assert world.app.proposal_for(AGENT, first.operation_id) == first
        assert world.app.proposal_for(REVIEWER, first) == first
        assert gate.recorded(AGENT, "call-1", "thread-a") == first
        for who, call_id, scope in (
            (MALLORY, "call-1", "thread-a"),
            (OUTSIDER, "call-1", "thread-a"),
            (AGENT, "call-1", "thread-b"),
            (AGENT, "call-2", "thread-a"),
        ):
            assert gate.recorded(who, call_id, scope) is None
        for who in (MALLORY, OUTSIDER):
            with pytest.raises(NotFound):
                world.app.proposal_for(who, first.operation_id)
        assert count_rows(store_url, "audit_events") == events
        assert count_rows(store_url, "proposals") == 1


def test_same_operation_id_without_call_id_stays_taken(store_url: str, tmp_path: Path) -> None:
    """Without a tool-call id, a taken operation id is refused as before."""
    with fresh_world(store_url, tmp_path) as world:
        world.app.propose(AGENT, "refund_order", REFUND_30, operation_id="op-fixed")
        with pytest.raises(OperationIdTaken):
            world.app.propose(AGENT, "refund_order", REFUND_30, operation_id="op-fixed")
        assert count_rows(store_url, "proposals") == 1


def test_sixteen_threads_propose_one_call(store_url: str, tmp_path: Path) -> None:
    """Sixteen threads proposing the same call at once store one proposal, all get its id."""
    with fresh_world(store_url, tmp_path) as world:
        gate = LedgerGate(world.app, "refund_order", framework="langgraph")
        barrier = threading.Barrier(16)
        ids: list[str] = []
        lock = threading.Lock()

        def propose() -> None:
            barrier.wait(timeout=30)
            proposal_id = gate.propose(AGENT, "call-1", REFUND_30).proposal_id
            with lock:
                ids.append(proposal_id)

        threads = [threading.Thread(target=propose) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(ids) == 16
        assert len(set(ids)) == 1
        assert count_rows(store_url, "proposals") == 1


def _propose_in_process(
    store_url: str, directory: str, start: object, out: object, scope: str = ""
) -> None:
    world = build_world(store_url, Path(directory), ManualClock())
    try:
        gate = LedgerGate(world.app, "refund_order", framework="langgraph")
        start.wait(timeout=60)  # type: ignore[attr-defined]
        proposal = gate.propose(
            Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"})),
            "call-1",
            REFUND_30,
            scope=scope,
        )
        out.put(proposal.proposal_id)  # type: ignore[attr-defined]
    finally:
        world.close()


def test_sixteen_threads_in_two_conversations_reusing_one_call_id(
    store_url: str, tmp_path: Path
) -> None:
    """Eight threads propose call-1 in one conversation and eight in another, at once: two
    proposals (one per conversation), each thread gets its conversation's."""
    with fresh_world(store_url, tmp_path) as world:
        gate = LedgerGate(world.app, "refund_order", framework="langgraph")
        barrier = threading.Barrier(16)
        found: list[tuple[str, str]] = []
        lock = threading.Lock()

        def propose(scope: str) -> None:
            barrier.wait(timeout=30)
            proposal_id = gate.propose(AGENT, "call-1", REFUND_30, scope=scope).proposal_id
            with lock:
                found.append((scope, proposal_id))

        scopes = ["thread-a", "thread-b"] * 8
        threads = [threading.Thread(target=propose, args=(scope,)) for scope in scopes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(found) == 16
        by_scope = {scope: {pid for s, pid in found if s == scope} for scope in set(scopes)}
        assert all(len(ids) == 1 for ids in by_scope.values())
        assert by_scope["thread-a"] != by_scope["thread-b"]
        assert count_rows(store_url, "proposals") == 2


@pytest.mark.slow
@pytest.mark.parametrize("scopes", [("",) * 4, ("thread-a", "thread-b") * 2])
def test_four_processes_propose_one_call(
    store_url: str, tmp_path: Path, scopes: tuple[str, ...]
) -> None:
    """Four processes proposing the same call at once store one proposal per conversation,
    and every process of a conversation gets its id."""
    with fresh_world(store_url, tmp_path / "setup"):
        pass  # the schema exists before the racers start
    spawn = multiprocessing.get_context("spawn")
    start, out = spawn.Event(), spawn.Queue()
    processes = [
        spawn.Process(
            target=_propose_in_process,
            args=(store_url, str(tmp_path / f"p{n}"), start, out, scopes[n]),
        )
        for n in range(4)
    ]
    for process in processes:
        (tmp_path / f"p{processes.index(process)}").mkdir()
        process.start()
    start.set()
    ids = [out.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert len(set(ids)) == len(set(scopes))
    assert count_rows(store_url, "proposals") == len(set(scopes))
