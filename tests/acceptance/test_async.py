"""The async twins give the same outcomes as the sync calls, without blocking an event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from effectledger import ManualClock, OperationState, SubmitMode
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER, build_world


def test_async_flow_matches_the_sync_flow(
    store_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    """propose, approve, perform and reconcile through the async twins: one effect, reconciled."""
    world = build_world(store_url, tmp_path, clock)
    world.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY

    async def story() -> tuple[str, OperationState | None, OperationState | None]:
        service = world.service
        proposal = await service.propose_async(AGENT, "refund_order", REFUND_30)
        approval = await service.approve_async(
            REVIEWER, proposal.proposal_id, digest=proposal.digest
        )
        result = await service.perform_async(
            AGENT, proposal.proposal_id, approval_id=approval.approval_id
        )
        clock.advance(30)
        reconciled = await service.reconcile_async(AGENT, proposal.operation_id)
        return result.outcome, result.state, reconciled.state

    try:
        assert asyncio.run(story()) == (
            "performed",
            OperationState.OUTCOME_UNKNOWN,
            OperationState.SUCCEEDED,
        )
        assert world.effects() == 1
    finally:
        world.ledger.store.close()
