"""Lost COMMIT acknowledgements of a batch: its claims are read back before anything is sent,
and its record is read back or made again, never doubled.

A real TCP proxy between the store and PostgreSQL cuts the connection while the batch's COMMIT
is in flight (SQLite's embedded commit has no reply to lose). The receiver's own counters are
the proof of what was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from effectledger import Context, Operation, OperationState, SimulatedReceiver
from effectledger.ledger import Ledger
from effectledger.store.postgres import PostgresStore
from effectledger.workers import Executor
from tests.conftest import admit
from tests.contract.test_uncertain_commit import (  # the proxy and the stores behind it
    ArmingDestination,
    direct_store,
    proxied_ledger,
    proxy,
)
from tests.support.cutting_proxy import Cut, CuttingProxy

pytestmark = pytest.mark.postgres
__all__ = ["direct_store", "proxied_ledger", "proxy"]  # fixtures, used by name

OPERATIONS = [f"op-{index}" for index in range(1, 6)]


def _arming_recheck(
    proxy: CuttingProxy, cut: Cut, *, partition_after: bool = False
) -> Callable[[Sequence[tuple[Context, Operation]]], list[str | None]]:
    """A batch recheck that passes every operation and arms the proxy: the next COMMIT, the
    batch claim's, is cut."""

    def recheck(checks: Sequence[tuple[Context, Operation]]) -> list[str | None]:
        proxy.arm(cut, partition_after=partition_after)
        return [None] * len(checks)

    return recheck


def _admitted(ledger: Ledger, context: Context, receiver: SimulatedReceiver) -> None:
    for operation_id in OPERATIONS:
        admit(ledger, context, receiver, operation_id)


def _trail(store: PostgresStore, context: Context, operation_id: str) -> list[str]:
    return [event.event_type for event in Ledger(store).events(context, operation_id)]


def test_a_batch_claim_whose_reply_was_lost_is_read_back_and_sent_once(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """The batch's claims committed without an acknowledgement: each is found by its attempt
    id, then sent once and recorded."""
    _admitted(proxied_ledger, context, receiver)
    executor = Executor(
        proxied_ledger, receiver, batch_guard=_arming_recheck(proxy, Cut.LOSE_REPLY)
    )

    results = executor.run_ready(limit=10, claim_batch=8)

    assert proxy.cuts == 1
    assert [result.state for result in results] == [OperationState.SUCCEEDED] * 5
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (5, 5)
    for operation_id in OPERATIONS:
        assert _trail(direct_store, context, operation_id) == [
            "OperationAdmitted",
            "AttemptPrepared",
            "ProviderAcceptanceConfirmed",
        ]


def test_a_batch_claim_whose_request_was_lost_sends_nothing_and_runs_later(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """The batch's COMMIT never reached the server: nothing is sent, every operation is still
    READY, and the next pass performs each once."""
    _admitted(proxied_ledger, context, receiver)
    executor = Executor(
        proxied_ledger, receiver, batch_guard=_arming_recheck(proxy, Cut.LOSE_REQUEST)
    )

    assert executor.run_ready(limit=10, claim_batch=8) == []
    assert proxy.cuts == 1
    assert receiver.counts().submissions == 0
    assert {Ledger(direct_store).get(context, op).state for op in OPERATIONS} == {
        OperationState.READY
    }

    results = Executor(proxied_ledger, receiver).run_ready(limit=10, claim_batch=8)

    assert [result.state for result in results] == [OperationState.SUCCEEDED] * 5
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (5, 5)


@pytest.mark.slow
def test_a_batch_claim_that_cannot_be_read_back_sends_nothing(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """The acknowledgement is lost and the database then unreachable: nothing is sent on a
    guess; the claims that did commit wait IN_PROGRESS for recovery."""
    _admitted(proxied_ledger, context, receiver)
    recheck = _arming_recheck(proxy, Cut.LOSE_REPLY, partition_after=True)
    executor = Executor(proxied_ledger, receiver, batch_guard=recheck)

    assert executor.run_ready(limit=10, claim_batch=8) == []

    assert receiver.counts().submissions == 0
    assert {Ledger(direct_store).get(context, op).state for op in OPERATIONS} == {
        OperationState.IN_PROGRESS
    }


@pytest.mark.parametrize("cut", [Cut.LOSE_REPLY, Cut.LOSE_REQUEST])
def test_a_batch_record_whose_commit_went_unacknowledged_is_settled(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
    cut: Cut,
) -> None:
    """A batch record's lost COMMIT is read back (or made again): one result event each, the
    true state, one effect each."""
    _admitted(proxied_ledger, context, receiver)
    destination = ArmingDestination(receiver, proxy, cut, on="submit")

    results = Executor(proxied_ledger, destination).run_ready(limit=10, claim_batch=8)

    assert proxy.cuts == 1
    assert [result.state for result in results] == [OperationState.SUCCEEDED] * 5
    for operation_id in OPERATIONS:
        assert _trail(direct_store, context, operation_id) == [
            "OperationAdmitted",
            "AttemptPrepared",
            "ProviderAcceptanceConfirmed",
        ]
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (5, 5)
