"""The proposer's performs of one proposal while approvers race: an admitted one never reads
"denied". 16 threads and 4 processes on both backends, the rows and effects counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.events.chain import verify_chain
from tests.conftest import count_rows
from tests.faults._harness import spawn_all
from tests.races.test_authority_races import PROCESSES, THREADS, effects, race, services
from tests.races.world import AGENT, REFUND_30, approve_and_perform_in_process, approver

__all__ = ["services"]


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_racing_approvals_and_performs_of_one_proposal_perform_once_and_replay(
    mode: str, services: Callable[[str], EffectLedger], store_url: str, tmp_path: Path
) -> None:
    """16 callers each approve the proposal and perform it with their own approval: one perform
    is performed, the other 15 answer replayed (never approval_consumed), one approval is
    consumed, one attempt and one effect exist."""
    service = services("approval")
    proposal = service.propose(AGENT, "refund_order", REFUND_30)

    def approve_and_perform(index: int) -> tuple[str, str | None]:
        approval = service.approve(approver(index), proposal.proposal_id, digest=proposal.digest)
        result = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
        return result.outcome, result.reason

    if mode == "threads":
        outcomes = race(THREADS, approve_and_perform)
    else:
        chunks = [list(range(THREADS))[index::PROCESSES] for index in range(PROCESSES)]
        reports = spawn_all(
            approve_and_perform_in_process,
            [(store_url, str(tmp_path), proposal.proposal_id, proposal.digest, chunk)
             for chunk in chunks],
        )  # fmt: skip
        outcomes = [(o, r) for report in reports for o, r, _ in report["outcomes"]]
    assert Counter(outcomes) == {("performed", None): 1, ("replayed", None): THREADS - 1}
    assert count_rows(store_url, "approvals") == THREADS
    assert count_rows(store_url, "approval_consumptions") == 1
    assert count_rows(store_url, "operations") == 1
    assert count_rows(store_url, "attempts") == 1
    assert effects(tmp_path) == 1
    verify_chain(service.ledger.events(AGENT, proposal.operation_id))


def test_a_later_approval_of_an_admitted_proposal_replays_and_is_not_spent(
    services: Callable[[str], EffectLedger], store_url: str
) -> None:
    """After the proposal was performed with one approval, the proposer's perform with a second
    approval answers replayed with the recorded state and leaves that approval unconsumed."""
    service = services("approval")
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    first = service.approve(approver(1), proposal.proposal_id, digest=proposal.digest)
    assert service.perform(AGENT, proposal.proposal_id, approval=first.approval_id).outcome == (
        "performed"
    )
    second = service.approve(approver(2), proposal.proposal_id, digest=proposal.digest)
    again = service.perform(AGENT, proposal.proposal_id, approval=second.approval_id)
    assert (again.outcome, str(again.state)) == ("replayed", "SUCCEEDED")
    assert service.authority.approval_consumed_by(AGENT, second.approval_id) is None
    assert count_rows(store_url, "approval_consumptions") == 1
    assert count_rows(store_url, "attempts") == 1
