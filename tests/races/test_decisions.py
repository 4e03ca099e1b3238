"""Decisions are final, ids belong to what took them first, bad authority input writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import (
    Command,
    DestinationRef,
    EffectLedger,
    InvalidInput,
    OperationIdTaken,
    OperationState,
    SimulatedReceiver,
)
from effectledger.errors import ApprovalRefused
from effectledger.model.authority import Correlation
from tests.conftest import count_rows
from tests.races.world import AGENT, MALLORY, REFUND_30, approver, build, close


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


@pytest.fixture
def two_approver_service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service whose policy needs two distinct approvers."""
    made = build(store_url, tmp_path, "two-approvers")
    yield made
    close(made)


def receiver(service: EffectLedger) -> SimulatedReceiver:
    (destination,) = service.destinations.values()
    assert isinstance(destination, SimulatedReceiver)
    return destination


def test_a_denial_after_an_approval_stops_the_effect(service: EffectLedger) -> None:
    """Rita approves, Carol denies, the agent performs: denied, and nothing reaches the receiver."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    rita = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    service.deny(approver(1), proposal.proposal_id, digest=proposal.digest, reason="duplicate")
    result = service.perform(AGENT, proposal.proposal_id, approval=rita.approval_id)
    assert (result.outcome, result.reason) == ("denied", "approval_denied")
    assert receiver(service).counts().submissions == 0
    assert service.authority.approval_consumed_by(AGENT, rita.approval_id) is None


def test_an_approval_after_a_denial_is_refused(service: EffectLedger, store_url: str) -> None:
    """Carol denies, then Rita's approval is refused: the proposal is closed for good."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    service.deny(approver(1), proposal.proposal_id, digest=proposal.digest, reason="duplicate")
    with pytest.raises(ApprovalRefused) as refused:
        service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert refused.value.reason == "proposal_denied"
    assert count_rows(store_url, "approvals") == 1
    result = service.perform(AGENT, proposal.proposal_id)
    assert (result.outcome, result.reason) == ("denied", "approval_denied")


def test_an_admitted_proposal_can_no_longer_be_denied(service: EffectLedger) -> None:
    """A denial after admission is refused: the effect may already be under way."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    with pytest.raises(ApprovalRefused) as refused:
        service.deny(approver(1), proposal.proposal_id, digest=proposal.digest, reason="late")
    assert refused.value.reason == "already_admitted"


def test_a_policy_can_require_two_distinct_approvers(
    two_approver_service: EffectLedger, store_url: str
) -> None:
    """With two approvers required, one approval admits nothing; two admit once, both spent."""
    service = two_approver_service
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    first = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)  # same person
    result = service.perform(AGENT, proposal.proposal_id, approval=first.approval_id)
    assert (result.outcome, result.reason) == ("denied", "approval_missing")
    assert receiver(service).counts().submissions == 0
    service.approve(approver(1), proposal.proposal_id, digest=proposal.digest)
    result = service.perform(AGENT, proposal.proposal_id, approval=first.approval_id)
    assert (result.outcome, result.state) == ("performed", OperationState.SUCCEEDED)
    assert count_rows(store_url, "approval_consumptions") == 2
    assert receiver(service).counts().effects == 1


def test_an_id_held_by_a_proposal_cannot_be_admitted_by_another_actor(
    service: EffectLedger, store_url: str
) -> None:
    """Ledger.admit by another actor cannot take a pending proposal's operation id."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    destination = next(iter(service.destinations))
    with pytest.raises(OperationIdTaken):
        service.ledger.admit(
            MALLORY,
            operation_id=proposal.operation_id,
            revision="r1",
            command=Command(action="refund_order", contract_version="refund-v1"),
            destination=destination,
            admission_reference="ticket/1",
        )
    assert count_rows(store_url, "operations") == 0
    admitted = "event_type = 'OperationAdmitted'"
    assert count_rows(store_url, "audit_events", admitted) == 0  # nor its event
    result = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert result.outcome == "performed"


def test_a_proposal_cannot_take_an_id_already_in_use(service: EffectLedger, store_url: str) -> None:
    """Proposing under an operation id that another operation or proposal holds is refused."""
    destination = DestinationRef(account_id="acct-demo", endpoint="https://receiver.invalid/v1")
    service.ledger.admit(
        MALLORY,
        operation_id="op-shared",
        revision="r1",
        command=Command(action="refund_order", contract_version="refund-v1"),
        destination=destination,
        admission_reference="ticket/1",
    )
    with pytest.raises(OperationIdTaken):
        service.propose(AGENT, "refund_order", REFUND_30, operation_id="op-shared")
    service.propose(AGENT, "refund_order", REFUND_30, operation_id="op-mine")
    with pytest.raises(OperationIdTaken):
        service.propose(AGENT, "refund_order", REFUND_30, operation_id="op-mine")
    assert count_rows(store_url, "proposals") == 1


