"""Shared work queues: claims and lookups split between workers, each taken once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from effectledger import (
    Context,
    DestinationRef,
    LedgerSettings,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.ledger import Ledger, new_id
from effectledger.model.operations import PreparedAttempt
from effectledger.store import Store, open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import admit, run_sql, with_options

T = TypeVar("T")


def _in_threads(count: int, work: Callable[[int], T]) -> list[T]:
    """Run ``work(i)`` in ``count`` threads released together; return results, raise errors."""
    start = threading.Barrier(count)
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        start.wait()
        try:
            result = work(index)
        except BaseException as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def stores(store_url: str) -> Iterator[list[Store]]:
    """Four more stores over the test's database: one per competing worker."""
    opened = [open_store(store_url) for _ in range(4)]
    yield opened
    for store in opened:
        store.close()


def _bound(receiver: SimulatedReceiver) -> DestinationRef:
    return DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)


def _events(ledger: Ledger, context: Context, operation_id: str, kind: str) -> int:
    return sum(event.event_type == kind for event in ledger.events(context, operation_id))


def _make_unknown(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, count: int
) -> list[str]:
    """``count`` operations performed by the receiver whose replies were lost."""
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    executor = Executor(ledger, receiver)
    ids = [f"op-{index}" for index in range(count)]
    for operation_id in ids:
        admit(ledger, context, receiver, operation_id)
        assert executor.execute(context, operation_id).state is OperationState.OUTCOME_UNKNOWN
    receiver.submit_mode = SubmitMode.ACCEPT
    return ids


def test_concurrent_claims_of_one_operation_make_one_attempt(
    ledger: Ledger,
    stores: list[Store],
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """Racing claims of one READY operation: one attempt, the others get None and no error."""
    admit(ledger, context, receiver)
    ledgers = [Ledger(store, clock=clock) for store in stores]

    claims = _in_threads(
        4, lambda index: ledgers[index].claim(context, "op-1", attempt_id=new_id())
    )

    assert sum(claim is not None for claim in claims) == 1
    assert len(ledger.attempts(context, "op-1")) == 1
    assert _events(ledger, context, "op-1", "AttemptPrepared") == 1


def test_claim_next_takes_the_oldest_ready_operation_of_its_destination(
    ledger: Ledger, clock: ManualClock, receiver: SimulatedReceiver, context: Context
) -> None:
    """A pool claims READY operations of its own destination, oldest first, then None."""
    for operation_id in ("op-1", "op-2"):
        admit(ledger, context, receiver, operation_id)
        clock.advance(1)
    ledger.admit(
        context,
        operation_id="op-elsewhere",
        revision="rev-1",
        command=admit(ledger, context, receiver, "op-1").command,
        destination=DestinationRef(account_id="acct-other", endpoint=receiver.endpoint),
        admission_reference="approval/op-elsewhere",
    )
    bound = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)

    taken = [ledger.claim_next(bound, attempt_id=new_id()) for _ in range(3)]

    assert [claim.operation_id if claim else None for claim in taken] == ["op-1", "op-2", None]
    assert ledger.get(context, "op-elsewhere").state is OperationState.READY


def test_claim_next_leaves_a_tampered_operation_ready_and_claims_the_next(
    ledger: Ledger,
    store_url: str,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """An operation whose stored command was altered is never claimed by a pool, nor blocks it."""
    for operation_id in ("op-1", "op-2"):
        admit(ledger, context, receiver, operation_id)
        clock.advance(1)
    run_sql(
        store_url,
        "UPDATE operations SET command_json = ? WHERE tenant_id = ? AND operation_id = ?",
        ('{"action":"x","arguments":{},"contract_version":"v"}', "acme", "op-1"),
    )
    bound = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)

    claim = ledger.claim_next(bound, attempt_id=new_id())

    assert claim is not None
    assert claim.operation_id == "op-2"
    assert ledger.get(context, "op-1").state is OperationState.READY
    assert ledger.attempts(context, "op-1") == []


