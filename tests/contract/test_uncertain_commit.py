"""A claim whose COMMIT acknowledgement is lost: verified before anything is submitted.

These tests put a real TCP proxy between the store and PostgreSQL and cut the connection while
the claim's COMMIT is in flight (an embedded SQLite commit has no network reply to lose). The
receiver's own counters are the proof of what was or was not sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from effectledger import (
    CommitUncertain,
    Context,
    DestinationRef,
    Executor,
    Ledger,
    ManualClock,
    OperationState,
    SimulatedReceiver,
    open_store,
)
from effectledger.actions import ActionRegistry
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.service import EffectService
from effectledger.store.postgres import PostgresStore
from tests.conftest import admit, with_options
from tests.cutting_proxy import Cut, CuttingProxy

pytestmark = pytest.mark.postgres


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[CuttingProxy]:
    """A cutting proxy in front of the test's PostgreSQL server."""
    parts = urlsplit(postgres_url)
    made = CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    yield made
    made.close()


@pytest.fixture
def proxied_ledger(postgres_url: str, proxy: CuttingProxy, clock: ManualClock) -> Iterator[Ledger]:
    """A ledger whose every connection goes through the proxy (two pooled connections)."""
    parts = urlsplit(postgres_url)
    netloc = parts.netloc.rpartition("@")
    user = f"{netloc[0]}@" if netloc[1] else ""
    url = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
    url = with_options(
        url, sslmode="disable", gssencmode="disable", pool_min_size=2, pool_timeout_s=2
    )
    store = open_store(url)
    yield Ledger(store, clock=clock)
    store.close()


@pytest.fixture
def direct_store(postgres_url: str) -> Iterator[PostgresStore]:
    """The same schema opened without the proxy, to read the durable facts."""
    store = PostgresStore.from_url(postgres_url)
    yield store
    store.close()


def _attempts(store: PostgresStore, context: Context, operation_id: str) -> int:
    return len(Ledger(store).attempts(context, operation_id))


def test_lost_commit_request_submits_nothing(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """A claim whose COMMIT never reached the server is proven absent, so nothing is sent."""
    admit(proxied_ledger, context, receiver)
    proxy.arm(Cut.LOSE_REQUEST)

    result = Executor(proxied_ledger, receiver).execute(context, "op-1")

    assert proxy.cuts == 1
    assert result.state is OperationState.READY
    assert receiver.counts().submissions == 0
    assert _attempts(direct_store, context, "op-1") == 0


def test_operation_whose_claim_was_lost_runs_once_later(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """After a claim lost with its COMMIT, the next call claims and performs the effect once."""
    admit(proxied_ledger, context, receiver)
    proxy.arm(Cut.LOSE_REQUEST)
    executor = Executor(proxied_ledger, receiver)
    executor.execute(context, "op-1")

    result = executor.execute(context, "op-1")

    assert result.state is OperationState.SUCCEEDED
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert _attempts(direct_store, context, "op-1") == 1


def test_lost_commit_reply_is_verified_then_submitted_once(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """A claim committed without an acknowledgement is found by attempt id and performed once."""
    admit(proxied_ledger, context, receiver)
    proxy.arm(Cut.LOSE_REPLY)

    result = Executor(proxied_ledger, receiver).execute(context, "op-1")

    assert proxy.cuts == 1
    assert result.state is OperationState.SUCCEEDED
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    events = [event.event_type for event in Ledger(direct_store).events(context, "op-1")]
    assert events == ["OperationAdmitted", "AttemptPrepared", "ProviderAcceptanceConfirmed"]


def test_pool_claim_with_lost_reply_is_verified_then_submitted_once(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """An executor pool whose claim's acknowledgement is lost checks it and performs it once."""
    admit(proxied_ledger, context, receiver)
    proxy.arm(Cut.LOSE_REPLY)

    results = Executor(proxied_ledger, receiver).run_ready(limit=5)

    assert proxy.cuts == 1
    assert [result.state for result in results] == [OperationState.SUCCEEDED]
    assert receiver.counts().effects == 1
    assert _attempts(direct_store, context, "op-1") == 1


def test_unverifiable_claim_raises_and_submits_nothing(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """When the database is unreachable after a lost acknowledgement, the executor raises."""
    admit(proxied_ledger, context, receiver)
    proxy.arm(Cut.LOSE_REPLY, partition_after=True)

    with pytest.raises(CommitUncertain):
        Executor(proxied_ledger, receiver).execute(context, "op-1")

    assert receiver.counts().submissions == 0
    operation = Ledger(direct_store).get(context, "op-1")
    assert operation.state is OperationState.IN_PROGRESS  # recovery will look it up
    assert _attempts(direct_store, context, "op-1") == 1


def _refund_service(ledger: Ledger, receiver: SimulatedReceiver) -> EffectService:
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    action = refund_action(orders=OrderBook(), destination=destination)
    return EffectService(ledger, ActionRegistry([action]), [receiver])


@pytest.mark.parametrize("cut", [Cut.LOSE_REPLY, Cut.LOSE_REQUEST], ids=["reply", "request"])
def test_an_admission_that_claims_at_once_settles_a_lost_commit(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    cut: Cut,
) -> None:
    """perform admits and claims in one transaction; a lost COMMIT is settled, one effect."""
    service = _refund_service(proxied_ledger, receiver)
    agent = Context(tenant_id="acme", actor_id="agent-7")
    rita = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
    proposal = service.propose(
        agent, "refund_order", {"order_id": "ord-1", "amount_minor": 30, "currency": "EUR"}
    )
    approval = service.approve(rita, proposal.proposal_id, digest=proposal.digest)
    proxy.arm(cut)

    result = service.perform(agent, proposal.proposal_id, approval_id=approval.approval_id)

    assert proxy.cuts == 1
    assert (result.outcome, result.state) == ("performed", OperationState.SUCCEEDED)
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert _attempts(direct_store, agent, proposal.operation_id) == 1
    again = service.perform(agent, proposal.proposal_id, approval_id=approval.approval_id)
    assert (again.outcome, receiver.counts().submissions) == ("replayed", 1)
