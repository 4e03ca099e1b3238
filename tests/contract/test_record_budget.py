"""The result write has its own time budget; a record that runs out of it stays recoverable."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from effectledger import (
    Context,
    LedgerSettings,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
    StorageBusy,
    StorageError,
)
from effectledger.ledger import Ledger
from effectledger.model.operations import PreparedAttempt
from effectledger.store import Store
from effectledger.workers import RecoveryWorker
from tests.conftest import admit, count_rows, raw_sql

BUDGET = timedelta(milliseconds=500)


class _Holder:
    """Another connection's open write transaction that covers the operation ``op-1``."""

    def __init__(self, store_url: str) -> None:
        self._sqlite: sqlite3.Connection | None = None
        self._postgres: psycopg.Connection[tuple[object, ...]] | None = None
        if store_url.startswith("sqlite:"):
            path = urlsplit(store_url).path[1:]
            self._sqlite = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._sqlite.execute("BEGIN IMMEDIATE")  # the whole file, as SQLite locks writers
            return
        parts = urlsplit(store_url)
        query = dict(parse_qsl(parts.query))
        schema = query.pop("schema")
        query.pop("group_commit", None)  # a store option, not libpq's
        self._postgres = psycopg.connect(urlunsplit(parts._replace(query=urlencode(query))))
        self._postgres.execute("SELECT set_config('search_path', %s, false)", (schema,))
        self._postgres.execute(
            "SELECT 1 FROM operations WHERE tenant_id = 'acme' AND operation_id = 'op-1' FOR UPDATE"
        )  # the operation row, as a concurrent writer of it would

    def release(self) -> None:
        """End the transaction and close the connection."""
        if self._sqlite is not None:
            self._sqlite.execute("ROLLBACK")
            self._sqlite.close()
        if self._postgres is not None:
            self._postgres.rollback()
            self._postgres.close()


@contextmanager
def lock_held(store_url: str) -> Iterator[_Holder]:
    """Hold a lock that blocks every write of ``op-1`` until the block ends."""
    holder = _Holder(store_url)
    try:
        yield holder
    finally:
        holder.release()


def submitted(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> tuple[PreparedAttempt, Observation]:
    """``op-1`` admitted, claimed and performed by the receiver, its result not yet recorded."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    observation = receiver.submit(prepared.command, prepared.idempotency_key)
    assert receiver.counts().effects == 1
    return prepared, observation


def test_a_record_blocked_past_its_budget_fails_in_time_and_stays_recoverable(
    store: Store,
    store_url: str,
    clock: ManualClock,
    context: Context,
    receiver: SimulatedReceiver,
) -> None:
    """A blocked record gives up within its budget, writes nothing, and recovery resolves it.

    Checked by order, not by a duration: the lock is let go 12 s after the record starts,
    sooner than the stores' own timeouts would give up (a 5 s busy timeout or a 10 s lock
    timeout, three attempts each), so a record that ignored its budget would succeed then;
    this one has given up before. It did wait for the lock first: at least half its budget.
    """
    ledger = Ledger(store, clock=clock, settings=LedgerSettings(record_budget=BUDGET))
    prepared, observation = submitted(ledger, context, receiver)
    holder = _Holder(store_url)
    let_go = threading.Event()

    def release() -> None:
        let_go.set()
        holder.release()

    releasing = threading.Timer(12.0, release)
    started = time.monotonic()
    releasing.start()
    try:
        with pytest.raises(StorageError) as raised:
            ledger.record(prepared, observation)
        elapsed = time.monotonic() - started
        gave_up_while_held = not let_go.is_set()
    finally:
        releasing.cancel()
        releasing.join()  # a release already under way ends first
        if not let_go.is_set():
            release()
    assert isinstance(raised.value, StorageBusy)
    assert gave_up_while_held
    assert elapsed >= BUDGET.total_seconds() / 2
    # Nothing of the record was written: the attempt is unresolved and awaits recovery.
    assert ledger.status(context, "op-1").state is OperationState.IN_PROGRESS
    assert count_rows(store_url, "audit_events", "operation_id = 'op-1'") == 2
    assert raw_sql(store_url, "SELECT observation FROM attempts WHERE attempt_id = 'a1'") == [
        (None,)
    ]
    clock.advance(31)
    report = RecoveryWorker(ledger, receiver).run_once()
    assert report.resolved == [("acme", "op-1", "SUCCEEDED")]
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)


@pytest.mark.slow
def test_the_budget_ends_with_its_write(
    store: Store,
    store_url: str,
    clock: ManualClock,
    context: Context,
    receiver: SimulatedReceiver,
) -> None:
    """After a budgeted write gave up, an unbudgeted one waits for locks as long as ever."""
    budgeted = Ledger(store, clock=clock, settings=LedgerSettings(record_budget=BUDGET))
    prepared, observation = submitted(budgeted, context, receiver)
    with lock_held(store_url), pytest.raises(StorageBusy):
        budgeted.record(prepared, observation)
    unbudgeted = Ledger(store, clock=clock, settings=LedgerSettings(record_budget=None))
    holder = _Holder(store_url)
    # Held for longer than every retry under a leftover budget would wait, yet far less than
    # the stores' own timeouts (5 s busy timeout, 10 s lock timeout).
    releasing = threading.Timer(4 * BUDGET.total_seconds(), holder.release)
    releasing.start()
    try:
        result = unbudgeted.record(prepared, observation)
    finally:
        releasing.join()
    assert result.state is OperationState.SUCCEEDED
    assert receiver.counts().effects == 1
