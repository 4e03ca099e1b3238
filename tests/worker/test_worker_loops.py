"""The worker's loops in one process: dispatch, recovery, sealing, threads, a graceful stop.

Each test checks the durable facts: operation states, attempt rows, audit events and the
receiver's own count of submissions and effects.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import InvalidInput, ManualClock, OperationState
from effectledger.audit.keys.signers import Signer
from effectledger.workers import Worker, WorkerSettings
from tests.acceptance.test_authority_matrix import REVIEWER
from tests.conftest import count_rows
from tests.worker.support import LOOKUP_WINDOW, HeldDestination, Refunds, refunds, wait_until

FAST = {"dispatch_interval": 0.01, "recovery_interval": 0.01, "seal_interval": None}


@pytest.fixture
def clock() -> ManualClock:
    """The world's clock: it moves only when a test says so."""
    return ManualClock()


@pytest.fixture
def world(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Refunds]:
    """The refund application over a fresh store, with the manual clock."""
    made = refunds(store_url, tmp_path, clock=clock)
    yield made
    made.close()


def test_one_pass_dispatches_ready_work_and_reconciles_due_work(
    world: Refunds, clock: ManualClock
) -> None:
    """run_once performs each READY refund once and settles each lost reply by lookup."""
    ready = world.ready(3)
    lost = world.uncertain(2)
    clock.advance(LOOKUP_WINDOW)

    done = Worker(world.app, WorkerSettings(**FAST)).run_once()

    assert done == {"dispatch": 3, "recovery": 2}
    assert world.states(ready + lost) == [OperationState.SUCCEEDED] * 5
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (5, 5)
    assert count_rows(world.store_url, "attempts") == 5
    assert world.events("ReconciliationStarted") == 2


def test_sixteen_threads_per_loop_do_each_operation_once(
    world: Refunds, clock: ManualClock
) -> None:
    """16 dispatch and 16 recovery threads in small batches submit and look up each once."""
    ready = world.ready(48)
    lost = world.uncertain(16)
    clock.advance(LOOKUP_WINDOW)
    settings = WorkerSettings(dispatch_threads=16, recovery_threads=16, batch=2, **FAST)
    worker = Worker(world.app, settings)

    worker.start()
    try:
        wait_until(lambda: set(world.states(ready + lost)) == {OperationState.SUCCEEDED})
    finally:
        worker.stop()
        assert worker.join(timeout=30)

    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (64, 64)
    assert count_rows(world.store_url, "attempts") == 64
    assert world.events("AttemptPrepared") == 64
    assert world.events("ReconciliationStarted") == 16
    assert worker.totals["dispatch"].items == 48
    assert worker.totals["recovery"].resolved == 16
    usage = world.app.capacity(REVIEWER, "refunds")
    assert (usage.held, usage.committed) == (0, 64 * 30)


def test_stop_finishes_the_operation_in_hand_and_starts_nothing_new(
    store_url: str, tmp_path: Path
) -> None:
    """A stop during a submission lets it be recorded; the other READY refunds stay untouched."""
    held: list[HeldDestination] = []

    def hold(receiver: object) -> HeldDestination:
        made = HeldDestination(receiver)  # type: ignore[arg-type]
        held.append(made)
        return made

    world = refunds(store_url, tmp_path, destination=hold)
    try:
        ready = world.ready(3)
        worker = Worker(world.app, WorkerSettings(batch=1, **FAST))
        worker.start()
        assert held[0].entered.wait(30)
        worker.stop()
        held[0].release.set()
        assert worker.join(timeout=30)

        states = sorted(state.value for state in world.states(ready))
        assert states == ["READY", "READY", "SUCCEEDED"]
        assert count_rows(store_url, "attempts") == 1
        assert world.receiver.counts().effects == 1
    finally:
        world.close()


def test_the_sealing_loop_seals_every_tenant_with_a_key_and_is_off_without(
    world: Refunds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a log key sealing is off and nothing is sealed; with one, every event is sealed."""
    monkeypatch.delenv("EFFECTLEDGER_LOG_KEY", raising=False)
    world.ready(2)
    settings = WorkerSettings(dispatch_interval=0.01, recovery_interval=0.01, seal_interval=0.01)

    assert "seal" not in Worker(world.app, settings).run_once()
    assert count_rows(world.store_url, "log_entries") == 0

    signed = type(world.app)(world.app.store, signer=Signer("log.example/worker", bytes(range(32))))
    signed.register(world.app.registry.get("refund_order"), world.receiver)
    sealed = Worker(signed, settings).run_once()["seal"]
    events = count_rows(world.store_url, "audit_events")
    assert sealed == events > 0
    assert count_rows(world.store_url, "log_entries") == events


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("dispatch_interval", 0),
        ("recovery_interval", -1.0),
        ("seal_interval", float("nan")),
        ("dispatch_threads", -1),
        ("recovery_threads", 1.5),
        ("batch", 0),
        ("backoff_max", 0.1),
    ],
)
def test_bad_worker_settings_are_refused(field: str, value: object) -> None:
    """A non-positive interval, a bad thread count, batch or back-off bound is invalid_input."""
    with pytest.raises(InvalidInput) as raised:
        WorkerSettings(**{field: value})  # type: ignore[arg-type]
    assert raised.value.details["field"] == field


def test_a_failing_pass_never_ends_its_loop(world: Refunds) -> None:
    """A pass that raises an unexpected error is counted and the loop goes on to the next."""
    ready = world.ready(1)
    calls = threading.Semaphore(0)
    original = world.app.dispatch_ready
    failures = iter([RuntimeError("boom")])

    def flaky(*, limit: int = 100, claim_batch: int = 1) -> list[object]:
        calls.release()
        for failure in failures:
            raise failure
        return original(limit=limit, claim_batch=claim_batch)  # type: ignore[return-value]

    world.app.dispatch_ready = flaky  # type: ignore[method-assign]
    worker = Worker(world.app, WorkerSettings(recovery_threads=0, **FAST))
    worker.start()
    try:
        wait_until(lambda: world.states(ready) == [OperationState.SUCCEEDED])
    finally:
        worker.stop()
        assert worker.join(timeout=30)
    assert worker.totals["dispatch"].errors == 1
    assert world.receiver.counts().effects == 1
