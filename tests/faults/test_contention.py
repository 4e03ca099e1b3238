"""Contention: processes and threads race to admit and claim the same operations.

The safety guarantee is one committed claim per operation and one effect at the destination,
not an exception-free loser: a loser may see ``StorageBusy`` (bounded retries), never a raw
driver error, and never a second attempt.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from effectledger import (
    AdmissionConflict,
    NotFound,
    Operation,
    OperationState,
    SimulatedReceiver,
    StorageBusy,
    StorageError,
)
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.store.sqlite import MAX_ATTEMPTS, SQLiteStore
from effectledger.workers import Executor
from tests.faults import driver
from tests.faults._harness import CONTEXT, START, Survivor, spawn_all, survivor

WORKERS = 4
OPERATIONS = [f"op-{number:03d}" for number in range(50)]
STORAGE_BUSY = ("effectledger.errors.StorageBusy", "storage_busy", MAX_ATTEMPTS)


@pytest.fixture
def receiver_path(tmp_path: Path) -> Path:
    """The simulated receiver's file, shared by every contender."""
    return tmp_path / "receiver.db"


def contend(store_url: str, receiver_path: Path) -> list[dict[str, Any]]:
    """Run :data:`WORKERS` spawned processes that admit and execute every operation."""
    open_lock = multiprocessing.get_context("spawn").Lock()
    return spawn_all(
        driver.contend,
        [(store_url, str(receiver_path), OPERATIONS, START, open_lock)] * WORKERS,
    )


def finish_leftovers(world: Survivor) -> None:
    """Complete what contention losers left: admit/execute the untouched, recover the claimed."""
    for operation_id in OPERATIONS:
        try:
            state = world.ledger.get(CONTEXT, operation_id).state
        except NotFound:  # every admission of it lost to a busy store
            driver.admit(world.ledger, world.receiver, operation_id)
            state = OperationState.READY
        if state is OperationState.READY:
            world.executor.execute(CONTEXT, operation_id)
    world.clock.advance(world.ledger.settings.recover_after)
    world.recovery.run_once(limit=len(OPERATIONS))


def assert_exactly_once(world: Survivor) -> None:
    """Every operation: SUCCEEDED, one attempt row, one effect under its key; nothing else."""
    for operation_id in OPERATIONS:
        facts = world.facts(operation_id)
        assert facts.operation.state is OperationState.SUCCEEDED, operation_id
        assert len(facts.attempts) == 1, operation_id
        assert facts.effects_for_key == 1, operation_id
    counts = world.receiver.counts()
    assert (counts.effects, counts.submissions, counts.conflicts) == (len(OPERATIONS),) * 2 + (0,)


@pytest.mark.slow
def test_four_processes_make_one_attempt_and_one_effect_per_operation(
    store_url: str, receiver_path: Path
) -> None:
    """Four processes racing over 50 operations commit one claim and one effect for each."""
    reports = contend(store_url, receiver_path)
    for report in reports:
        assert all(tuple(error) == STORAGE_BUSY for error in report["errors"]), report["errors"]
        assert len(report["errors"]) <= 2 * len(OPERATIONS)  # at most once per call, no storm
    with survivor(store_url, receiver_path) as world:
        for operation_id in OPERATIONS:  # the executions that ran left nothing unresolved
            states = {report["states"].get(operation_id) for report in reports} - {None}
            assert states <= {"SUCCEEDED", "IN_PROGRESS"}, (operation_id, states)
        finish_leftovers(world)
        assert_exactly_once(world)


@pytest.mark.slow
def test_busy_storm_surfaces_only_storage_busy_and_never_a_second_attempt(
    tmp_path: Path, receiver_path: Path
) -> None:
    """With no busy wait, losers get StorageBusy after bounded retries; claims stay unique."""
    store_url = f"sqlite:///{tmp_path / 'ledger.db'}?busy_timeout_ms=0"
    open_store(store_url).close()  # the schema exists before the race
    reports = contend(store_url, receiver_path)
    errors = [tuple(error) for report in reports for error in report["errors"]]
    assert set(errors) <= {STORAGE_BUSY}, errors
    for report in reports:
        assert len(report["errors"]) <= 2 * len(OPERATIONS)
    with survivor(store_url, receiver_path) as world:
        for operation_id in OPERATIONS:  # before any repair: never two attempts, two effects
            try:
                operation = world.ledger.get(CONTEXT, operation_id)
            except NotFound:
                continue
            assert len(world.ledger.attempts(CONTEXT, operation_id)) <= 1
            assert world.receiver.effects_for(operation.idempotency_key) <= 1
        finish_leftovers(world)
        assert_exactly_once(world)


