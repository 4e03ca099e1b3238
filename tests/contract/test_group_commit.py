"""Group commit's contract on both backends: one batch, one commit, each write its own outcome.

The first write holds the batch leader's place until 15 others are queued behind it, so the next
batch holds exactly those 15: bodies that succeed, bodies that raise, a body the database refuses
(a duplicate key, after another member of the same batch inserted it). Each check reads the rows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from effectledger import ConstraintViolation, Context, SimulatedReceiver, StorageBusy
from effectledger.ledger import Ledger
from effectledger.store import Store, Transaction, open_store
from effectledger.store.batching import GroupCommitter
from tests.conftest import admit
from tests.faults.test_group_commit_crash import grouped

WRITERS = 16


@pytest.fixture
def grouped_store(store_url: str) -> Iterator[Store]:
    """The test's store opened with group commit on."""
    opened = open_store(grouped(store_url))
    yield opened
    opened.close()


def _committer(store: Store) -> GroupCommitter:
    group = store._group  # type: ignore[attr-defined]
    assert isinstance(group, GroupCommitter)
    return group


def _event(ledger: Ledger, context: Context, index: int) -> dict[str, Any]:
    """A copy of op-1's first audit event with its own id and sequence."""
    (first,) = [event for event in ledger.events(context, "op-1") if event.sequence == 1]
    return {
        "event_id": f"evt-copy-{index}",
        "tenant_id": first.tenant_id,
        "operation_id": first.operation_id,
        "attempt_id": first.attempt_id,
        "sequence": 100 + index,
        "actor": first.actor,
        "event_type": first.event_type,
        "recorded_us": 1,
        "evidence_reference": None,
        "details_json": "{}",
        "observation_id": None,
        "prev_hash": first.prev_hash,
        "event_hash": first.event_hash,
        "trail_tag": None,
    }


def _hold_then_race(
    store: Store, bodies: list[Callable[[Transaction], object]], budgets: list[float | None]
) -> list[object]:
    """Run body 0 first, alone, until every other write is queued; return each outcome."""
    group = _committer(store)
    others = len(bodies) - 1

    def first(tx: Transaction) -> object:
        deadline = time.monotonic() + 30
        while len(group._queue) < others and time.monotonic() < deadline:
            time.sleep(0.005)
        return bodies[0](tx)

    results: list[object] = [None] * len(bodies)

    def write(index: int) -> None:
        body = first if index == 0 else bodies[index]
        try:
            results[index] = store.write(body, label="test", budget_s=budgets[index])
        except Exception as exc:
            results[index] = exc

    threads = [threading.Thread(target=write, args=(0,))]
    threads[0].start()
    while not group._leading:  # the first write leads, alone, before the others start
        time.sleep(0.001)
    threads += [threading.Thread(target=write, args=(index,)) for index in range(1, len(bodies))]
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_a_batch_commits_its_good_writes_once_and_each_failure_alone(
    grouped_store: Store, receiver: SimulatedReceiver, context: Context
) -> None:
    """15 writes share one commit: those that raise, or that the database refuses, come back
    with their own error and leave no row; every other write's row is stored exactly once."""
    ledger = Ledger(grouped_store)
    admit(ledger, context, receiver)
    before = len(ledger.events(context, "op-1"))

    def body(index: int) -> Callable[[Transaction], object]:
        row = _event(ledger, context, 1 if index == WRITERS - 1 else index)

        def run(tx: Transaction) -> object:
            tx.run("event_insert", row)
            if index % 4 == 3 and index != WRITERS - 1:
                raise RuntimeError(f"body {index} changed its mind")
            return index

        return run

    results = _hold_then_race(grouped_store, [body(i) for i in range(WRITERS)], [None] * WRITERS)
    group = _committer(grouped_store)
    assert (group.batches, group.grouped) == (1, 11)  # 15 queued: 3 raised, 1 refused
    refused = results[WRITERS - 1]
    assert isinstance(refused, ConstraintViolation), refused  # event 1's id, already in the batch
    raised = [i for i, result in enumerate(results) if isinstance(result, RuntimeError)]
    assert raised == [3, 7, 11]
    kept = [i for i, result in enumerate(results) if result == i]
    assert kept == [i for i in range(WRITERS - 1) if i % 4 != 3]
    sequences = sorted(e.sequence for e in ledger.events(context, "op-1") if e.sequence >= 100)
    assert sequences == [100 + i for i in kept]
    assert len(ledger.events(context, "op-1")) == before + len(kept)


def test_a_queued_write_whose_budget_runs_out_writes_nothing(
    grouped_store: Store, receiver: SimulatedReceiver, context: Context
) -> None:
    """A write with a 50 ms budget queued behind a longer batch fails StorageBusy, unwritten,
    while the write without a budget queued beside it commits."""
    ledger = Ledger(grouped_store)
    admit(ledger, context, receiver)

    rows = [_event(ledger, context, index) for index in range(3)]

    def slow(tx: Transaction) -> object:
        time.sleep(0.3)
        return tx.run("event_insert", rows[0])

    def insert(index: int) -> Callable[[Transaction], object]:
        return lambda tx: tx.run("event_insert", rows[index])

    results = _hold_then_race(grouped_store, [slow, insert(1), insert(2)], [None, 0.05, None])
    assert isinstance(results[1], StorageBusy), results[1]
    assert results[0] == results[2] == 1
    sequences = sorted(e.sequence for e in ledger.events(context, "op-1") if e.sequence >= 100)
    assert sequences == [100, 102]
