"""A real process is SIGKILLed at every named crash point; a survivor recovers from the files.

Each test runs the driver in a fresh interpreter with ``EFFECTLEDGER_CRASH_AT`` set, checks that
the child died by SIGKILL inside the step that holds the crash point, and then judges only
durable facts: the ledger's rows, the audit hash chain, and the simulated receiver's own count
of submissions, lookups and effects. Time moves on a ManualClock that parent and child start
at the same instant; nothing sleeps through a window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from effectledger import LedgerSettings, OperationState, Outcome, SimulatedReceiver, SubmitMode
from effectledger._failpoints import CRASH_POINTS
from tests.faults import test_batch_crash  # the module: its tests are collected there, once
from tests.faults._harness import (
    CONTEXT,
    SIGKILLED,
    ChildRun,
    run_driver,
    survivor,
)
from tests.faults.test_export_crash import test_a_killed_exporter_resumes_without_gaps_or_duplicates
from tests.faults.test_group_commit_crash import (
    test_sixteen_grouped_performers_killed_lose_nothing_and_double_nothing,
)

DISPATCH = ("admit", "execute")
# Dispatch with a lost reply, then one recovery pass once the attempt is due (30 s later).
DISPATCH_THEN_RECOVER = ("admit", "execute", "advance:30", "recover")


@pytest.fixture
def receiver_path(tmp_path: Path) -> Path:
    """The simulated receiver's file, shared by the child and the survivor."""
    return tmp_path / "receiver.db"


def crash(
    store_url: str,
    receiver_path: Path,
    point: str,
    steps: tuple[str, ...],
    *,
    submit_mode: SubmitMode = SubmitMode.ACCEPT,
) -> ChildRun:
    """Run ``steps`` armed at ``point``; check the child was SIGKILLed inside the last step."""
    run = run_driver(store_url, receiver_path, steps, crash_at=point, submit_mode=submit_mode)
    assert run.returncode == SIGKILLED, (run.returncode, run.lines, run.stderr)
    return run


@pytest.mark.slow
def test_unarmed_driver_runs_every_step_to_the_end(store_url: str, receiver_path: Path) -> None:
    """Without a crash point the same child finishes every step and exits 0 (the kills are ours)."""
    run = run_driver(store_url, receiver_path, DISPATCH_THEN_RECOVER)
    assert run.returncode == 0, run.stderr
    assert run.finished() == list(DISPATCH_THEN_RECOVER)
    assert "state SUCCEEDED" in run.lines
    with survivor(store_url, receiver_path) as world:
        facts = world.facts()
    assert facts.operation.state is OperationState.SUCCEEDED
    assert (facts.counts.submissions, facts.counts.effects) == (1, 1)


