"""The one-object API: a decorated action, records passed between calls, a complete facade.

Every test runs on both backends and checks durable facts: the receiver's own effect count,
the operation and attempt rows, the held and committed units.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import (
    AdmissionDenied,
    ApprovalRefused,
    DenialReason,
    EffectLedger,
    EffectLedgerError,
    EffectOutcome,
    InvalidInput,
    InvalidTransition,
    LedgerSettings,
    LookupMode,
    ManualClock,
    NotFound,
    NotPermitted,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
    connect,
)
from effectledger.audit import verify_bundle
from effectledger.audit.keys.files import new_key_pair
from effectledger.audit.keys.signers import Signer
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.model.operations import Context, DestinationRef
from tests.acceptance.app_support import AGENT, REFUND, RITA, declare_refund
from tests.conftest import count_rows, without_store_options

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(store_url: str, clock: ManualClock, settings: LedgerSettings) -> Iterator[EffectLedger]:
    """The facade over the test's store and clock."""
    with connect(store_url, clock=clock, settings=settings) as opened:
        yield opened


def test_refund_story_through_the_facade(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str
) -> None:
    """propose, approve the record, perform: one effect, units committed, a replay sends nothing."""
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    approval = app.approve(RITA, proposal)
    result = app.perform(AGENT, proposal)
    assert result.outcome is EffectOutcome.PERFORMED
    assert (result.state, result.uncertain) == (OperationState.SUCCEEDED, False)
    assert approval.digest == proposal.digest
    again = app.perform(AGENT, proposal)
    assert again.outcome is EffectOutcome.REPLAYED
    assert again.to_dict()["outcome"] == "replayed"
    assert receiver.counts().effects == 1
    assert count_rows(store_url, "attempts") == 1
    usage = app.capacity(RITA, "refunds")  # the tenant's views are a reviewer's
    assert (usage.held, usage.committed) == (0, 30)
    assert app.status(AGENT, proposal).state is OperationState.SUCCEEDED
    assert [op.operation_id for op in app.operations(RITA)] == [proposal.operation_id]
    assert app.events(RITA, result)[-1].event_type == "ProviderAcceptanceConfirmed"
    assert "SUCCEEDED" in app.explain(RITA, proposal)[-1].text