def test_the_receiver_keeps_what_authorized_each_effect(service: EffectLedger) -> None:
    """The destination receives and keeps the approved digest, the ids, the amount and the unit."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    result = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert result.operation_id is not None
    key = service.ledger.get(AGENT, result.operation_id).idempotency_key
    effect = receiver(service).effect(key)
    assert effect is not None
    assert (effect.digest, effect.amount, effect.unit) == (proposal.digest, 30, "EUR")
    assert (effect.operation_id, effect.proposal_id, effect.approval_id) == (
        proposal.operation_id,
        proposal.proposal_id,
        approval.approval_id,
    )


def test_a_capacity_limit_change_is_recorded_on_the_pool_trail(service: EffectLedger) -> None:
    """Setting a pool's limit appends a chained CapacityLimitSet event naming who and what."""
    service.authority.set_capacity_limit("acme", "refunds", 100, actor="ops-lead")
    service.authority.set_capacity_limit("acme", "refunds", 60, actor="ops-lead")
    trail = service.ledger.events(AGENT, "pool:refunds")
    assert [(e.event_type, e.actor) for e in trail] == [("CapacityLimitSet", "ops-lead")] * 2
    assert dict(trail[1].details) == {"pool": "refunds", "limit_units": 60, "previous_units": 100}
    with pytest.raises(InvalidInput):
        service.propose(AGENT, "refund_order", REFUND_30, operation_id="pool:refunds")


# -- bad input writes nothing ----------------------------------------------------------------


@pytest.mark.parametrize(
    "expires_in",
    [timedelta(days=10**8), timedelta(seconds=-1), timedelta(0), 3600],
    ids=["huge", "negative", "zero", "not-a-timedelta"],
)
def test_an_approval_lifetime_out_of_range_is_invalid_input(
    service: EffectLedger, store_url: str, expires_in: object
) -> None:
    """approve() refuses a lifetime that is not a positive duration of at most a year."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    with pytest.raises(InvalidInput) as refused:
        service.approve(
            approver(0),
            proposal.proposal_id,
            digest=proposal.digest,
            expires_in=expires_in,  # type: ignore[arg-type]
        )
    assert refused.value.details["field"] == "expires_in"
    assert count_rows(store_url, "approvals") == 0


@pytest.mark.parametrize(
    "reason", ["\ud800", "", "x\x00y", "r" * 501], ids=["surrogate", "empty", "nul", "long"]
)
def test_a_bad_denial_reason_is_invalid_input(
    service: EffectLedger, store_url: str, reason: str
) -> None:
    """deny() refuses a reason no store can hold or that says nothing, and writes nothing."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    with pytest.raises(InvalidInput):
        service.deny(approver(0), proposal.proposal_id, digest=proposal.digest, reason=reason)
    assert count_rows(store_url, "approvals") == 0


@pytest.mark.parametrize("units", [2**70, -1, True, "100"], ids=["huge", "negative", "bool", "str"])
def test_a_capacity_limit_out_of_range_is_invalid_input(
    service: EffectLedger, store_url: str, units: object
) -> None:
    """set_capacity_limit() refuses what is not an integer every JSON reader holds exactly."""
    with pytest.raises(InvalidInput):
        service.authority.set_capacity_limit("acme", "refunds", units)  # type: ignore[arg-type]
    assert count_rows(store_url, "capacity_limits") == 0


def test_correlation_is_validated_and_may_be_a_mapping(
    service: EffectLedger, store_url: str
) -> None:
    """A correlation mapping is accepted; a non-text value or an unknown field is invalid input."""
    proposal = service.propose(
        AGENT, "refund_order", REFUND_30, correlation={"trace_id": "t-1", "tool_call_id": "c-1"}
    )
    assert dict(proposal.correlation) == {"trace_id": "t-1", "tool_call_id": "c-1"}
    with pytest.raises(InvalidInput):
        Correlation(trace_id=5)  # type: ignore[arg-type]
    for bad in ({"trace_id": 5}, {"approved_by": "admin"}, "trace"):
        with pytest.raises(InvalidInput):
            service.propose(AGENT, "refund_order", REFUND_30, correlation=bad)  # type: ignore[arg-type]
    assert count_rows(store_url, "proposals") == 1


@pytest.mark.parametrize("operation_id", ["", " ", "op id", "pool:x"])
def test_a_malformed_operation_id_is_refused_not_replaced(
    service: EffectLedger, store_url: str, operation_id: str
) -> None:
    """propose() refuses an empty, malformed or reserved operation id instead of inventing one."""
    with pytest.raises(InvalidInput) as refused:
        service.propose(AGENT, "refund_order", REFUND_30, operation_id=operation_id)
    assert refused.value.details["field"] == "operation_id"
    assert count_rows(store_url, "proposals") == 0