@pytest.mark.slow
def test_crash_after_admit_keeps_the_operation_ready_and_dispatchable(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """A crash right after admission loses nothing: the operation is READY and runs once later."""
    run = crash(store_url, receiver_path, "after_admit", DISPATCH)
    assert run.started() == ["admit"]
    assert run.finished() == []

    with survivor(store_url, receiver_path, settings=settings) as world:
        facts = world.facts()
        assert facts.operation.state is OperationState.READY
        assert facts.operation.version == 1
        assert facts.attempts == []
        assert facts.event_types == ["OperationAdmitted"]
        assert facts.counts.submissions == facts.counts.effects == 0

        world.clock.advance(settings.recover_after)
        assert world.recovery.run_once().due == 0  # READY is never "recovered" by sending

        again = run_driver(store_url, receiver_path, DISPATCH)  # the agent simply retries
        assert again.returncode == 0, again.stderr
        facts = world.facts()
    assert facts.operation.state is OperationState.SUCCEEDED
    assert facts.operation.idempotency_key == facts.attempts[0].idempotency_key
    assert len(facts.attempts) == 1
    assert (facts.counts.submissions, facts.counts.effects, facts.effects_for_key) == (1, 1, 1)
    assert facts.event_types == [
        "OperationAdmitted",
        "AttemptPrepared",
        "ProviderAcceptanceConfirmed",
    ]


@pytest.mark.slow
def test_crash_after_claim_is_never_resubmitted_and_ends_in_manual_review(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """A claim committed before a crash is looked up, never resent; misses escalate to review."""
    run = crash(store_url, receiver_path, "after_claim", DISPATCH)
    assert run.finished() == ["admit"]
    assert run.started() == ["admit", "execute"]

    with survivor(store_url, receiver_path, settings=settings) as world:
        facts = world.facts()
        assert facts.operation.state is OperationState.IN_PROGRESS
        assert [a.observation for a in facts.attempts] == [None]
        assert facts.event_types == ["OperationAdmitted", "AttemptPrepared"]
        assert facts.counts.submissions == 0

        assert world.recovery.run_once().due == 0, "recovery must wait for recover_after"
        world.clock.advance(settings.recover_after)
        report = world.recovery.run_once()
        assert (report.looked_up, report.still_unknown) == (1, [("acme", "op-1")])
        assert world.ledger.get(CONTEXT, "op-1").state is OperationState.OUTCOME_UNKNOWN

        # The agent calls the tool again: it is told the outcome is unknown; nothing is sent.
        repeat = world.executor.execute(CONTEXT, "op-1")
        assert repeat.state is OperationState.OUTCOME_UNKNOWN
        assert repeat.uncertain

        for _ in range(settings.max_inconclusive_lookups - 1):
            world.clock.advance(settings.lookup_interval)
            world.recovery.run_once()
        world.clock.advance(settings.lookup_interval)
        assert world.recovery.run_once().due == 0, "MANUAL_REVIEW is not looked up again"
        facts = world.facts()
        review_started = world.clock.now() - settings.lookup_interval

    assert facts.operation.state is OperationState.MANUAL_REVIEW
    assert facts.operation.review_owner == settings.review_owner
    assert facts.operation.review_deadline == review_started + settings.review_deadline
    assert facts.operation.inconclusive_lookups == settings.max_inconclusive_lookups
    assert len(facts.attempts) == 1
    assert facts.counts.submissions == facts.counts.effects == 0
    assert facts.counts.lookups == settings.max_inconclusive_lookups
    assert facts.event_types == [
        "OperationAdmitted",
        "AttemptPrepared",
        *["ReconciliationStarted", "SubmissionOutcomeUnknown"] * settings.max_inconclusive_lookups,
        "ManualReviewAssigned",
    ]


@pytest.mark.slow
def test_crash_after_destination_committed_reconciles_in_a_new_process(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """An effect performed before the crash is found by a new recovery process: one effect."""
    run = crash(store_url, receiver_path, "destination_committed", DISPATCH)
    assert run.finished() == ["admit"]

    with survivor(store_url, receiver_path, settings=settings) as world:
        facts = world.facts()
        assert facts.operation.state is OperationState.IN_PROGRESS
        assert facts.event_types == ["OperationAdmitted", "AttemptPrepared"]
        assert (facts.counts.submissions, facts.effects_for_key) == (1, 1)
        repeat = world.executor.execute(CONTEXT, "op-1")
        assert repeat.state is OperationState.IN_PROGRESS, "a repeat reports, never resends"
        assert world.receiver.counts().submissions == 1

    recovery = run_driver(store_url, receiver_path, ("advance:30", "recover"))
    assert recovery.returncode == 0, recovery.stderr
    assert "resolved 1 failed 0" in recovery.lines

    with survivor(store_url, receiver_path, settings=settings) as world:
        facts = world.facts()
    assert facts.operation.state is OperationState.SUCCEEDED
    assert facts.operation.provider_reference == SimulatedReceiver.receipt(
        facts.operation.idempotency_key
    )
    assert [a.observation for a in facts.attempts] == [Outcome.ACCEPTED]
    assert (facts.counts.submissions, facts.counts.lookups, facts.counts.effects) == (1, 1, 1)
    assert facts.event_types == [
        "OperationAdmitted",
        "AttemptPrepared",
        "ReconciliationStarted",
        "ProviderAcceptanceReconciled",
    ]


@pytest.mark.slow
def test_crash_after_reply_before_record_reconciles_to_succeeded(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """A reply lost with the process is recovered by lookup: SUCCEEDED with exactly one effect."""
    run = crash(store_url, receiver_path, "after_reply", DISPATCH)
    assert run.finished() == ["admit"]

    with survivor(store_url, receiver_path, settings=settings) as world:
        facts = world.facts()
        assert facts.operation.state is OperationState.IN_PROGRESS
        assert (facts.counts.submissions, facts.effects_for_key) == (1, 1)
        world.clock.advance(settings.recover_after)
        report = world.recovery.run_once()
        facts = world.facts()
    assert report.resolved == [("acme", "op-1", "SUCCEEDED")]
    assert facts.operation.state is OperationState.SUCCEEDED
    assert len(facts.attempts) == 1
    assert (facts.counts.submissions, facts.counts.effects) == (1, 1)
    assert facts.event_types[-1] == "ProviderAcceptanceReconciled"


@pytest.mark.slow
def test_crash_inside_record_rolls_the_record_back_whole(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """A crash before the record commits leaves neither its state nor its event; lookup heals it."""
    run = crash(store_url, receiver_path, "inside_record", DISPATCH)
    assert run.finished() == ["admit"]

    with survivor(store_url, receiver_path, settings=settings) as world:
        facts = world.facts()
        # The state change, the attempt's observation and the event vanished together.
        assert facts.operation.state is OperationState.IN_PROGRESS
        assert facts.operation.version == 2
        assert [a.observation for a in facts.attempts] == [None]
        assert facts.event_types == ["OperationAdmitted", "AttemptPrepared"]
        assert facts.effects_for_key == 1
        world.clock.advance(settings.recover_after)
        world.recovery.run_once()
        facts = world.facts()
    assert facts.operation.state is OperationState.SUCCEEDED
    assert (facts.counts.submissions, facts.counts.effects) == (1, 1)
    assert facts.event_types == [
        "OperationAdmitted",
        "AttemptPrepared",
        "ReconciliationStarted",
        "ProviderAcceptanceReconciled",
    ]


@pytest.mark.slow
def test_crash_after_reserving_a_lookup_holds_the_window_then_reconciles(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """A reserved but unused lookup slot blocks an immediate repeat; the next window resolves it."""
    run = crash(
        store_url,
        receiver_path,
        "after_reserve",
        DISPATCH_THEN_RECOVER,
        submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY,
    )
    assert run.finished() == ["admit", "execute", "advance:30"]
    assert "state OUTCOME_UNKNOWN" in run.lines

    with survivor(store_url, receiver_path, settings=settings) as world:
        world.clock.advance(settings.recover_after)  # the instant the child reserved at
        facts = world.facts()
        assert facts.operation.state is OperationState.OUTCOME_UNKNOWN
        assert facts.event_types[-1] == "ReconciliationStarted"
        assert facts.attempts[0].recover_after == world.clock.now() + settings.lookup_interval
        assert facts.counts.lookups == 0
        assert world.recovery.run_once().due == 0, "the reserved window is still held"

        world.clock.advance(settings.lookup_interval)
        report = world.recovery.run_once()
        facts = world.facts()
    assert report.resolved == [("acme", "op-1", "SUCCEEDED")]
    assert facts.operation.state is OperationState.SUCCEEDED
    assert (facts.counts.submissions, facts.counts.lookups, facts.counts.effects) == (1, 1, 1)
    assert facts.event_types == [
        "OperationAdmitted",
        "AttemptPrepared",
        "SubmissionOutcomeUnknown",
        "ReconciliationStarted",
        "ReconciliationStarted",
        "ProviderAcceptanceReconciled",
    ]


@pytest.mark.slow
def test_crash_after_lookup_before_record_looks_up_again_next_window(
    store_url: str, receiver_path: Path, settings: LedgerSettings
) -> None:
    """An answer lost with the recovery process is asked for again, never resubmitted."""
    run = crash(
        store_url,
        receiver_path,
        "after_lookup",
        DISPATCH_THEN_RECOVER,
        submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY,
    )
    assert run.finished() == ["admit", "execute", "advance:30"]
    assert run.started()[-1] == "recover"

    with survivor(store_url, receiver_path, settings=settings) as world:
        world.clock.advance(settings.recover_after)
        facts = world.facts()
        assert facts.operation.state is OperationState.OUTCOME_UNKNOWN
        assert facts.counts.lookups == 1
        assert world.recovery.run_once().due == 0
        world.clock.advance(settings.lookup_interval)
        world.recovery.run_once()
        facts = world.facts()
    assert facts.operation.state is OperationState.SUCCEEDED
    assert facts.operation.inconclusive_lookups == 0
    assert (facts.counts.submissions, facts.counts.lookups, facts.counts.effects) == (1, 2, 1)
    assert facts.event_types[-3:] == [
        "ReconciliationStarted",
        "ReconciliationStarted",
        "ProviderAcceptanceReconciled",
    ]


COVERED: dict[str, Callable[..., None]] = {
    "after_admit": test_crash_after_admit_keeps_the_operation_ready_and_dispatchable,
    "after_claim": test_crash_after_claim_is_never_resubmitted_and_ends_in_manual_review,
    "destination_committed": test_crash_after_destination_committed_reconciles_in_a_new_process,
    "after_reply": test_crash_after_reply_before_record_reconciles_to_succeeded,
    "inside_record": test_crash_inside_record_rolls_the_record_back_whole,
    "after_reserve": test_crash_after_reserving_a_lookup_holds_the_window_then_reconciles,
    "after_lookup": test_crash_after_lookup_before_record_looks_up_again_next_window,
    "export_after_write": test_a_killed_exporter_resumes_without_gaps_or_duplicates,
    "after_group_commit": test_sixteen_grouped_performers_killed_lose_nothing_and_double_nothing,
    **dict.fromkeys(
        ("after_batch_claim", "mid_batch_sends", "after_batch_replies", "inside_batch_record"),
        test_batch_crash.test_a_batch_worker_killed_loses_nothing_and_doubles_nothing,
    ),
}


def test_every_named_crash_point_has_a_kill_test() -> None:
    """Each crash point the library names is killed at by a test above (none is forgotten)."""
    assert sorted(COVERED) == sorted(CRASH_POINTS)
