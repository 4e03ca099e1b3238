"""Unknown outcomes: a cancelled caller and a failed result write never lose or repeat an effect.

The destination is the real simulated receiver, slowed with ``reply_delay_s`` where the test
needs a caller to give up mid-call. A result write is made to fail for real: an SQLite trigger
installed in the test's own database refuses the confirmation event, so the record transaction
rolls back exactly as it would on a storage outage.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from effectledger import (
    Context,
    DispatchResult,
    EffectLedger,
    LedgerSettings,
    ManualClock,
    OperationState,
    SimulatedReceiver,
)
from effectledger.audit import verify_chain
from effectledger.callers.tools.dispatch import DispatchTool
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import admit

REPLY_DELAY_S = 0.5
REFUSE_CONFIRMATION = """
CREATE TRIGGER refuse_confirmation BEFORE INSERT ON audit_events
WHEN NEW.event_type = 'ProviderAcceptanceConfirmed'
BEGIN
    SELECT RAISE(ABORT, 'the result store is unavailable');
END;
"""

Dispatch = Callable[[Executor, Context], Awaitable[DispatchResult]]


def _through_executor(executor: Executor, context: Context) -> Awaitable[DispatchResult]:
    return executor.execute_async(context, "op-1")


def _through_tool(executor: Executor, context: Context) -> Awaitable[DispatchResult]:
    app = EffectLedger(executor.ledger, destinations=[executor.destination])
    return DispatchTool(app, context, "op-1").invoke_async()


@pytest.fixture
def slow_receiver(tmp_path: Path) -> Iterator[SimulatedReceiver]:
    """A receiver that performs the effect at once and replies :data:`REPLY_DELAY_S` later."""
    made = SimulatedReceiver(
        tmp_path / "slow-receiver.db", reply_delay_s=REPLY_DELAY_S, synchronous="NORMAL"
    )
    yield made
    made.close()


async def cancel_during_reply(
    dispatch: Dispatch, executor: Executor, context: Context, receiver: SimulatedReceiver
) -> list[DispatchResult | BaseException]:
    """Cancel the awaiting caller once the effect is performed, then await the worker thread.

    Returns what the dispatch's own task ended with (a result or an exception).
    """
    caller = asyncio.ensure_future(dispatch(executor, context))
    deadline = time.monotonic() + 10
    while receiver.counts().submissions == 0:  # the effect is committed; its reply is pending
        assert time.monotonic() < deadline, "the dispatch never reached the receiver"
        await asyncio.sleep(0.005)
    assert executor.ledger.status(context, "op-1").state is OperationState.IN_PROGRESS
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert caller.cancelled()
    # The shielded dispatch goes on in its thread; wait for it rather than for a time window.
    dispatching = asyncio.all_tasks() - {asyncio.current_task()}
    assert len(dispatching) == 1
    ended: list[DispatchResult | BaseException] = await asyncio.gather(
        *dispatching, return_exceptions=True
    )
    return ended


@pytest.mark.parametrize("dispatch", [_through_executor, _through_tool], ids=["executor", "tool"])
def test_cancelled_async_dispatch_still_records_the_outcome(
    dispatch: Dispatch, ledger: Ledger, slow_receiver: SimulatedReceiver, context: Context
) -> None:
    """A caller cancelled while the destination is slow does not stop the record of its reply."""
    admit(ledger, context, slow_receiver)
    executor = Executor(ledger, slow_receiver)

    ended = asyncio.run(cancel_during_reply(dispatch, executor, context, slow_receiver))

    assert [result.state for result in ended if isinstance(result, DispatchResult)] == [
        OperationState.SUCCEEDED
    ]
    operation = ledger.get(context, "op-1")
    events = ledger.events(context, "op-1")
    verify_chain(events, head=operation.last_event_hash)
    assert operation.state is OperationState.SUCCEEDED
    assert len(ledger.attempts(context, "op-1")) == 1
    assert [event.event_type for event in events] == [
        "OperationAdmitted",
        "AttemptPrepared",
        "ProviderAcceptanceConfirmed",
    ]
    counts = slow_receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert executor.execute(context, "op-1").state is OperationState.SUCCEEDED
    assert slow_receiver.counts().submissions == 1


def refuse_confirmations(path: Path) -> None:
    """Install a real trigger that makes every ``ProviderAcceptanceConfirmed`` insert fail."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.executescript(REFUSE_CONFIRMATION)
    finally:
        connection.close()


