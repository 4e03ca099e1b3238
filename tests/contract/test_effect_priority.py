"""A performed effect never reads as failed: sealing yields to it, and a lost result is uncertain.

The receiver's own count of effects is the proof that the effect happened; the ledger's rows
show how it was reported.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from effectledger import (
    Command,
    Context,
    LedgerSettings,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
)
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.acceptance.test_authority_matrix import AGENT, build_world
from tests.conftest import admit, count_rows
from tests.support.app import ledger_over
from tests.support.evidence import SIGNER


class _Holder:
    """Another connection's open write transaction covering every operation row."""

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
        self._postgres.execute("SELECT 1 FROM operations FOR UPDATE")

    def release(self) -> None:
        """End the transaction (waiting for the server) and close the connection."""
        if self._sqlite is not None:
            self._sqlite.execute("ROLLBACK")
            self._sqlite.close()
        if self._postgres is not None:
            self._postgres.rollback()
            self._postgres.close()


class LockAfterSubmit:
    """A real receiver after whose reply another connection holds the lock the record needs."""

    def __init__(self, receiver: SimulatedReceiver, store_url: str) -> None:
        self.receiver = receiver
        self.store_url = store_url
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint
        self.holders: list[_Holder] = []

    def submit(self, command: Command, key: str) -> Observation:
        observation = self.receiver.submit(command, key)
        self.holders.append(_Holder(self.store_url))
        return observation

    def lookup(self, key: str) -> Observation:
        return self.receiver.lookup(key)

    def release(self) -> None:
        for holder in self.holders:
            holder.release()


def test_a_result_write_that_fails_after_the_submission_reads_uncertain(
    store_url: str, tmp_path: Path, clock: ManualClock, context: Context
) -> None:
    """A record blocked past its budget yields IN_PROGRESS (uncertain), never an error."""
    store = open_store(store_url)
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    settings = LedgerSettings(record_budget=timedelta(milliseconds=300))
    ledger = Ledger(store, clock=clock, settings=settings)
    destination = LockAfterSubmit(receiver, store_url)
    try:
        admit(ledger, context, receiver)
        try:
            result = Executor(ledger, destination).execute(context, "op-1")
        finally:
            destination.release()

        assert (result.state, result.uncertain) == (OperationState.IN_PROGRESS, True)
        assert receiver.counts().effects == 1
        assert ledger.get(context, "op-1").state is OperationState.IN_PROGRESS

        clock.advance(settings.recover_after)
        report = RecoveryWorker(ledger, receiver).run_once()

        assert report.resolved == [("acme", "op-1", "SUCCEEDED")]
        counts = receiver.counts()
        assert (counts.submissions, counts.effects) == (1, 1)
    finally:
        store.close()
        receiver.close()


def test_perform_reports_an_unrecorded_result_as_performed_and_uncertain(
    store_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    """Through the service, the caller sees performed + uncertain, and the units stay held."""
    world = build_world(store_url, tmp_path, clock)
    destination = LockAfterSubmit(world.receiver, store_url)
    try:
        service = ledger_over(
            Ledger(
                world.ledger.store,
                clock=clock,
                settings=LedgerSettings(record_budget=timedelta(milliseconds=300)),
            ),
            world.service.registry,
            [destination],
        )
        proposal, approval = world.approved()
        try:
            result = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
        finally:
            destination.release()

        assert (result.outcome, result.state, result.uncertain) == (
            "performed",
            OperationState.IN_PROGRESS,
            True,
        )
        assert world.effects() == 1
        assert world.units() == (30, 0)
    finally:
        world.ledger.store.close()
        world.receiver.close()


@pytest.fixture
def sealers(store_url: str) -> Iterator[threading.Event]:
    """Two sealers looping over the tenant's log, each on its own store, until the event is set."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def loop() -> None:
        store = open_store(store_url)
        sealer = LogSealer(store, SIGNER)
        try:
            while not stop.is_set():
                sealer.seal("acme")
        except BaseException as exc:
            failures.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for thread in threads:
        thread.start()
    yield stop
    stop.set()
    for thread in threads:
        thread.join()
    assert failures == []


@pytest.mark.slow
def test_sealers_looping_beside_a_writer_never_hold_up_its_result_writes(
    sealers: threading.Event,
    store_url: str,
    tmp_path: Path,
    clock: ManualClock,
    context: Context,
) -> None:
    """With two sealers looping, 300 performed effects are all recorded SUCCEEDED in budget."""
    store = open_store(store_url)
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    ledger = Ledger(
        store, clock=clock, settings=LedgerSettings(record_budget=timedelta(milliseconds=500))
    )
    try:
        ids = [f"op-{index}" for index in range(300)]
        for operation_id in ids:
            admit(ledger, context, receiver, operation_id)
        executor = Executor(ledger, receiver)

        states = [executor.execute(context, operation_id).state for operation_id in ids]
        sealers.set()

        assert states == [OperationState.SUCCEEDED] * 300
        assert receiver.counts().effects == 300
        assert count_rows(store_url, "operations", "state = 'SUCCEEDED'") == 300
    finally:
        store.close()
        receiver.close()
