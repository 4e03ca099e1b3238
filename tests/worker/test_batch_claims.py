"""A worker that claims in batches: each operation claimed, sent and recorded once, the batch's
claims in one transaction and its records in another, every rule of a lone claim kept.

Each test checks the durable facts on both backends: operation states, attempt rows, audit
events, capacity totals and the receiver's own count of submissions and effects.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from effectledger import InvalidInput, LedgerSettings, ManualClock, OperationState
from effectledger.model.canonical import COMMAND_VERSION, canonical_bytes, digest_bytes
from effectledger.workers import RecoveryWorker, Worker, WorkerSettings
from tests.acceptance.test_authority_matrix import REVIEWER
from tests.conftest import count_rows, raw_sql
from tests.worker.batch_world import Counted, Holding, Orders, orders_world, refusing_outcome

TRAIL = [
    "ProposalRecorded",
    "ApprovalGranted",
    "OperationAdmitted",
    "AttemptPrepared",
    "ProviderAcceptanceConfirmed",
]


@pytest.fixture
def clock() -> ManualClock:
    """The world's clock: it moves only when a test says so."""
    return ManualClock()


@pytest.fixture
def world(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Orders]:
    """The refund application over a fresh store, its receiver taking four sends at once."""
    made = orders_world(store_url, tmp_path, clock=clock)
    yield made
    made.close()


def test_a_batch_claims_sends_and_records_each_operation_once(world: Orders) -> None:
    """40 READY refunds in batches of 16: three claim transactions and three record
    transactions, one attempt, one AttemptPrepared and one outcome event each, one effect each."""
    ready = world.ready(40)
    world.watch_writes()

    results = world.app.dispatch_ready(limit=100, claim_batch=16)

    assert [result.state for result in results] == [OperationState.SUCCEEDED] * 40
    assert sorted(result.operation_id for result in results) == sorted(ready)
    assert sorted(world.writes) == ["claim_batch"] * 3 + ["record_batch"] * 3  # 16 + 16 + 8
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (40, 40)
    assert count_rows(world.store_url, "attempts") == 40
    for operation_id in ready:
        assert world.event_types(operation_id) == TRAIL
        assert count_rows(world.store_url, "attempts", f"operation_id = '{operation_id}'") == 1


def test_a_batch_of_one_is_the_per_operation_path(world: Orders) -> None:
    """claim_batch=1 claims and records each operation in a transaction of its own, as before
    batches, and leaves the same trail a batch leaves."""
    ready = world.ready(3)
    world.watch_writes()

    results = world.app.dispatch_ready(limit=100, claim_batch=1)

    assert [result.state for result in results] == [OperationState.SUCCEEDED] * 3
    assert world.writes == ["claim", "record"] * 3
    assert [world.event_types(operation_id) for operation_id in ready] == [TRAIL] * 3
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (3, 3)


def test_stale_operations_of_a_batch_are_released_and_never_sent(world: Orders) -> None:
    """Refunds whose order changed since approval are RELEASED in the batch's transaction with
    their reason and their units freed; the others are performed; none of them is sent."""
    ready = world.ready(12)
    for number in (2, 5, 11):
        world.orders.change("acme", f"ord-{number:07d}")

    results = world.app.dispatch_ready(limit=100, claim_batch=12)

    stale = {ready[number] for number in (2, 5, 11)}
    states = dict(zip(ready, world.states(ready), strict=True))
    assert {op for op, state in states.items() if state is OperationState.RELEASED} == stale
    assert {op for op, state in states.items() if state is OperationState.SUCCEEDED} == (
        set(ready) - stale
    )
    assert len(results) == 12
    for operation_id in stale:
        (event,) = [
            event
            for event in world.app.events(REVIEWER, operation_id)
            if event.event_type == "OperationReleased"
        ]
        assert event.details["reason"] == "stale_resource_version"
        assert count_rows(world.store_url, "attempts", f"operation_id = '{operation_id}'") == 0
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (9, 9)
    usage = world.app.capacity(REVIEWER, "refunds")
    assert (usage.held, usage.committed, usage.freed) == (0, 9 * 30, 3 * 30)