def assert_recoverable_then_reconciled(
    ledger: Ledger,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
    settings: LedgerSettings,
) -> None:
    """The attempt is IN_PROGRESS with no observation; recovery by lookup makes it SUCCEEDED."""
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.IN_PROGRESS
    assert [attempt.observation for attempt in ledger.attempts(context, "op-1")] == [None]
    assert [event.event_type for event in ledger.events(context, "op-1")] == [
        "OperationAdmitted",
        "AttemptPrepared",
    ]
    assert receiver.effects_for(operation.idempotency_key) == 1

    repeat = Executor(ledger, receiver).execute(context, "op-1")
    assert repeat.state is OperationState.IN_PROGRESS
    assert repeat.uncertain
    assert receiver.counts().submissions == 1

    clock.advance(settings.recover_after)
    report = RecoveryWorker(ledger, receiver).run_once()
    assert report.resolved == [(context.tenant_id, "op-1", "SUCCEEDED")]
    operation = ledger.get(context, "op-1")
    events = ledger.events(context, "op-1")
    verify_chain(events, head=operation.last_event_hash)
    assert operation.state is OperationState.SUCCEEDED
    assert [event.event_type for event in events][-2:] == [
        "ReconciliationStarted",
        "ProviderAcceptanceReconciled",
    ]
    assert len(ledger.attempts(context, "op-1")) == 1
    counts = receiver.counts()
    assert (counts.submissions, counts.lookups, counts.effects) == (1, 1, 1)


def test_a_failed_result_write_leaves_the_attempt_in_progress_and_recoverable(
    tmp_path: Path,
    receiver: SimulatedReceiver,
    clock: ManualClock,
    settings: LedgerSettings,
    context: Context,
) -> None:
    """When the result cannot be written the caller reads uncertain; recovery finds the effect."""
    path = tmp_path / "ledger.db"
    store = open_store(f"sqlite:///{path}")
    try:
        ledger = Ledger(store, clock=clock, settings=settings)
        admit(ledger, context, receiver)
        refuse_confirmations(path)

        result = Executor(ledger, receiver).execute(context, "op-1")

        # The effect may have happened: an uncertain state, never an error that reads as failed.
        assert (result.state, result.uncertain) == (OperationState.IN_PROGRESS, True)
        assert receiver.counts().effects == 1

        assert_recoverable_then_reconciled(ledger, clock, receiver, context, settings)
    finally:
        store.close()


def test_a_cancelled_dispatch_whose_result_write_fails_stays_recoverable(
    tmp_path: Path,
    slow_receiver: SimulatedReceiver,
    clock: ManualClock,
    settings: LedgerSettings,
    context: Context,
) -> None:
    """Cancellation plus a failed write: the thread ends uncertain and the effect is recovered."""
    path = tmp_path / "ledger.db"
    store = open_store(f"sqlite:///{path}")
    try:
        ledger = Ledger(store, clock=clock, settings=settings)
        admit(ledger, context, slow_receiver)
        refuse_confirmations(path)
        executor = Executor(ledger, slow_receiver)

        scenario = cancel_during_reply(_through_executor, executor, context, slow_receiver)
        ended = asyncio.run(scenario)

        assert [type(result) for result in ended] == [DispatchResult]
        assert [getattr(result, "state", None) for result in ended] == [OperationState.IN_PROGRESS]
        assert_recoverable_then_reconciled(ledger, clock, slow_receiver, context, settings)
    finally:
        store.close()
