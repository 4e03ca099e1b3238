"""Recovery: due attempts are looked up once per window, never resubmitted, and escalated."""

from __future__ import annotations

import threading

from effectledger import (
    Context,
    LookupMode,
    ManualClock,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.audit import verify_chain
from effectledger.ledger import Ledger
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import admit, count_rows


def lost_reply(ledger: Ledger, context: Context, receiver: SimulatedReceiver) -> None:
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    admit(ledger, context, receiver)
    assert Executor(ledger, receiver).execute(context, "op-1").uncertain


def test_lost_reply_is_reconciled_by_lookup(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """After a lost reply, recovery finds the effect by key: SUCCEEDED, still one effect."""
    lost_reply(ledger, context, receiver)
    worker = RecoveryWorker(ledger, receiver)
    assert worker.run_once().due == 0  # not due before recover_after
    clock.advance(30)
    report = worker.run_once()
    assert report.resolved == [("acme", "op-1", "SUCCEEDED")]
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.SUCCEEDED
    events = ledger.events(context, "op-1")
    assert [(e.sequence, e.actor, e.event_type) for e in events] == [
        (1, "alice", "OperationAdmitted"),
        (2, "dispatch-worker", "AttemptPrepared"),
        (3, "dispatch-worker", "SubmissionOutcomeUnknown"),
        (4, "recovery-worker", "ReconciliationStarted"),
        (5, "recovery-worker", "ProviderAcceptanceReconciled"),
    ]
    assert events[-1].evidence_reference == f"provider-lookup/{operation.provider_reference}"
    verify_chain(events, head=operation.last_event_hash)
    counts = receiver.counts()
    assert (counts.submissions, counts.lookups, counts.effects) == (1, 1, 1)


def test_in_progress_past_recover_after_is_recovered(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """A claim whose worker vanished before submitting is looked up, found absent, kept Unknown."""
    admit(ledger, context, receiver)
    assert ledger.claim(context, "op-1", attempt_id="a1") is not None
    clock.advance(31)
    report = RecoveryWorker(ledger, receiver).run_once()
    assert report.still_unknown == [("acme", "op-1")]
    assert ledger.get(context, "op-1").state is OperationState.OUTCOME_UNKNOWN
    counts = receiver.counts()
    assert (counts.submissions, counts.lookups, counts.effects) == (0, 1, 0)


def test_inconclusive_lookups_escalate_to_manual_review(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Enough inconclusive lookups send the operation to manual review with owner and deadline."""
    receiver.submit_mode = SubmitMode.LOSE_REQUEST
    admit(ledger, context, receiver)
    Executor(ledger, receiver).execute(context, "op-1")
    worker = RecoveryWorker(ledger, receiver)
    for _ in range(3):
        clock.advance(30)
        worker.run_once()
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.MANUAL_REVIEW
    assert operation.review_owner == "operations"
    assert operation.review_deadline == clock.now() + ledger.settings.review_deadline
    assert operation.inconclusive_lookups == 3
    clock.advance(300)
    assert worker.run_once().due == 0  # manual review is not looked up again automatically
    counts = receiver.counts()
    assert (counts.submissions, counts.lookups, counts.effects) == (1, 3, 0)
    assert ledger.events(context, "op-1")[-1].event_type == "ManualReviewAssigned"


def test_failed_lookup_keeps_the_pushed_window(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """A lookup that fails is not retried at once: the reserved window holds until it passes."""
    lost_reply(ledger, context, receiver)
    receiver.lookup_mode = LookupMode.FAIL
    worker = RecoveryWorker(ledger, receiver)
    clock.advance(30)
    assert worker.run_once().failed == [("acme", "op-1", "lookup_failed")]
    assert worker.run_once().due == 0
    assert receiver.counts().lookups == 1
    receiver.lookup_mode = LookupMode.ANSWER
    clock.advance(30)
    assert worker.run_once().resolved == [("acme", "op-1", "SUCCEEDED")]
    assert receiver.counts().effects == 1
    assert receiver.counts().submissions == 1


def test_unknown_lookup_schedules_the_next_check(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """An inconclusive lookup leaves OUTCOME_UNKNOWN with the next check one interval later."""
    lost_reply(ledger, context, receiver)
    receiver.lookup_mode = LookupMode.UNKNOWN
    clock.advance(30)
    RecoveryWorker(ledger, receiver).run_once()
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.OUTCOME_UNKNOWN
    (attempt,) = ledger.attempts(context, "op-1")
    assert attempt.recover_after == clock.now() + ledger.settings.lookup_interval


def test_competing_recovery_workers_reserve_one_lookup(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    clock: ManualClock,
    store_url: str,
) -> None:
    """Four workers racing over one due attempt make exactly one lookup in the window."""
    lost_reply(ledger, context, receiver)
    clock.advance(30)
    barrier = threading.Barrier(4)
    workers = [RecoveryWorker(ledger, receiver) for _ in range(4)]

    def run(worker: RecoveryWorker) -> None:
        barrier.wait()
        worker.run_once()

    threads = [threading.Thread(target=run, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert receiver.counts().lookups == 1
    assert count_rows(store_url, "audit_events", "event_type = 'ReconciliationStarted'") == 1
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED


def test_recovery_never_resubmits(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Across many windows of a lost request, the receiver sees one submission and only lookups."""
    receiver.submit_mode = SubmitMode.LOSE_REQUEST
    admit(ledger, context, receiver)
    executor = Executor(ledger, receiver)
    executor.execute(context, "op-1")
    worker = RecoveryWorker(ledger, receiver)
    for _ in range(6):
        clock.advance(30)
        worker.run_once()
        executor.execute(context, "op-1")
    counts = receiver.counts()
    assert counts.submissions == 1
    assert counts.effects == 0


def test_a_new_store_object_recovers_from_the_files_alone(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    clock: ManualClock,
    store_url: str,
) -> None:
    """Recovery needs nothing from the dispatching process: a fresh store and receiver suffice."""
    from effectledger.store import open_store

    lost_reply(ledger, context, receiver)
    ledger.store.close()
    fresh_store = open_store(store_url)
    try:
        fresh = Ledger(fresh_store, clock=clock, settings=ledger.settings)
        fresh_receiver = SimulatedReceiver(receiver.path)
        clock.advance(30)
        RecoveryWorker(fresh, fresh_receiver).run_once()
        assert fresh.get(context, "op-1").state is OperationState.SUCCEEDED
        assert fresh_receiver.counts().effects == 1
    finally:
        fresh_store.close()
