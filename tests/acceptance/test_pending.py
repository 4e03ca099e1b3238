"""The reviewer's queue: what waits, why it waits and when it expires, through the one object.

Every test runs on both backends over real rows: admitted, denied, expired and self-proposed
proposals leave the queue, paging returns each waiting proposal exactly once, and the one
access rule refuses the queue to an actor without a reviewer's role.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from effectledger import (
    ApprovalRefused,
    EffectLedger,
    InvalidInput,
    LedgerSettings,
    ManualClock,
    NotPermitted,
    RulePolicy,
    SimulatedReceiver,
    SubmitMode,
    connect,
)
from effectledger.model import Context
from tests.acceptance.app_support import AGENT, RITA, Refund, declare_refund
from tests.conftest import count_rows

SAM = Context(tenant_id="acme", actor_id="sam", roles=frozenset({"approver"}))
AUDITOR = Context(tenant_id="acme", actor_id="ann", roles=frozenset({"auditor"}))


@pytest.fixture
def app(store_url: str, clock: ManualClock, settings: LedgerSettings) -> Iterator[EffectLedger]:
    """The facade over the test's store and clock."""
    with connect(store_url, clock=clock, settings=settings) as opened:
        yield opened


def _refund(order: str, amount: int = 10) -> dict[str, object]:
    return {"order_id": order, "amount_minor": amount, "currency": "EUR"}


