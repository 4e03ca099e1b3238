"""A refund world shared by the race tests: built the same way in the test and in each process.

Spawned processes get only picklable arguments (URLs, paths, ids, a policy name), rebuild the
world from the same files and release together at a barrier, so the races are real: separate
processes, separate connections, one ledger database and one receiver file.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from effectledger import (
    Context,
    DestinationRef,
    EffectLedger,
    LedgerSettings,
    ManualClock,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.actions.policy import Preauthorization, RulePolicy
from effectledger.actions.registry import ActionRegistry
from effectledger.events.authentication import TrailKeys
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store
from tests.support.app import ledger_over

START = datetime(2026, 1, 1, tzinfo=UTC)
AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
MALLORY = Context(tenant_id="acme", actor_id="mallory", roles=frozenset({"agent"}))
REFUND_30 = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR"}

POLICIES: dict[str, RulePolicy] = {
    "approval": RulePolicy(version="refund-policy-1"),
    "budget": RulePolicy(
        version="refund-policy-1",
        preauthorization=Preauthorization(
            max_units_per_operation=100, budget_units=100, budget_period=timedelta(days=1)
        ),
    ),
    "two-approvers": RulePolicy(version="refund-policy-2", approvals_required=2),
}


def approver(index: int) -> Context:
    """The ``index``-th approver of tenant acme."""
    return Context(tenant_id="acme", actor_id=f"approver-{index}", roles=frozenset({"approver"}))


def build(
    store_url: str,
    directory: Path,
    policy: str = "approval",
    *,
    trail_keys: TrailKeys | None = None,
    clock: ManualClock | None = None,
) -> EffectLedger:
    """A service over the ledger at ``store_url`` and the receiver file in ``directory``.

    ``trail_keys``: the keys the ledger authenticates its trail with (none by default).
    ``clock``: the ledger's clock (default: a manual clock at ``START``).
    """
    receiver = SimulatedReceiver(directory / "receiver.db", synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    registry = ActionRegistry(
        [refund_action(orders=OrderBook(), destination=destination, policy=POLICIES[policy])]
    )
    ledger = Ledger(
        open_store(store_url),
        clock=ManualClock(START) if clock is None else clock,
        settings=LedgerSettings(trail_keys=trail_keys),
    )
    return ledger_over(ledger, registry, [receiver])


def close(service: EffectLedger) -> None:
    """Close the service's store and receivers."""
    service.ledger.store.close()
    for destination in service.destinations.values():
        close_receiver = getattr(destination, "close", None)
        if close_receiver is not None:
            close_receiver()


def perform_in_process(
    store_url: str,
    directory: str,
    policy: str,
    calls: list[tuple[str, str, str | None]],
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Spawned: perform each ``(actor, proposal_id, approval_id)`` after the barrier."""
    service = build(store_url, Path(directory), policy)
    contexts = {AGENT.actor_id: AGENT, MALLORY.actor_id: MALLORY}
    barrier.wait()
    outcomes = []
    for actor, proposal_id, approval_id in calls:
        result = service.perform(contexts[actor], proposal_id, approval=approval_id)
        outcomes.append((result.outcome, result.reason, str(result.state)))
    close(service)
    results.put({"worker": worker, "outcomes": outcomes})


def approve_in_process(
    store_url: str,
    directory: str,
    proposal_id: str,
    digest: str,
    approvers: list[int],
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Spawned: each listed approver approves the proposal after the barrier."""
    service = build(store_url, Path(directory))
    barrier.wait()
    approved = []
    for index in approvers:
        approved.append(service.approve(approver(index), proposal_id, digest=digest).approval_id)
    close(service)
    results.put({"worker": worker, "approved": approved})


def perform_answered_in_process(
    store_url: str,
    directory: str,
    calls: list[tuple[str, str, str]],
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Spawned: perform each ``(proposal_id, approval_id, mode)`` as the agent after the
    barrier, the receiver answering each submission in that :class:`SubmitMode`."""
    service = build(store_url, Path(directory))
    receiver = next(iter(service.destinations.values()))
    barrier.wait()
    outcomes = []
    for proposal_id, approval_id, mode in calls:
        receiver.submit_mode = SubmitMode(mode)  # type: ignore[attr-defined]
        result = service.perform(AGENT, proposal_id, approval=approval_id)
        outcomes.append((result.outcome, result.reason, str(result.state)))
    close(service)
    results.put({"worker": worker, "outcomes": outcomes})


def repair_or_perform_in_process(
    store_url: str,
    directory: str,
    repairs: int,
    calls: list[tuple[str, str, str]],
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Spawned: after the barrier, rebuild the capacity totals ``repairs`` times (reporting how
    many rounds found a mismatch), then perform each ``(proposal_id, approval_id, mode)`` as the
    agent, the receiver answering in that :class:`SubmitMode`."""
    from effectledger.authority.capacity import rebuild_totals_in

    service = build(store_url, Path(directory))
    receiver = next(iter(service.destinations.values()))
    store = service.ledger.store
    barrier.wait()
    found = sum(bool(store.write(rebuild_totals_in, label="repair")) for _ in range(repairs))
    for proposal_id, approval_id, mode in calls:
        receiver.submit_mode = SubmitMode(mode)  # type: ignore[attr-defined]
        service.perform(AGENT, proposal_id, approval=approval_id)
    close(service)
    results.put({"worker": worker, "found": found})
