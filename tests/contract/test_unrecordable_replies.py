"""Destination replies the ledger will not store as they stand: recorded as Unknown, recovered.

The effect may have happened whatever the reply looks like, so such a reply is never an input
error and never a failure: the operation is OUTCOME_UNKNOWN with the reason in its event, and
recovery resolves it by lookup or escalates it. The receiver's own counts are the proof.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from effectledger import (
    Command,
    Context,
    ManualClock,
    Observation,
    OperationState,
    Outcome,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.audit.explain import explain, render
from effectledger.ledger import Ledger
from effectledger.workers import Executor, RecoveryWorker
from tests.acceptance.test_authority_matrix import AGENT, build_world
from tests.conftest import admit, count_rows
from tests.support.app import ledger_over

BAD_REPLIES: list[tuple[object, object, str]] = [
    ("x" * 600, "reply/1", "provider_reference:too_long"),
    ("", "reply/1", "provider_reference:empty"),
    (5, "reply/1", "provider_reference:not_text"),
    ("\ud800", "reply/1", "provider_reference:lone_surrogate"),
    ("r1\r\nSUCCEEDED r2", "reply/1", "provider_reference:control_characters"),
    ("\x1b[2J\x1b[31mr1", "reply/1", "provider_reference:control_characters"),
    ("r1\x00", "reply/1", "provider_reference:nul"),
    ("r1", None, "evidence_reference:missing"),
    ("r1", "reply/\x1b[0m", "evidence_reference:control_characters"),
]


class CraftedReplies:
    """A real receiver whose replies are replaced: the effect happens, the answer is ``reply``.

    ``submit_reply`` and ``lookup_reply`` map an idempotency key to the reply to give instead of
    the receiver's own (``None``: the receiver's own answer).
    """

    def __init__(self, receiver: SimulatedReceiver, *, submit_reply: Any = None) -> None:
        self.receiver = receiver
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint
        self.submit_reply = submit_reply
        self.lookup_replies: dict[str, Any] = {}
        self.lookup_reply: Any = None

    def submit(self, command: Command, key: str) -> Any:
        own = self.receiver.submit(command, key)
        return own if self.submit_reply is None else self.submit_reply

    def lookup(self, key: str) -> Any:
        own = self.receiver.lookup(key)
        crafted = self.lookup_replies.get(key, self.lookup_reply)
        return own if crafted is None else crafted


def accepted(provider_reference: object, evidence_reference: object) -> Observation:
    return Observation(
        outcome=Outcome.ACCEPTED,
        provider_reference=provider_reference,  # type: ignore[arg-type]
        evidence_reference=evidence_reference,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("provider", "evidence", "reason"), BAD_REPLIES)
def test_an_unrecordable_accepted_reply_is_recorded_as_unknown_with_its_reason(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    provider: object,
    evidence: object,
    reason: str,
) -> None:
    """A performed effect answered unrecordably is OUTCOME_UNKNOWN, with nothing of it stored."""
    admit(ledger, context, receiver)
    destination = CraftedReplies(receiver, submit_reply=accepted(provider, evidence))

    result = Executor(ledger, destination).execute(context, "op-1")

    assert (result.state, result.uncertain) == (OperationState.OUTCOME_UNKNOWN, True)
    assert receiver.counts().effects == 1
    operation = ledger.get(context, "op-1")
    assert (operation.state, operation.provider_reference) == (OperationState.OUTCOME_UNKNOWN, None)
    (attempt,) = ledger.attempts(context, "op-1")
    assert (attempt.observation, attempt.provider_reference, attempt.evidence_reference) == (
        Outcome.UNKNOWN,
        None,
        None,
    )
    last = ledger.events(context, "op-1")[-1]
    assert (last.event_type, last.evidence_reference) == ("SubmissionOutcomeUnknown", None)
    assert last.details == {
        "outcome": "Unknown",
        "unrecordable": reason,
        "reported_outcome": "Accepted",
    }


def test_a_reply_that_is_not_an_observation_is_recorded_as_unknown(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """An adapter returning something other than an Observation leaves the effect uncertain."""
    admit(ledger, context, receiver)
    destination = CraftedReplies(receiver, submit_reply={"status": "ok"})

    result = Executor(ledger, destination).execute(context, "op-1")

    assert result.state is OperationState.OUTCOME_UNKNOWN
    assert receiver.counts().effects == 1
    assert ledger.events(context, "op-1")[-1].details["unrecordable"] == "reply:not_an_observation"


def test_sixteen_concurrent_unrecordable_replies_all_stay_uncertain(
    ledger: Ledger, store_url: str, context: Context, receiver: SimulatedReceiver
) -> None:
    """16 threads whose effects are answered with a lone surrogate all end OUTCOME_UNKNOWN."""
    ids = [f"op-{index}" for index in range(16)]
    for operation_id in ids:
        admit(ledger, context, receiver, operation_id)
    destination = CraftedReplies(receiver, submit_reply=accepted("\ud800", "reply/1"))
    start = threading.Barrier(16)
    errors: list[BaseException] = []

    def perform(operation_id: str) -> None:
        start.wait()
        try:
            Executor(ledger, destination).execute(context, operation_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=perform, args=(op,)) for op in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert receiver.counts().effects == 16
    assert count_rows(store_url, "operations", "state = 'OUTCOME_UNKNOWN'") == 16
    assert count_rows(store_url, "attempts") == 16


def test_perform_reports_an_unrecordable_reply_as_uncertain_not_as_bad_input(
    store_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    """Through the service, a performed effect with a 600-character reference reads uncertain."""
    world = build_world(store_url, tmp_path, clock)
    try:
        destination = CraftedReplies(world.receiver, submit_reply=accepted("x" * 600, "reply/1"))
        service = ledger_over(world.ledger, world.service.registry, [destination])
        proposal, approval = world.approved()

        result = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)

        assert (result.outcome, result.state, result.uncertain) == (
            "performed",
            OperationState.OUTCOME_UNKNOWN,
            True,
        )
        assert world.effects() == 1
        assert world.units() == (30, 0)  # held until the outcome is known
    finally:
        world.ledger.store.close()
        world.receiver.close()


def test_recovery_resolves_an_unrecordable_reply_by_lookup(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """A reply recorded as Unknown is looked up by key and resolved from the receiver's answer."""
    admit(ledger, context, receiver)
    destination = CraftedReplies(receiver, submit_reply=accepted("\ud800", "reply/1"))
    Executor(ledger, destination).execute(context, "op-1")
    clock.advance(ledger.settings.recover_after)

    report = RecoveryWorker(ledger, destination).run_once()

    assert report.resolved == [("acme", "op-1", "SUCCEEDED")]
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.SUCCEEDED
    assert (
        operation.provider_reference
        == receiver.lookup(operation.idempotency_key).provider_reference
    )
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)