def test_a_locked_store_raises_storage_busy_after_bounded_retries(
    tmp_path: Path, receiver_path: Path
) -> None:
    """A store that stays locked raises StorageBusy (chained, bounded) and writes nothing."""
    path = tmp_path / "ledger.db"
    store = open_store(f"sqlite:///{path}?busy_timeout_ms=20")
    receiver = SimulatedReceiver(receiver_path, synchronous=driver.RECEIVER_SYNCHRONOUS)
    ledger = Ledger(store)
    driver.admit(ledger, receiver, "op-ready")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        # Both give up while the lock is still held (it is released only below): the retries
        # are bounded, not a wait for the lock. Checked by that order and the attempts made.
        with pytest.raises(StorageBusy) as admitting:
            driver.admit(ledger, receiver, "op-new")
        with pytest.raises(StorageBusy) as executing:
            Executor(ledger, receiver).execute(CONTEXT, "op-ready")
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    try:
        for raised in (admitting.value, executing.value):
            assert raised.code == "storage_busy"
            assert raised.details["attempts"] == MAX_ATTEMPTS
            assert isinstance(raised.__cause__, sqlite3.OperationalError)
        with pytest.raises(NotFound):
            ledger.get(CONTEXT, "op-new")
        assert ledger.get(CONTEXT, "op-ready").state is OperationState.READY
        assert ledger.attempts(CONTEXT, "op-ready") == []
        assert receiver.counts().submissions == 0
    finally:
        store.close()
        receiver.close()


def race(count: int, call: Callable[[int], object]) -> list[object]:
    """Run ``call(i)`` in ``count`` threads released together; return results or exceptions."""
    barrier = threading.Barrier(count)

    def one(index: int) -> object:
        barrier.wait()
        try:
            return call(index)
        except StorageError:
            raise
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def test_matching_admissions_from_threads_resolve_to_one_operation(
    ledger: Ledger, receiver: SimulatedReceiver
) -> None:
    """Eight threads admitting the same request all get the one stored operation."""
    results = race(8, lambda _: driver.admit(ledger, receiver, "op-1"))
    assert all(isinstance(result, Operation) for result in results), results
    keys = {result.idempotency_key for result in results if isinstance(result, Operation)}
    assert len(keys) == 1
    assert ledger.get(CONTEXT, "op-1").version == 1
    assert [event.event_type for event in ledger.events(CONTEXT, "op-1")] == ["OperationAdmitted"]


def test_conflicting_admissions_from_threads_leave_the_winner_unchanged(
    ledger: Ledger, receiver: SimulatedReceiver
) -> None:
    """Racing admissions with two bodies store one; every request that differs is refused."""
    bodies = ["first body", "second body"] * 4
    results = race(len(bodies), lambda i: driver.admit(ledger, receiver, "op-1", body=bodies[i]))
    stored = ledger.get(CONTEXT, "op-1")
    winner = stored.command.arguments["body"]
    for body, result in zip(bodies, results, strict=True):
        if body == winner:
            assert isinstance(result, Operation)
            assert result.idempotency_key == stored.idempotency_key
        else:
            assert isinstance(result, AdmissionConflict)
            assert result.code == "admission_conflict"
            assert result.details["differs"] == ["fingerprint"]
    assert stored.version == 1
    assert [event.event_type for event in ledger.events(CONTEXT, "op-1")] == ["OperationAdmitted"]


def test_a_conflicting_admission_racing_matching_ones_changes_nothing(
    ledger: Ledger, receiver: SimulatedReceiver
) -> None:
    """Against an admitted operation, racing repeats succeed and a changed command is refused."""
    original = driver.admit(ledger, receiver, "op-1")
    bodies = ["", "", "", "changed body", "", "changed body"]
    results = race(len(bodies), lambda i: driver.admit(ledger, receiver, "op-1", body=bodies[i]))
    for body, result in zip(bodies, results, strict=True):
        if body:
            assert isinstance(result, AdmissionConflict)
        else:
            assert result == original
    assert ledger.get(CONTEXT, "op-1") == original
    assert len(ledger.events(CONTEXT, "op-1")) == 1


@pytest.mark.slow
def test_admissions_racing_from_processes_resolve_to_one_row_each(
    store_url: str, receiver_path: Path
) -> None:
    """Four processes (one with another body) admitting 20 ids leave one row and event per id."""
    operation_ids = OPERATIONS[:20]
    bodies = ["", "", "", "another body"]
    reports = spawn_all(
        driver.admit_many,
        [(store_url, str(receiver_path), operation_ids, body, START) for body in bodies],
    )
    with survivor(store_url, receiver_path) as world:
        for operation_id in operation_ids:
            stored = world.facts(operation_id).operation
            winner = stored.command.arguments["body"]
            assert stored.version == 1
            assert world.facts(operation_id).event_types == ["OperationAdmitted"]
            for body, report in zip(bodies, reports, strict=True):
                answer = tuple(report["answers"][operation_id])
                if (body or driver.COMMAND.arguments["body"]) == winner:
                    assert answer == ("admitted", stored.idempotency_key)
                else:
                    assert answer == ("conflict", "admission_conflict")


@pytest.mark.slow
def test_connections_opening_a_new_ledger_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Eight stores opened at once on a brand-new file all open it; none reports it busy."""

    def open_at_once(url: str) -> list[object]:
        return race(8, lambda _: open_store(url))

    for trial in range(60):
        opened = open_at_once(f"sqlite:///{tmp_path / f'new-{trial}.db'}")
        try:
            assert all(isinstance(store, SQLiteStore) for store in opened), opened
        finally:
            for store in opened:
                if isinstance(store, SQLiteStore):
                    store.close()