def test_executor_pools_perform_each_ready_operation_once(
    ledger: Ledger,
    stores: list[Store],
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """Four executors running run_ready together perform every READY operation exactly once."""
    ids = [f"op-{index}" for index in range(12)]
    for operation_id in ids:
        admit(ledger, context, receiver, operation_id)
    executors = [Executor(Ledger(store, clock=clock), receiver) for store in stores]

    results = _in_threads(4, lambda index: executors[index].run_ready(limit=100))

    performed = [result.operation_id for batch in results for result in batch]
    assert sorted(performed) == sorted(ids)
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (12, 12)
    assert all(len(ledger.attempts(context, op)) == 1 for op in ids)


def test_reserve_due_reserves_each_due_attempt_once_per_window(
    ledger: Ledger, clock: ManualClock, receiver: SimulatedReceiver, context: Context
) -> None:
    """Due attempts are reserved once per lookup window, with one ReconciliationStarted each."""
    ids = _make_unknown(ledger, context, receiver, 3)
    clock.advance(ledger.settings.recover_after)

    first = ledger.reserve_due(_bound(receiver), limit=10)
    again = ledger.reserve_due(_bound(receiver), limit=10)
    clock.advance(ledger.settings.lookup_interval)
    next_window = ledger.reserve_due(_bound(receiver), limit=10)

    assert sorted(attempt.operation_id for attempt in first.lookups) == ids
    assert again.lookups == ()
    assert sorted(attempt.operation_id for attempt in next_window.lookups) == ids
    assert all(_events(ledger, context, op, "ReconciliationStarted") == 2 for op in ids)


def test_reserve_due_escalates_an_operation_out_of_lookups_instead(
    ledger: Ledger, clock: ManualClock, receiver: SimulatedReceiver, context: Context
) -> None:
    """An attempt whose inconclusive lookups are used up goes to MANUAL_REVIEW, not to lookup."""
    (operation_id,) = _make_unknown(ledger, context, receiver, 1)
    for _ in range(ledger.settings.max_inconclusive_lookups):
        clock.advance(ledger.settings.lookup_interval)
        (attempt,) = ledger.reserve_due(_bound(receiver), limit=10).lookups
        ledger.record(attempt, Observation.unknown(), reconciled=True)
    clock.advance(ledger.settings.lookup_interval)

    work = ledger.reserve_due(_bound(receiver), limit=10)

    assert work.lookups == ()
    assert work.escalated == (("acme", operation_id),)
    operation = ledger.get(context, operation_id)
    assert operation.state is OperationState.MANUAL_REVIEW
    assert operation.review_owner == ledger.settings.review_owner
    events = [event.event_type for event in ledger.events(context, operation_id)]
    assert events[-2:] == ["SubmissionOutcomeUnknown", "ManualReviewAssigned"]


def test_recovery_workers_look_each_attempt_up_once(
    ledger: Ledger,
    stores: list[Store],
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """Four recovery workers passing together look every due attempt up once and resolve it."""
    ids = _make_unknown(ledger, context, receiver, 16)
    clock.advance(ledger.settings.recover_after)
    workers = [RecoveryWorker(Ledger(store, clock=clock), receiver) for store in stores]

    def drain(index: int) -> list[str]:
        looked_up: list[str] = []
        while True:
            report = workers[index].run_once(limit=3)
            assert report.failed == []
            if report.due == 0:
                return looked_up
            looked_up += [operation for _, operation, _ in report.resolved]

    resolved = [op for batch in _in_threads(4, drain) for op in batch]

    assert sorted(resolved) == sorted(ids)
    assert receiver.counts().lookups == 16
    for operation_id in ids:
        assert ledger.get(context, operation_id).state is OperationState.SUCCEEDED
        assert _events(ledger, context, operation_id, "ReconciliationStarted") == 1


# -- what only a shared server shows: rows another process holds are skipped, not waited for ---


@pytest.fixture
def impatient_ledger(postgres_url: str, clock: ManualClock) -> Iterator[Ledger]:
    """A PostgreSQL ledger that gives up waiting for a row lock after one second."""
    store = open_store(with_options(postgres_url, lock_timeout_ms=1000))
    yield Ledger(store, clock=clock, settings=LedgerSettings(max_inconclusive_lookups=3))
    store.close()


def _hold_row(postgres_url: str, operation_id: str) -> psycopg.Connection[tuple[object, ...]]:
    """An open transaction of another process that holds one operation row locked."""
    parts = urlsplit(postgres_url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    query.pop("group_commit", None)  # a store option, not libpq's
    connection = psycopg.connect(urlunsplit(parts._replace(query=urlencode(query))))
    connection.execute("SELECT set_config('search_path', %s, false)", (schema,))
    connection.execute(
        "SELECT 1 FROM operations WHERE operation_id = %s FOR UPDATE", (operation_id,)
    )
    return connection


def _release(holder: psycopg.Connection[tuple[object, ...]]) -> None:
    """End the holder's transaction and wait for the server to confirm: its locks are gone.

    Closing the connection alone releases them only once the server has noticed, which may be
    after the next statement of the test.
    """
    holder.rollback()
    holder.close()


@pytest.mark.postgres
def test_pool_claim_skips_an_operation_another_process_holds(
    impatient_ledger: Ledger,
    postgres_url: str,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """claim_next passes over a READY row locked elsewhere instead of waiting for it."""
    for operation_id in ("op-1", "op-2"):
        admit(impatient_ledger, context, receiver, operation_id)
        clock.advance(1)
    bound = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    holder = _hold_row(postgres_url, "op-1")
    try:
        claim: PreparedAttempt | None = impatient_ledger.claim_next(bound, attempt_id=new_id())
    finally:
        _release(holder)

    assert claim is not None
    assert claim.operation_id == "op-2"
    assert impatient_ledger.get(context, "op-1").state is OperationState.READY


@pytest.mark.postgres
def test_reserve_due_skips_an_attempt_another_worker_holds(
    impatient_ledger: Ledger,
    postgres_url: str,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """reserve_due passes over a due row locked by another worker, then takes it once freed."""
    _make_unknown(impatient_ledger, context, receiver, 2)
    clock.advance(impatient_ledger.settings.recover_after)
    holder = _hold_row(postgres_url, "op-0")
    try:
        while_held = impatient_ledger.reserve_due(_bound(receiver), limit=10)
    finally:
        _release(holder)
    after = impatient_ledger.reserve_due(_bound(receiver), limit=10)

    assert [attempt.operation_id for attempt in while_held.lookups] == ["op-1"]
    assert [attempt.operation_id for attempt in after.lookups] == ["op-0"]
    counts = Counter(
        event.event_type
        for op in ("op-0", "op-1")
        for event in impatient_ledger.events(context, op)
    )
    assert counts["ReconciliationStarted"] == 2