def test_recovery_escalates_when_every_lookup_answers_unrecordably(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Inconclusive lookups are counted; past the configured number the operation goes to review."""
    admit(ledger, context, receiver)
    destination = CraftedReplies(receiver, submit_reply=accepted("r1\r", "reply/1"))
    destination.lookup_reply = accepted("\x1b[31mr1", "lookup/1")
    Executor(ledger, destination).execute(context, "op-1")
    worker = RecoveryWorker(ledger, destination)
    clock.advance(ledger.settings.recover_after)

    reports = []
    for _ in range(ledger.settings.max_inconclusive_lookups + 1):
        reports.append(worker.run_once())
        clock.advance(ledger.settings.lookup_interval)

    assert all(report.failed == [] for report in reports)
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.MANUAL_REVIEW
    assert operation.inconclusive_lookups == ledger.settings.max_inconclusive_lookups
    kinds = [event.event_type for event in ledger.events(context, "op-1")]
    assert kinds.count("ManualReviewAssigned") == 1
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert counts.lookups == ledger.settings.max_inconclusive_lookups


def test_one_unrecordable_lookup_answer_never_aborts_a_recovery_pass(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Two operations answered unrecordably stay unknown; the pass resolves the other fourteen."""
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    ids = [f"op-{index}" for index in range(16)]
    keys = {}
    for operation_id in ids:
        keys[operation_id] = admit(ledger, context, receiver, operation_id).idempotency_key
        Executor(ledger, receiver).execute(context, operation_id)
    receiver.submit_mode = SubmitMode.ACCEPT
    destination = CraftedReplies(receiver)
    destination.lookup_replies[keys["op-3"]] = accepted("\ud800", "lookup/3")
    destination.lookup_replies[keys["op-9"]] = ["not", "an", "observation"]
    clock.advance(ledger.settings.recover_after)

    report = RecoveryWorker(ledger, destination).run_once()

    assert report.failed == []
    assert sorted(report.still_unknown) == [("acme", "op-3"), ("acme", "op-9")]
    assert len(report.resolved) == 14
    for operation_id in ids:
        expected = (
            OperationState.OUTCOME_UNKNOWN
            if operation_id in ("op-3", "op-9")
            else OperationState.SUCCEEDED
        )
        assert ledger.get(context, operation_id).state is expected


def test_a_submission_that_raised_is_recorded_with_no_evidence(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """An exception's class name is not evidence: the Unknown event carries no reference."""
    admit(ledger, context, receiver)
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY

    Executor(ledger, receiver).execute(context, "op-1")

    last = ledger.events(context, "op-1")[-1]
    assert (last.event_type, last.evidence_reference) == ("SubmissionOutcomeUnknown", None)
    (attempt,) = ledger.attempts(context, "op-1")
    assert attempt.evidence_reference is None


def test_explaining_an_unrecordable_reply_shows_no_control_characters(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """The explanation names the reason, and its text carries no terminal control character."""
    admit(ledger, context, receiver)
    destination = CraftedReplies(receiver, submit_reply=accepted("\x1b[2Jr1\r", "reply/1"))
    Executor(ledger, destination).execute(context, "op-1")

    text = render(explain(ledger.events(context, "op-1")))

    assert "could not be recorded (provider_reference:control_characters)" in text
    assert "\x1b" not in text
    assert "\r" not in text
