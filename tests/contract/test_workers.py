"""The dispatch and recovery workers: whose identity rechecks, what a worker may reserve, scope.

Each test checks the durable facts: operation rows and states, audit events, attempt rows and
the receiver's own count of submissions, lookups and effects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from effectledger import (
    Command,
    Context,
    DestinationRef,
    ManualClock,
    NotFound,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.actions.policy import RulePolicy
from effectledger.actions.registry import ActionRegistry
from effectledger.ledger import Ledger
from effectledger.workers import Executor, RecoveryWorker
from tests.acceptance.test_authority_matrix import AGENT, World, build_world
from tests.conftest import admit, count_rows, run_sql
from tests.support.app import ledger_over

T = TypeVar("T")
ROLE_POLICY = RulePolicy(version="refund-policy-roles", proposer_roles=frozenset({"agent"}))


def in_threads(count: int, work: Callable[[int], T]) -> list[T]:
    """Run ``work(i)`` in ``count`` threads released together; return results, raise errors."""
    start = threading.Barrier(count)
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        start.wait()
        try:
            result = work(index)
        except BaseException as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def role_world(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[World]:
    """A refund world whose policy lets only actors with the ``agent`` role request refunds."""
    made = build_world(store_url, tmp_path, clock, ROLE_POLICY)
    yield made
    made.ledger.store.close()
    made.receiver.close()


def admitted_under_roles(world: World, count: int) -> list[str]:
    """``count`` refunds approved by a reviewer and admitted under the agent's own roles."""
    operation_ids = []
    for _ in range(count):
        proposal, approval = world.approved()
        operation = world.service.authority.admit(
            AGENT, proposal.proposal_id, approval_id=approval.approval_id
        )
        assert operation.state is OperationState.READY
        operation_ids.append(operation.operation_id)
    return operation_ids


def test_run_ready_with_the_dispatch_guard_performs_work_admitted_under_roles(
    role_world: World,
) -> None:
    """16 guarded executors draining role-approved operations perform each once, none released."""
    world = role_world
    operation_ids = admitted_under_roles(world, 16)
    guard = world.service.authority.dispatch_guard

    def drain(_: int) -> int:
        executor = Executor(world.ledger, world.receiver, guard=guard)
        return sum(len(batch) for batch in iter(lambda: executor.run_ready(limit=4), []))

    in_threads(16, drain)

    assert world.effects() == 16
    assert world.receiver.counts().submissions == 16
    assert count_rows(world.store_url, "attempts") == 16
    for operation_id in operation_ids:
        assert world.ledger.get(AGENT, operation_id).state is OperationState.SUCCEEDED
        kinds = [event.event_type for event in world.ledger.events(AGENT, operation_id)]
        assert "OperationReleased" not in kinds
    assert world.units() == (0, 16 * 30)


def test_the_service_executor_releases_a_stale_operation_whoever_drains_it(
    role_world: World,
) -> None:
    """run_ready still releases an operation whose target changed after admission; nothing sent."""
    world = role_world
    (operation_id,) = admitted_under_roles(world, 1)
    world.orders.change("acme", "ord-1001")
    destination = DestinationRef(
        account_id=world.receiver.account_id, endpoint=world.receiver.endpoint
    )

    (result,) = world.service.executor_for(destination).run_ready()

    assert result.state is OperationState.RELEASED
    assert world.receiver.counts().submissions == 0
    last = world.ledger.events(AGENT, operation_id)[-1]
    assert (last.event_type, last.details["reason"], last.actor) == (
        "OperationReleased",
        "stale_resource_version",
        "agent-7",
    )


def make_unknown(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, count: int, prefix: str = "op"
) -> list[str]:
    """``count`` operations the receiver performed whose replies were lost."""
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    executor = Executor(ledger, receiver)
    ids = [f"{prefix}-{index}" for index in range(count)]
    for operation_id in ids:
        admit(ledger, context, receiver, operation_id)
        assert executor.execute(context, operation_id).state is OperationState.OUTCOME_UNKNOWN
    receiver.submit_mode = SubmitMode.ACCEPT
    return ids


