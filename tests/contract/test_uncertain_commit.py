"""Lost COMMIT acknowledgements: a claim is verified before anything is submitted, and the
executor and recovery loops settle a record or a reservation themselves.

These tests put a real TCP proxy between the store and PostgreSQL and cut the connection while
the claim's COMMIT is in flight (an embedded SQLite commit has no network reply to lose). The
receiver's own counters are the proof of what was or was not sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from effectledger import (
    Command,
    CommitUncertain,
    Context,
    DestinationRef,
    EffectLedger,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.actions.registry import ActionRegistry
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.store.postgres import PostgresStore
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import admit, with_options
from tests.support.app import ledger_over
from tests.support.cutting_proxy import Cut, CuttingProxy

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


@pytest.mark.slow
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


# -- the loops settle an unacknowledged record or reservation themselves -----------------------


class ArmingDestination:
    """A real receiver whose calls arm the proxy: the next COMMIT after the call is cut.

    ``on`` names the call (``submit`` or ``lookup``) whose following record is the one to cut.
    """

    def __init__(self, receiver: SimulatedReceiver, proxy: CuttingProxy, cut: Cut, on: str):
        self.receiver = receiver
        self.proxy = proxy
        self.cut = cut
        self.on = on
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint

    def submit(self, command: Command, key: str) -> Observation:
        observation = self.receiver.submit(command, key)
        if self.on == "submit":
            self.proxy.arm(self.cut)
        return observation

    def lookup(self, key: str) -> Observation:
        observation = self.receiver.lookup(key)
        if self.on == "lookup":
            self.proxy.arm(self.cut)
        return observation


def _kinds(store: PostgresStore, context: Context, operation_id: str) -> list[str]:
    return [event.event_type for event in Ledger(store).events(context, operation_id)]


@pytest.mark.parametrize("cut", [Cut.LOSE_REPLY, Cut.LOSE_REQUEST])
def test_executor_settles_a_record_whose_commit_went_unacknowledged(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
    cut: Cut,
) -> None:
    """A lost record COMMIT is read back (or made again): one result event, the true state."""
    admit(proxied_ledger, context, receiver)
    destination = ArmingDestination(receiver, proxy, cut, on="submit")

    result = Executor(proxied_ledger, destination).execute(context, "op-1")

    assert proxy.cuts == 1
    assert result.state is OperationState.SUCCEEDED
    assert _kinds(direct_store, context, "op-1") == [
        "OperationAdmitted",
        "AttemptPrepared",
        "ProviderAcceptanceConfirmed",
    ]
    assert Ledger(direct_store).get(context, "op-1").state is OperationState.SUCCEEDED
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)


def _lost_reply(ledger: Ledger, context: Context, receiver: SimulatedReceiver) -> None:
    admit(ledger, context, receiver)
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    assert Executor(ledger, receiver).execute(context, "op-1").uncertain
    receiver.submit_mode = SubmitMode.ACCEPT


@pytest.mark.parametrize("cut", [Cut.LOSE_REPLY, Cut.LOSE_REQUEST])
def test_recovery_settles_a_reconciliation_whose_commit_went_unacknowledged(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
    clock: ManualClock,
    cut: Cut,
) -> None:
    """A lost COMMIT of a lookup's record does not end the pass: the operation is resolved once."""
    _lost_reply(proxied_ledger, context, receiver)
    clock.advance(proxied_ledger.settings.recover_after)
    destination = ArmingDestination(receiver, proxy, cut, on="lookup")

    report = RecoveryWorker(proxied_ledger, destination).run_once()

    assert proxy.cuts == 1
    assert (report.failed, report.resolved) == ([], [("acme", "op-1", "SUCCEEDED")])
    assert _kinds(direct_store, context, "op-1")[-2:] == [
        "ReconciliationStarted",
        "ProviderAcceptanceReconciled",
    ]
    assert _kinds(direct_store, context, "op-1").count("ProviderAcceptanceReconciled") == 1
    assert receiver.counts().lookups == 1


@pytest.mark.parametrize("cut", [Cut.LOSE_REPLY, Cut.LOSE_REQUEST])
def test_recovery_settles_a_reservation_whose_commit_went_unacknowledged(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
    clock: ManualClock,
    cut: Cut,
) -> None:
    """A reservation whose COMMIT was lost is read back: looked up now if stored, else next pass."""
    _lost_reply(proxied_ledger, context, receiver)
    clock.advance(proxied_ledger.settings.recover_after)
    worker = RecoveryWorker(proxied_ledger, receiver)
    proxy.arm(cut)

    first = worker.run_once()
    second = worker.run_once()

    assert proxy.cuts == 1
    assert first.failed == second.failed == []
    resolved = first.resolved + second.resolved
    assert resolved == [("acme", "op-1", "SUCCEEDED")]
    assert (len(first.resolved), len(second.resolved)) == (
        (1, 0) if cut is Cut.LOSE_REPLY else (0, 1)
    )
    assert _kinds(direct_store, context, "op-1").count("ReconciliationStarted") == 1
    assert receiver.counts().lookups == 1


@pytest.mark.parametrize("cut", [Cut.LOSE_REPLY, Cut.LOSE_REQUEST])
def test_admission_whose_commit_went_unacknowledged_is_settled_by_its_replay(
    proxied_ledger: Ledger,
    proxy: CuttingProxy,
    direct_store: PostgresStore,
    receiver: SimulatedReceiver,
    context: Context,
    cut: Cut,
) -> None:
    """Ledger.admit settles a lost COMMIT itself: one operation, one OperationAdmitted event."""
    proxy.arm(cut)

    operation = admit(proxied_ledger, context, receiver)

    assert proxy.cuts == 1
    assert operation.state is OperationState.READY
    assert _kinds(direct_store, context, "op-1") == ["OperationAdmitted"]
    assert Ledger(direct_store).get(context, "op-1").fingerprint == operation.fingerprint


def _refund_service(ledger: Ledger, receiver: SimulatedReceiver) -> EffectLedger:
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    action = refund_action(orders=OrderBook(), destination=destination)
    return ledger_over(ledger, ActionRegistry([action]), [receiver])


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

    result = service.perform(agent, proposal.proposal_id, approval=approval.approval_id)

    assert proxy.cuts == 1
    assert (result.outcome, result.state) == ("performed", OperationState.SUCCEEDED)
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert _attempts(direct_store, agent, proposal.operation_id) == 1
    again = service.perform(agent, proposal.proposal_id, approval=approval.approval_id)
    assert (again.outcome, receiver.counts().submissions) == ("replayed", 1)