def test_a_tampered_operation_of_a_batch_is_left_ready_and_never_sent(world: Orders) -> None:
    """A READY refund rewritten in the database fails its integrity check inside the batch: it
    stays READY with no attempt, never sent, and the rest of the batch is performed."""
    ready = world.ready(6)
    forged_id = ready[2]
    (row,) = raw_sql(
        world.store_url, f"SELECT command_json FROM operations WHERE operation_id = '{forged_id}'"
    )
    command = json.loads(str(row[0]))
    command["arguments"]["amount_minor"] = 5000
    forged = canonical_bytes(command, version=COMMAND_VERSION)
    raw_sql(
        world.store_url,
        f"UPDATE operations SET command_json = '{forged.decode()}', fingerprint = "
        f"'{digest_bytes('command', forged, version=COMMAND_VERSION)}' "
        f"WHERE operation_id = '{forged_id}'",
    )

    results = world.app.dispatch_ready(limit=100, claim_batch=6)

    assert len(results) == 5
    assert world.states([forged_id]) == [OperationState.READY]
    assert count_rows(world.store_url, "attempts", f"operation_id = '{forged_id}'") == 0
    assert set(world.states([op for op in ready if op != forged_id])) == {OperationState.SUCCEEDED}
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (5, 5)


def test_a_record_refused_for_one_operation_leaves_only_it_to_recovery(
    world: Orders, clock: ManualClock
) -> None:
    """The database refuses one refund's outcome event: the others of the batch are recorded
    one by one, that one stays IN_PROGRESS with its attempt, and recovery settles it by lookup
    without sending it again."""
    ready = world.ready(6)
    refused = ready[3]
    with refusing_outcome(world.store_url, refused):
        results = world.app.dispatch_ready(limit=100, claim_batch=6)
    by_id = {result.operation_id: result.state for result in results}
    assert by_id[refused] is OperationState.IN_PROGRESS
    assert world.states(ready).count(OperationState.SUCCEEDED) == 5
    assert world.events("ProviderAcceptanceConfirmed", refused) == 0
    assert world.receiver.counts().effects == 6

    clock.advance(timedelta(seconds=31))
    report = RecoveryWorker(world.app.ledger, world.receiver).run_once()

    assert report.resolved == [("acme", refused, "SUCCEEDED")]
    assert set(world.states(ready)) == {OperationState.SUCCEEDED}
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects, counts.lookups) == (6, 6, 1)


class _WriteLock:
    """Another connection holding the lock every write of an operation needs, until released."""

    def __init__(self, store_url: str) -> None:
        self._sqlite: sqlite3.Connection | None = None
        self._postgres: psycopg.Connection[tuple[object, ...]] | None = None
        self.store_url = store_url

    def take(self) -> None:
        """Take it: the SQLite file's write lock, or PostgreSQL's operations table."""
        if self.store_url.startswith("sqlite:"):
            path = urlsplit(self.store_url).path[1:]
            self._sqlite = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._sqlite.execute("BEGIN IMMEDIATE")
            return
        parts = urlsplit(self.store_url)
        query = dict(parse_qsl(parts.query))
        schema = query.pop("schema")
        for option in ("group_commit", "pooler"):
            query.pop(option, None)
        self._postgres = psycopg.connect(urlunsplit(parts._replace(query=urlencode(query))))
        self._postgres.execute("SELECT set_config('search_path', %s, false)", (schema,))
        self._postgres.execute("LOCK TABLE operations IN SHARE ROW EXCLUSIVE MODE")

    def release(self) -> None:
        """End the holding transaction."""
        if self._sqlite is not None:
            self._sqlite.execute("ROLLBACK")
            self._sqlite.close()
        if self._postgres is not None:
            self._postgres.rollback()
            self._postgres.close()


def test_a_batch_the_store_cannot_record_stays_uncertain_for_recovery(
    store_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    """A batch whose record the store keeps busy past the record budget records nothing: every
    refund stays IN_PROGRESS with its one effect, and recovery settles each by lookup."""
    lock = _WriteLock(store_url)
    settings = LedgerSettings(record_budget=timedelta(milliseconds=300))
    world = orders_world(
        store_url,
        tmp_path,
        clock=clock,
        settings=settings,
        destination=lambda receiver: Holding(receiver, 5, lock.take),
    )
    try:
        ready = world.ready(5)
        try:
            results = world.app.dispatch_ready(limit=100, claim_batch=8)
        finally:
            lock.release()
        assert [result.state for result in results] == [OperationState.IN_PROGRESS] * 5
        assert set(world.states(ready)) == {OperationState.IN_PROGRESS}
        assert world.events("ProviderAcceptanceConfirmed") == 0
        assert world.receiver.counts().effects == 5

        clock.advance(timedelta(seconds=31))
        report = RecoveryWorker(world.app.ledger, world.receiver).run_once()

        assert len(report.resolved) == 5
        assert set(world.states(ready)) == {OperationState.SUCCEEDED}
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects, counts.lookups) == (5, 5, 5)
    finally:
        world.close()