def lookup_windows(store_url: str) -> list[tuple[object, ...]]:
    """Every attempt's next recovery time, in a stable order."""
    return run_sql(
        store_url,
        "SELECT operation_id, attempt_id, recover_after_us FROM attempts ORDER BY operation_id",
    )


@pytest.fixture
def other_receiver(tmp_path: Path) -> Iterator[SimulatedReceiver]:
    """A second destination: another account with its own file."""
    made = SimulatedReceiver(
        tmp_path / "other.db", account_id="acct-other", endpoint="https://other.invalid/v1"
    )
    yield made
    made.close()


def test_a_recovery_worker_reserves_only_what_its_destination_can_look_up(
    ledger: Ledger,
    store_url: str,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    other_receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """16 workers bound to another destination spend no lookup window; the right one resolves."""
    ids = make_unknown(ledger, context, receiver, 16)
    clock.advance(ledger.settings.recover_after)
    events_before = count_rows(store_url, "audit_events")
    windows_before = lookup_windows(store_url)

    reports = in_threads(16, lambda _: RecoveryWorker(ledger, other_receiver).run_once())

    assert all((report.due, report.failed) == (0, []) for report in reports)
    assert count_rows(store_url, "audit_events") == events_before
    assert lookup_windows(store_url) == windows_before
    assert other_receiver.counts().lookups == 0

    report = RecoveryWorker(ledger, [other_receiver, receiver]).run_once()

    assert sorted(operation for _, operation, _ in report.resolved) == sorted(ids)
    assert receiver.counts().lookups == 16
    assert all(ledger.get(context, op).state is OperationState.SUCCEEDED for op in ids)


class ReconfigurableDestination:
    """A destination adapter whose configured account and endpoint can be changed in place.

    It forwards to a real simulated receiver; a change of ``endpoint`` stands for an adapter
    reconfigured (by mistake) to send somewhere else.
    """

    def __init__(self, receiver: SimulatedReceiver) -> None:
        self.receiver = receiver
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint

    def submit(self, command: Command, key: str) -> Observation:
        return self.receiver.submit(command, key)

    def lookup(self, key: str) -> Observation:
        return self.receiver.lookup(key)


def test_a_reconfigured_adapter_reserves_and_looks_up_nothing(
    ledger: Ledger,
    store_url: str,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """An adapter whose identity changed after the worker was built writes nothing at all."""
    make_unknown(ledger, context, receiver, 3)
    adapter = ReconfigurableDestination(receiver)
    worker = RecoveryWorker(ledger, adapter)
    adapter.endpoint = "https://receiver.invalid/v2/effects"
    clock.advance(ledger.settings.recover_after)
    events_before = count_rows(store_url, "audit_events")
    windows_before = lookup_windows(store_url)

    report = worker.run_once()

    assert report.due == 0
    assert report.failed == [
        (receiver.account_id, receiver.endpoint, "destination_mismatch"),
    ]
    assert count_rows(store_url, "audit_events") == events_before
    assert lookup_windows(store_url) == windows_before
    assert receiver.counts().lookups == 0


def test_reconcile_is_scoped_to_the_one_operation_the_context_may_see(
    ledger: Ledger,
    store_url: str,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """Another tenant's reconcile is not_found and writes nothing; the owner's touches one op."""
    ids = make_unknown(ledger, context, receiver, 3)
    clock.advance(ledger.settings.recover_after)
    service = ledger_over(ledger, ActionRegistry(), [receiver])
    events_before = count_rows(store_url, "audit_events")
    stranger = Context(tenant_id="globex", actor_id="alice")

    with pytest.raises(NotFound):
        service.reconcile(stranger, ids[0])

    assert count_rows(store_url, "audit_events") == events_before
    assert receiver.counts().lookups == 0
    assert ledger.get(context, ids[0]).state is OperationState.OUTCOME_UNKNOWN

    result = service.reconcile(context, ids[0])

    assert (result.outcome, result.state) == ("reconciled", OperationState.SUCCEEDED)
    assert receiver.counts().lookups == 1
    assert count_rows(store_url, "audit_events") == events_before + 2
    for other in ids[1:]:
        assert ledger.get(context, other).state is OperationState.OUTCOME_UNKNOWN
