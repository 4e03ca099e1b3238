"""The proposer's performs of one proposal, each with its own approval: an admitted one never
reads "denied" or approval_consumed. 16 threads and 4 processes on both backends, the rows and
effects counted.

Every approval here is granted before the proposal is admitted: once it is, a further ``approve``
is refused ``already_admitted`` (tests/races/test_decided_is_decided.py races that). An approval
granted in time and presented after another one admitted the proposal answers replayed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from effectledger import EffectLedger, SubmitMode
from effectledger.errors import ApprovalRefused
from effectledger.events.chain import verify_chain
from tests.conftest import count_rows
from tests.faults._harness import spawn_all
from tests.races.test_authority_races import PROCESSES, THREADS, effects, race, services
from tests.races.world import AGENT, REFUND_30, approver, perform_answered_in_process

__all__ = ["services"]


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_racing_performs_with_their_own_approvals_perform_once_and_replay(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 approvers approve the proposal, then 16 callers perform it at once, each with one of
    those approvals: one perform is performed, the other 15 answer replayed (never
    approval_consumed), one approval is consumed, one attempt and one effect exist."""
    service = services("approval")
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approvals = [
        service.approve(approver(index), proposal.proposal_id, digest=proposal.digest).approval_id
        for index in range(THREADS)
    ]

    if mode == "threads":
        outcomes = race(
            THREADS,
            lambda index: (
                (
                    result := service.perform(
                        AGENT, proposal.proposal_id, approval=approvals[index]
                    )
                ).outcome,
                result.reason,
            ),
        )
    else:
        accept = SubmitMode.ACCEPT.value
        calls = [(proposal.proposal_id, approval, accept) for approval in approvals]
        reports = spawn_all(
            perform_answered_in_process,
            [(store_url, str(tmp_path), calls[index::PROCESSES]) for index in range(PROCESSES)],
        )
        outcomes = [(o, r) for report in reports for o, r, _ in report["outcomes"]]
    assert Counter(outcomes) == {("performed", None): 1, ("replayed", None): THREADS - 1}
    assert count_rows(store_url, "approvals") == THREADS
    assert count_rows(store_url, "approval_consumptions") == 1
    assert count_rows(store_url, "operations") == 1
    assert count_rows(store_url, "attempts") == 1
    assert effects(tmp_path) == 1
    verify_chain(service.ledger.events(AGENT, proposal.operation_id))


def test_an_approval_granted_in_time_and_presented_late_replays_and_is_not_spent(
    services: Callable[[str], EffectLedger], store_url: str
) -> None:
    """Two approvers approve; the proposal is performed with the first approval. The proposer's
    perform with the second answers replayed with the recorded state and leaves that approval
    unconsumed, and a third approval, asked for now, is refused with nothing recorded."""
    service = services("approval")
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    first = service.approve(approver(1), proposal.proposal_id, digest=proposal.digest)
    second = service.approve(approver(2), proposal.proposal_id, digest=proposal.digest)
    assert service.perform(AGENT, proposal.proposal_id, approval=first.approval_id).outcome == (
        "performed"
    )
    events = len(service.ledger.events(AGENT, proposal.operation_id))
    again = service.perform(AGENT, proposal.proposal_id, approval=second.approval_id)
    assert (again.outcome, str(again.state)) == ("replayed", "SUCCEEDED")
    assert service.authority.approval_consumed_by(AGENT, second.approval_id) is None
    with pytest.raises(ApprovalRefused) as refused:
        service.approve(approver(3), proposal.proposal_id, digest=proposal.digest)
    assert refused.value.reason == "already_admitted"
    assert count_rows(store_url, "approvals") == 2
    assert count_rows(store_url, "approval_consumptions") == 1
    assert count_rows(store_url, "attempts") == 1
    assert len(service.ledger.events(AGENT, proposal.operation_id)) == events
