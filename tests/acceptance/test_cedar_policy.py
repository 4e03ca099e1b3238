"""Policies kept outside code: the same admission rules decided by Cedar policy text."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectledger import ManualClock
from effectledger.errors import ApprovalRefused, InvalidInput
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER, build_world
from tests.conftest import require_module

POLICIES = """
permit(principal in Role::"agent", action == Action::"request", resource)
when { context.units <= 1000 };
permit(principal in Role::"agent", action == Action::"preauthorize", resource)
when { context.units <= 10 && context.pool == "refunds" };
permit(principal in Role::"approver", action == Action::"approve", resource)
when { context.units <= 500 };
"""


def cedar_policy() -> object:
    require_module("cedarpy")
    from effectledger.actions.cedar import CedarPolicy

    return CedarPolicy(version="cedar-refunds-1", policies=POLICIES)


def test_cedar_decides_tiers(store_url: str, tmp_path: Path, clock: ManualClock) -> None:
    """Cedar pre-authorizes 10, requires approval for 30 and denies 2000, with real effects."""
    world = build_world(store_url, tmp_path, clock, cedar_policy())  # type: ignore[arg-type]
    try:
        small = world.proposal({**REFUND_30, "amount_minor": 10})
        assert world.service.perform(AGENT, small.proposal_id).outcome == "performed"
        medium = world.proposal({**REFUND_30, "order_id": "ord-2"})
        assert world.service.perform(AGENT, medium.proposal_id).reason == "approval_missing"
        approval = world.service.approve(REVIEWER, medium.proposal_id, digest=medium.digest)
        done = world.service.perform(AGENT, medium.proposal_id, approval=approval.approval_id)
        assert done.outcome == "performed"
        huge = world.proposal({**REFUND_30, "order_id": "ord-3", "amount_minor": 2000})
        assert world.service.perform(AGENT, huge.proposal_id).reason == "policy_denied"
        assert world.effects() == 2
        assert world.units() == (0, 40)
    finally:
        world.ledger.store.close()


def test_cedar_limits_who_may_approve(store_url: str, tmp_path: Path, clock: ManualClock) -> None:
    """An approver outside Cedar's approve rule is refused and nothing is recorded."""
    world = build_world(store_url, tmp_path, clock, cedar_policy())  # type: ignore[arg-type]
    try:
        big = world.proposal({**REFUND_30, "amount_minor": 800})
        with pytest.raises(ApprovalRefused) as refused:
            world.service.approve(REVIEWER, big.proposal_id, digest=big.digest)
        assert refused.value.reason == "not_an_approver"
    finally:
        world.ledger.store.close()


def test_unparseable_cedar_is_refused() -> None:
    """Policy text that does not parse is refused when the policy is built."""
    require_module("cedarpy")
    from effectledger.actions.cedar import CedarPolicy

    with pytest.raises(InvalidInput, match="do not parse"):
        CedarPolicy(version="broken", policies="permit(principal, action resource);")
