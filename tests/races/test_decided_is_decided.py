"""Decided means decided: a proposal whose operation is admitted takes no approval and no denial.

Once a proposal's operation exists (READY, in flight, performed, failed: any state) its decision
was spent. A later ``approve`` or ``deny`` is refused ``already_admitted`` and leaves the durable
facts as they were: no decision row, no event on the trail. 16 approvers racing one perform leave
only the approvals that were recorded before the admission, and the receiver counts one effect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger, OperationState, SubmitMode
from effectledger.errors import ApprovalRefused
from tests.conftest import count_rows
from tests.races.test_decisions import receiver, service
from tests.races.world import AGENT, REFUND_30, approver, build, close

__all__ = ["service"]


@pytest.fixture
def budget_service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service whose policy pre-authorizes small refunds (no approval needed)."""
    made = build(store_url, tmp_path, "budget")
    yield made
    close(made)


def facts(store_url: str) -> tuple[int, int]:
    """The decision rows and the audit events the ledger holds."""
    return count_rows(store_url, "approvals"), count_rows(store_url, "audit_events")


def admitted_ready(service: EffectLedger) -> tuple[str, str]:
    """Approved and admitted, not yet dispatched (READY)."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    service.authority.admit(AGENT, proposal.proposal_id, approval_id=approval.approval_id)
    return proposal.proposal_id, proposal.digest


def performed(service: EffectLedger) -> tuple[str, str]:
    """Approved, admitted and performed (SUCCEEDED)."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert service.perform(AGENT, proposal.proposal_id).state is OperationState.SUCCEEDED
    return proposal.proposal_id, proposal.digest


def rejected(service: EffectLedger) -> tuple[str, str]:
    """Approved, admitted and permanently rejected by the destination (REJECTED)."""
    receiver(service).submit_mode = SubmitMode.PERMANENT_REJECT
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert service.perform(AGENT, proposal.proposal_id).state is OperationState.REJECTED
    return proposal.proposal_id, proposal.digest


def unknown(service: EffectLedger) -> tuple[str, str]:
    """Approved, admitted, accepted by the destination with its reply lost (OUTCOME_UNKNOWN)."""
    receiver(service).submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert service.perform(AGENT, proposal.proposal_id).state is OperationState.OUTCOME_UNKNOWN
    return proposal.proposal_id, proposal.digest


STATES: dict[str, Callable[[EffectLedger], tuple[str, str]]] = {
    "ready": admitted_ready,
    "succeeded": performed,
    "rejected": rejected,
    "outcome_unknown": unknown,
}


@pytest.mark.parametrize("state", sorted(STATES))
def test_an_admitted_proposal_takes_no_further_decision(
    service: EffectLedger, store_url: str, state: str
) -> None:
    """approve and deny of a proposal admitted (READY, SUCCEEDED, REJECTED, OUTCOME_UNKNOWN) are
    refused already_admitted, and neither writes a decision row nor appends an event."""
    proposal_id, digest = STATES[state](service)
    before = facts(store_url)
    effects = receiver(service).counts().effects
    with pytest.raises(ApprovalRefused) as approving:
        service.approve(approver(1), proposal_id, digest=digest)
    with pytest.raises(ApprovalRefused) as denying:
        service.deny(approver(1), proposal_id, digest=digest, reason="too late")
    with pytest.raises(ApprovalRefused) as again:
        service.approve(approver(0), proposal_id, digest=digest)  # the one who approved it
    assert {e.value.reason for e in (approving, denying, again)} == {"already_admitted"}
    assert approving.value.code == "approval_refused"
    assert facts(store_url) == before
    assert receiver(service).counts().effects == effects


def test_a_preauthorized_operation_takes_no_approval(
    budget_service: EffectLedger, store_url: str
) -> None:
    """A proposal performed on a standing pre-authorization is decided too: a late approval is
    refused already_admitted, and no approval row of kind 'approval' is written."""
    service = budget_service
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    assert service.perform(AGENT, proposal.proposal_id).state is OperationState.SUCCEEDED
    before = facts(store_url)
    with pytest.raises(ApprovalRefused) as refused:
        service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert refused.value.reason == "already_admitted"
    assert facts(store_url) == before
    assert count_rows(store_url, "approvals", "kind = 'approval'") == 0


def test_the_desk_decision_says_already_admitted_too(service: EffectLedger, store_url: str) -> None:
    """The reviewer's decide (desk, command line) refuses with the same reason, writes nothing."""
    proposal_id, digest = performed(service)
    before = facts(store_url)
    for approve in (True, False):
        with pytest.raises(ApprovalRefused) as refused:
            service.decide(approver(1), proposal_id, digest=digest, approve=approve, reason="x")
        assert refused.value.reason == "already_admitted"
    assert facts(store_url) == before


def test_sixteen_approvers_racing_one_perform(service: EffectLedger, store_url: str) -> None:
    """16 threads approve while the proposer performs: every approval recorded precedes the
    admission on the trail, every later one is refused already_admitted, one effect."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    barrier = threading.Barrier(17)
    outcomes: list[str] = []
    performs: list[str] = []

    def approve(number: int) -> None:
        barrier.wait()
        try:
            service.approve(approver(number), proposal.proposal_id, digest=proposal.digest)
            outcomes.append("granted")
        except ApprovalRefused as exc:
            outcomes.append(str(exc.details["reason"]))

    def perform() -> None:
        barrier.wait()
        performs.append(str(service.perform(AGENT, proposal.proposal_id).outcome))

    threads = [threading.Thread(target=approve, args=(n,)) for n in range(1, 17)]
    threads.append(threading.Thread(target=perform))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert performs == ["performed"]
    assert len(outcomes) == 16
    assert set(outcomes) <= {"granted", "already_admitted"}
    granted = count_rows(store_url, "approvals", "decision = 'granted'")
    assert granted == 1 + outcomes.count("granted")
    trail = service.ledger.events(AGENT, proposal.operation_id)
    kinds = [event.event_type for event in trail]
    admission = kinds.index("OperationAdmitted")
    assert kinds.count("ApprovalGranted") == granted
    assert "ApprovalGranted" not in kinds[admission:]
    assert "ApprovalDenied" not in kinds
    assert count_rows(store_url, "operations") == 1
    assert receiver(service).counts().effects == 1