@pytest.mark.parametrize(("declared", "most"), [(3, 3), (None, 1)])
def test_sends_stay_within_what_the_destination_declares(
    store_url: str, tmp_path: Path, declared: int | None, most: int
) -> None:
    """An adapter declaring concurrent_sends=3 gets three sends at once at most (and does get
    three); one declaring nothing gets one at a time, all from the dispatching thread."""
    adapters: list[Counted] = []

    def counted(receiver: object) -> Counted:
        adapters.append(Counted(receiver, declared))  # type: ignore[arg-type]
        return adapters[0]

    world = orders_world(store_url, tmp_path, destination=counted)
    try:
        ready = world.ready(12)
        world.app.dispatch_ready(limit=100, claim_batch=12)
        assert set(world.states(ready)) == {OperationState.SUCCEEDED}
        assert adapters[0].most == most
        if declared is None:
            assert adapters[0].threads == {threading.get_ident()}
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (12, 12)
    finally:
        world.close()


def test_a_bad_concurrency_declaration_claims_nothing(store_url: str, tmp_path: Path) -> None:
    """An adapter declaring concurrent_sends=0 is refused before any claim: the refunds stay
    READY, no attempt, nothing sent."""
    world = orders_world(store_url, tmp_path, destination=lambda receiver: Counted(receiver, 0))
    try:
        ready = world.ready(2)
        with pytest.raises(InvalidInput) as refused:
            world.app.dispatch_ready(limit=100, claim_batch=4)
        assert refused.value.details["field"] == "concurrent_sends"
        assert set(world.states(ready)) == {OperationState.READY}
        assert count_rows(store_url, "attempts") == 0
        assert world.receiver.counts().submissions == 0
    finally:
        world.close()


def test_the_worker_loop_claims_in_batches_of_its_setting(world: Orders) -> None:
    """A worker's dispatch pass claims claim_batch operations per transaction, its batch at most
    per pass, and performs each once."""
    ready = world.ready(10)
    world.watch_writes()
    settings = WorkerSettings(batch=8, claim_batch=3, recovery_threads=0, seal_interval=None)
    worker = Worker(world.app, settings)

    assert worker.dispatch_pass() == 8
    assert worker.dispatch_pass() == 2

    assert world.writes.count("claim_batch") == 4  # 3 + 3 + 2, then 2
    assert world.writes.count("record_batch") == 4
    assert set(world.states(ready)) == {OperationState.SUCCEEDED}
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (10, 10)


@pytest.mark.parametrize("value", [0, -1, True, "8", 10_001])
def test_a_claim_batch_out_of_range_is_refused(value: object) -> None:
    """The worker's claim_batch is a whole number from 1 to 10,000 (invalid_input otherwise)."""
    with pytest.raises(InvalidInput) as refused:
        WorkerSettings(claim_batch=value)  # type: ignore[arg-type]
    assert refused.value.details["field"] == "claim_batch"


class _Counting:
    """A transaction that notes the name of every statement it runs."""

    def __init__(self, tx: object, names: list[str]) -> None:
        self.tx = tx
        self.names = names

    def one(self, name: str, params: object) -> object:
        self.names.append(name)
        return self.tx.one(name, params)  # type: ignore[attr-defined]

    def all(self, name: str, params: object) -> object:
        self.names.append(name)
        return self.tx.all(name, params)  # type: ignore[attr-defined]

    def run(self, name: str, params: object) -> object:
        self.names.append(name)
        return self.tx.run(name, params)  # type: ignore[attr-defined]

    def queue(self, name: str, params: object) -> None:
        self.names.append(name)
        self.tx.queue(name, params)  # type: ignore[attr-defined]


def test_a_batch_claim_reads_for_the_whole_batch_at_once(world: Orders) -> None:
    """A claim of 8 runs its reads once for the batch (the lock, the trails, the proposals, the
    approvals) and two writes per operation: what each operation's checks read comes from those
    reads, so a claim's statements do not grow with per-operation reads."""
    ready = world.ready(8)
    store = world.app.ledger.store
    write = store.write
    names: list[str] = []

    def counted(body: object, **options: object) -> object:
        if options.get("label") != "claim_batch":
            return write(body, **options)  # type: ignore[arg-type]
        return write(lambda tx: body(_Counting(tx, names)), **options)  # type: ignore[arg-type, operator]

    store.write = counted  # type: ignore[method-assign]
    results = world.app.dispatch_ready(limit=100, claim_batch=8)

    assert [result.state for result in results] == [OperationState.SUCCEEDED] * 8
    assert set(world.states(ready)) == {OperationState.SUCCEEDED}
    assert sorted(set(names)) == [
        "approvals_for_batch",
        "attempt_insert",
        "events_for_operations",
        "operation_step",
        "operations_lock_ready_batch",
        "proposals_for_batch",
    ]
    assert len(names) == 4 + 2 * 8