def test_string_ids_work_for_callers_without_records(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """With plain ids a decision needs the digest shown; perform finds the recorded approval."""
    declare_refund(app, receiver)
    proposal = app.propose(AGENT, "refund_order", dict(REFUND))
    with pytest.raises(InvalidInput):
        app.approve(RITA, proposal.proposal_id)
    with pytest.raises(ApprovalRefused) as refused:
        app.approve(RITA, proposal.proposal_id, digest="0" * 64)
    assert refused.value.reason == "digest_mismatch"
    assert receiver.counts().effects == 0
    app.approve(RITA, proposal.proposal_id, digest=proposal.digest)
    result = app.perform(AGENT, proposal.proposal_id)
    assert result.outcome is EffectOutcome.PERFORMED
    assert receiver.counts().effects == 1


def test_denials_are_enums_and_raise_on_request(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Unapproved and denied proposals come back denied with a reason enum and leave no row."""
    refund = declare_refund(app, receiver)
    unapproved = app.propose(AGENT, refund, **REFUND)
    result = app.perform(AGENT, unapproved)
    assert (result.outcome, result.reason) == (EffectOutcome.DENIED, DenialReason.APPROVAL_MISSING)
    with pytest.raises(AdmissionDenied) as raised:
        result.raise_for_denial()
    assert raised.value.reason == "approval_missing"
    denied = app.propose(AGENT, refund, **REFUND)
    app.deny(RITA, denied, reason="refund already issued by phone")
    assert app.perform(AGENT, denied).reason is DenialReason.APPROVAL_DENIED
    assert count_rows(store_url, "operations") == 0
    assert receiver.counts().effects == 0


def test_perform_without_an_approval_uses_the_decision_recorded_on_the_digest(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str, clock: ManualClock
) -> None:
    """A grant is used when no approval is named, a later denial wins, a replay needs none."""
    refund = declare_refund(app, receiver)
    granted = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, granted)
    first = app.perform(AGENT, granted)
    assert first.outcome is EffectOutcome.PERFORMED
    again = app.perform(AGENT, granted.proposal_id)  # by id: the exact replay, nothing spent
    assert (again.outcome, again.state) == (EffectOutcome.REPLAYED, OperationState.SUCCEEDED)
    overruled = app.propose(AGENT, refund, **{**REFUND, "order_id": "ord-2"})
    app.approve(RITA, overruled)
    clock.advance(1)
    second_reviewer = Context(tenant_id=RITA.tenant_id, actor_id="sam", roles=RITA.roles)
    app.deny(second_reviewer, overruled, reason="duplicate of an earlier refund")
    denied = app.perform(AGENT, overruled)
    assert (denied.outcome, denied.reason) == (EffectOutcome.DENIED, DenialReason.APPROVAL_DENIED)
    assert count_rows(store_url, "operations") == 1
    assert receiver.counts().effects == 1


def test_arguments_are_strict_and_extra_fields_refused(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A smuggled field or a coerced type is refused and writes no proposal."""
    refund = declare_refund(app, receiver)
    with pytest.raises(InvalidInput):
        app.propose(AGENT, refund, **REFUND, approved_by="rita")
    with pytest.raises(InvalidInput):
        app.propose(AGENT, refund, order_id="ord-1", amount_minor="30", currency="EUR")
    assert count_rows(store_url, "proposals") == 0


def test_lost_reply_is_uncertain_until_recovery(
    app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """A lost reply reports OUTCOME_UNKNOWN; a recovery pass looks it up and settles it."""
    refund = declare_refund(app, receiver)
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    result = app.perform(AGENT, proposal)
    assert (result.state, result.uncertain) == (OperationState.OUTCOME_UNKNOWN, True)
    clock.advance(31)
    report = app.recover()
    assert report.resolved == [("acme", proposal.operation_id, "SUCCEEDED")]
    assert app.status(AGENT, proposal).state is OperationState.SUCCEEDED
    assert receiver.counts().effects == 1


def test_manual_review_is_escalated_and_resolved_by_its_owner(
    app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """An escalated operation is resolved only by its owner, only with an authoritative answer."""
    refund = declare_refund(app, receiver)
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    receiver.lookup_mode = LookupMode.UNKNOWN
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    app.perform(AGENT, proposal)
    ops = Context(tenant_id="acme", actor_id="oscar", roles=frozenset({"payments-ops"}))
    escalated = app.escalate(ops, proposal, reason="customer called", owner="payments-ops")
    assert escalated.state is OperationState.MANUAL_REVIEW
    receipt = receiver.receipt(app.operation(ops, proposal).idempotency_key)
    with pytest.raises(NotPermitted):
        app.resolve(AGENT, proposal, Observation.accepted(receipt, "ops/ticket-1"))
    with pytest.raises(InvalidInput):
        app.resolve(ops, proposal, Observation.unknown("ops/ticket-1"))
    resolved = app.resolve(ops, proposal, Observation.accepted(receipt, "ops/ticket-1"))
    assert (resolved.state, resolved.provider_reference) == (OperationState.SUCCEEDED, receipt)
    with pytest.raises(InvalidTransition):
        app.resolve(ops, proposal, Observation.accepted(receipt, "ops/ticket-1"))
    assert app.capacity(RITA, "refunds").committed == 30
    assert receiver.counts().effects == 1


def test_retry_is_authorized_explicitly(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A retryable rejection waits for an explicit retry; the retry performs it under one key."""
    refund = declare_refund(app, receiver)
    receiver.submit_mode = SubmitMode.RETRYABLE_REJECT
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    assert app.perform(AGENT, proposal).state is OperationState.RETRY_PENDING
    receiver.submit_mode = SubmitMode.ACCEPT
    assert app.authorize_retry(AGENT, proposal).state is OperationState.READY
    assert app.perform(AGENT, proposal).state is OperationState.SUCCEEDED
    with pytest.raises(InvalidTransition):
        app.authorize_retry(AGENT, proposal)
    assert count_rows(store_url, "attempts") == 2
    assert receiver.counts().effects == 1


def test_capacity_limit_denies_what_would_overspend(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """A pool limit set through the facade denies the admission that would exceed it."""
    refund = declare_refund(app, receiver)
    assert app.set_capacity_limit(AGENT, "refunds", 40).limit == 40
    first = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, first)
    assert app.perform(AGENT, first).outcome is EffectOutcome.PERFORMED
    second = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, second)
    denied = app.perform(AGENT, second)
    assert denied.reason is DenialReason.CAPACITY_EXCEEDED
    assert app.capacity(RITA, "refunds").available == 10
    assert receiver.counts().effects == 1


def test_other_tenants_see_nothing(app: EffectLedger, receiver: SimulatedReceiver) -> None:
    """Every read and step of another tenant's operation is "not found", even for its auditor.

    A perform is answered like any unknown proposal: a ``not_found`` denial, not an exception.
    """
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    app.perform(AGENT, proposal)
    stranger = Context(
        tenant_id="globex", actor_id="agent-7", roles=frozenset({"agent", "auditor"})
    )
    for read in (app.status, app.operation, app.events, app.explain):
        with pytest.raises(NotFound):
            read(stranger, proposal.operation_id)
    with pytest.raises(NotFound):
        app.proposal(stranger, proposal.proposal_id)
    refused = app.perform(stranger, proposal.proposal_id)
    assert (refused.outcome, refused.reason) == (EffectOutcome.DENIED, DenialReason.NOT_FOUND)
    assert refused.operation_id is None
    with pytest.raises(NotFound):
        app.escalate(stranger, proposal.operation_id, reason="x")
    assert receiver.counts().effects == 1
    assert count_rows(app.store.url, "operations") == 1


def test_the_tenants_views_need_a_reviewers_role(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """Operations, trails, explanations and capacity need approver or auditor: not_permitted.

    Everyone sees their own proposal and the state of their own operation; another actor's
    proposal or operation reads as unknown unless the reader reviews (or owns its review).
    """
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    app.perform(AGENT, proposal)
    views = (
        lambda who: app.operations(who),
        lambda who: app.events(who, proposal),
        lambda who: app.explain(who, proposal),
        lambda who: app.capacity(who, "refunds"),
    )
    mallory = Context(tenant_id="acme", actor_id="mallory", roles=frozenset({"agent"}))
    auditor = Context(tenant_id="acme", actor_id="ada", roles=frozenset({"auditor"}))
    for view in views:
        for refused in (AGENT, mallory):
            with pytest.raises(NotPermitted) as raised:
                view(refused)
            assert raised.value.code == "not_permitted"
            assert raised.value.details["needs"] == ["approver", "auditor"]
        assert view(RITA) == view(auditor)
    assert app.proposal(AGENT, proposal.proposal_id).digest == proposal.digest
    assert app.operation(AGENT, proposal).operation_id == proposal.operation_id
    assert app.status(AGENT, proposal).state is OperationState.SUCCEEDED
    with pytest.raises(NotFound):
        app.proposal(mallory, proposal.proposal_id)
    with pytest.raises(NotFound):
        app.operation(mallory, proposal)
    assert app.operation(auditor, proposal).requester_id == "agent-7"
    assert app.proposal(auditor, proposal.proposal_id).proposer_id == "agent-7"


def test_lower_layer_actions_and_destinations_keep_working(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """An existing Action with an existing Destination class registers and performs once."""
    ref = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    refund = app.register(refund_action(orders=OrderBook(), destination=ref), receiver)
    proposal = app.propose(AGENT, refund, {**REFUND, "reason": "damaged"})
    app.approve(RITA, proposal)
    assert app.perform(AGENT, proposal).state is OperationState.SUCCEEDED
    with pytest.raises(InvalidInput):
        declare_refund(app, receiver)  # the same endpoint already has an adapter
    assert receiver.counts().effects == 1


def test_evidence_is_sealed_and_exported(
    app: EffectLedger, receiver: SimulatedReceiver, tmp_path: Path, store_url: str
) -> None:
    """seal and export produce a bundle that verifies offline with the verifier key."""
    signer_key, verifier_key = new_key_pair("acme-log")
    with connect(store_url, signer=Signer.from_key_string(signer_key)) as sealing:
        refund = declare_refund(sealing, receiver)
        proposal = sealing.propose(AGENT, refund, **REFUND)
        sealing.approve(RITA, proposal)
        sealing.perform(AGENT, proposal)
        assert sealing.seal(AGENT).sealed == 5
        bundle = tmp_path / "acme.bundle"
        assert sealing.export(AGENT, bundle).events == 5
    assert verify_bundle(bundle, [verifier_key]).ok


def test_sixteen_threads_perform_one_proposal_once(
    app: EffectLedger, receiver: SimulatedReceiver, store_url: str
) -> None:
    """16 threads perform one approved proposal: one operation, one attempt, one effect."""
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    barrier = threading.Barrier(16)
    answers: list[EffectOutcome | str] = []

    def perform() -> None:
        barrier.wait()
        try:
            answers.append(app.perform(AGENT, proposal).outcome)
        except EffectLedgerError as exc:  # a lost race is an error of the tree, never a crash
            answers.append(exc.code)

    threads = [threading.Thread(target=perform) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 16
    assert EffectOutcome.PERFORMED in answers
    assert count_rows(store_url, "operations") == 1
    assert count_rows(store_url, "attempts") == 1
    assert count_rows(store_url, "approval_consumptions") == 1
    assert receiver.counts().effects == 1


@pytest.mark.slow
def test_four_processes_perform_one_proposal_once(
    receiver: SimulatedReceiver, store_url: str
) -> None:
    """4 processes connect and perform one approved proposal: one attempt, one effect."""
    with connect(store_url) as app:  # the system clock, as the worker processes have
        refund = declare_refund(app, receiver)
        proposal = app.propose(AGENT, refund, **REFUND)
        app.approve(RITA, proposal)
    command = [
        sys.executable,
        "-m",
        "tests.acceptance.app_support",
        store_url,
        str(receiver.path),
        proposal.proposal_id,
    ]
    workers = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    outcomes = [worker.communicate(timeout=60)[0].strip() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0, 0]
    assert "performed" in outcomes
    assert count_rows(store_url, "operations") == 1
    assert count_rows(store_url, "attempts") == 1
    assert receiver.counts().effects == 1


def test_connect_takes_the_url_from_the_environment_then_a_local_file(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a URL, connect opens $EFFECTLEDGER_DB, and without that ./effectledger.db."""
    monkeypatch.setenv("EFFECTLEDGER_DB", store_url)
    with connect() as app:
        assert without_store_options(app.store.url) == without_store_options(store_url)
        assert app.operations(RITA) == []
    monkeypatch.delenv("EFFECTLEDGER_DB")
    monkeypatch.chdir(tmp_path)
    with connect() as app:
        assert app.store.dialect == "sqlite"
    assert (tmp_path / "effectledger.db").exists()