def test_queue_lists_only_what_waits(
    app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Admitted, denied and expired proposals leave the queue; each entry says why it waits."""
    refund = declare_refund(app, receiver)
    done, denied, waiting = (app.propose(AGENT, refund, **_refund(f"ord-{i}")) for i in range(3))
    app.approve(RITA, done)
    app.perform(AGENT, done)
    app.deny(RITA, denied, reason="duplicate")
    clock.advance(timedelta(minutes=5))
    late = app.propose(AGENT, refund, **_refund("ord-late"))
    page = app.pending(RITA)
    assert [entry.proposal.proposal_id for entry in page.entries] == [
        waiting.proposal_id,
        late.proposal_id,
    ]
    first = page.entries[0]
    assert first.approvals_required == 1
    assert first.approvals_remaining == 1
    assert "1 more needed" in first.waits_for
    assert first.expires_at == waiting.created_at + timedelta(minutes=15)
    assert first.to_dict(page.read_at)["expires_in_seconds"] == 10 * 60
    assert "expires in 10 min" in first.to_dict(page.read_at)["expires"]
    assert page.next_cursor is None
    clock.advance(timedelta(minutes=11))
    assert [e.proposal.proposal_id for e in app.pending(RITA).entries] == [late.proposal_id]


def test_queue_offers_a_reviewer_only_what_they_may_decide(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """A reviewer's own proposals, and those with every approval, are not offered; others are."""
    refund = declare_refund(app, receiver)
    by_rita = app.propose(RITA, refund, **_refund("ord-r"))
    by_agent = app.propose(AGENT, refund, **_refund("ord-a"))
    approved = app.propose(AGENT, refund, **_refund("ord-b"))
    app.approve(Context(tenant_id="acme", actor_id="tom", roles=frozenset({"approver"})), approved)
    assert [e.proposal.proposal_id for e in app.pending(RITA).entries] == [by_agent.proposal_id]
    assert {e.proposal.proposal_id for e in app.pending(SAM).entries} == {
        by_rita.proposal_id,
        by_agent.proposal_id,
    }
    assert app.pending(AUDITOR).entries == ()  # may read, may not approve
    with pytest.raises(NotPermitted):
        app.pending(AGENT)


def test_queue_counts_the_approvals_a_policy_still_needs(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """Under a two-approver policy one grant leaves the proposal waiting for one more approver."""
    two = app.action(
        name="big_refund",
        contract="refund-v1",
        arguments=Refund,
        destination=receiver,
        policy=RulePolicy(version="two-approvers-v1", approvals_required=2),
    )
    proposal = app.propose(AGENT, two, **_refund("ord-big", 900))
    app.approve(RITA, proposal)
    assert app.pending(RITA).entries == ()  # rita approved already
    (entry,) = app.pending(SAM).entries
    assert (entry.approvals_granted, entry.approvals_remaining) == (1, 1)
    assert entry.waits_for == (
        "policy two-approvers-v1 needs 2 distinct approvers; 1 approved, 1 more needed"
    )


def test_queue_filters_and_pages_each_entry_once(
    app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Filters narrow the queue and paging in either order returns every entry exactly once."""
    refund = declare_refund(app, receiver)
    other = Context(tenant_id="acme", actor_id="agent-9")
    made = []
    for index in range(23):
        clock.advance(timedelta(seconds=1))
        proposer = AGENT if index % 2 else other
        made.append(app.propose(proposer, refund, **_refund(f"ord-{index}")))
    app.propose(Context(tenant_id="globex", actor_id="agent-7"), refund, **_refund("ord-x"))
    for order in ("expiring", "newest"):
        seen: list[str] = []
        cursor = None
        while True:
            page = app.pending(RITA, limit=5, after=cursor, order=order)
            seen += [entry.proposal.proposal_id for entry in page.entries]
            cursor = page.next_cursor
            if cursor is None:
                break
        expected = [p.proposal_id for p in made]
        assert seen == (expected if order == "expiring" else expected[::-1])
    by_agent = app.pending(RITA, proposer="agent-7", limit=100).entries
    assert {e.proposal.proposal_id for e in by_agent} == {p.proposal_id for p in made[1::2]}
    soon = app.pending(RITA, expiring_before=made[2].expires_at, limit=100).entries
    assert [e.proposal.proposal_id for e in soon] == [p.proposal_id for p in made[:2]]
    assert app.pending(RITA, action="no_such_action").entries == ()
    assert app.pending(RITA, pool="elsewhere").entries == ()
    assert len(app.pending(RITA, pool="refunds", limit=100).entries) == 23


def test_queue_refuses_bad_input(app: EffectLedger, receiver: SimulatedReceiver) -> None:
    """A forged cursor, an unknown order or an out-of-range limit is invalid input."""
    declare_refund(app, receiver)
    for kwargs in ({"after": "1.x;drop"}, {"order": "oldest"}, {"limit": 0}, {"limit": 501}):
        with pytest.raises(InvalidInput):
            app.pending(RITA, **kwargs)  # type: ignore[arg-type]


def test_proposal_lifetime_is_set_per_ledger_and_per_action(
    store_url: str, clock: ManualClock, receiver: SimulatedReceiver
) -> None:
    """The ledger's proposal_ttl is every action's default; an action's own ttl overrides it."""
    settings = LedgerSettings(proposal_ttl=timedelta(hours=2))
    with connect(store_url, clock=clock, settings=settings) as app:
        default = app.action(
            name="refund", contract="refund-v1", arguments=Refund, destination=receiver
        )
        own = app.action(
            name="quick_refund",
            contract="refund-v1",
            arguments=Refund,
            destination=receiver,
            ttl=timedelta(minutes=3),
        )
        slow = app.propose(AGENT, default, **_refund("ord-1"))
        quick = app.propose(AGENT, own, **_refund("ord-2"))
    assert slow.expires_at - slow.created_at == timedelta(hours=2)
    assert quick.expires_at - quick.created_at == timedelta(minutes=3)


def test_a_decision_is_refused_once_the_proposal_no_longer_waits(
    app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock, store_url: str
) -> None:
    """decide refuses an expired, denied, approved, own or stale proposal, writing nothing."""
    versions = {"ord-s": "v1"}
    refund = app.action(
        name="refund",
        contract="refund-v1",
        arguments=Refund,
        destination=receiver,
        target=lambda arguments: arguments.order_id,
        version=lambda context, target: versions.get(target, "v1"),
    )
    expired, denied, approved, stale = (
        app.propose(AGENT, refund, **_refund(order)) for order in ("e", "d", "a", "ord-s")
    )
    own = app.propose(RITA, refund, **_refund("own"))
    app.deny(SAM, denied, reason="duplicate")
    app.approve(SAM, approved)
    versions["ord-s"] = "v2"
    before = count_rows(store_url, "approvals")
    for proposal, reason in ((approved, "proposal_approved"), (stale, "stale_resource_version")):
        with pytest.raises(ApprovalRefused) as refused:
            app.decide(RITA, proposal.proposal_id, digest=proposal.digest, approve=True)
        assert refused.value.details["reason"] == reason
    assert app.review(RITA, stale.proposal_id).stale
    assert "propose again" in app.review(RITA, stale.proposal_id).standing
    clock.advance(timedelta(minutes=16))
    for proposal, reason in ((expired, "proposal_expired"), (denied, "proposal_denied")):
        for approve in (True, False):
            with pytest.raises(ApprovalRefused) as refused:
                app.decide(
                    RITA, proposal.proposal_id, digest=proposal.digest, approve=approve, reason="x"
                )
            assert refused.value.details["reason"] == reason
    with pytest.raises(ApprovalRefused) as refused:
        app.decide(RITA, own.proposal_id, digest=own.digest, approve=True)
    assert refused.value.details["reason"] == "self_approval"
    assert count_rows(store_url, "approvals") == before
    assert "propose again" in app.review(RITA, expired.proposal_id).standing


def test_a_reviewer_may_still_deny_what_others_approved(
    app: EffectLedger, receiver: SimulatedReceiver
) -> None:
    """A proposal with every approval, not yet admitted, can still be denied, and is then closed."""
    refund = declare_refund(app, receiver)
    approved = app.propose(AGENT, refund, **_refund("ord-1"))
    app.approve(SAM, approved)
    assert app.review(RITA, approved.proposal_id).state.value == "approved"
    denial = app.decide(
        RITA, approved.proposal_id, digest=approved.digest, approve=False, reason="no"
    )
    assert not denial.granted
    assert app.review(RITA, approved.proposal_id).state.value == "denied"


def test_manual_reviews_list_only_operations_in_review(
    app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Only MANUAL_REVIEW operations are listed, soonest deadline first; others are not."""
    refund = declare_refund(app, receiver)
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    made = []
    for order in ("ord-a", "ord-b", "ord-c"):
        proposal = app.propose(AGENT, refund, **_refund(order))
        app.approve(RITA, proposal)
        app.perform(AGENT, proposal)
        made.append(proposal)
        clock.advance(timedelta(minutes=1))
    app.escalate(RITA, made[2], reason="customer called", owner="operations")
    clock.advance(timedelta(minutes=1))
    app.escalate(RITA, made[0], reason="customer called", owner="operations")
    listed = [op.operation_id for op in app.manual_reviews(RITA)]
    assert listed == [made[2].operation_id, made[0].operation_id]
    with pytest.raises(NotPermitted):
        app.manual_reviews(AGENT)
