"""A refund world for the batch-claim tests: its orders, its receiver, and what wraps the receiver.

Each refund is for an order of its own, so a test can make one of them stale (a changed order)
without touching the others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from effectledger import (
    Command,
    DestinationRef,
    EffectLedger,
    LedgerSettings,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
)
from effectledger.destinations import Destination
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store
from tests.acceptance.test_authority_matrix import AGENT, REVIEWER
from tests.conftest import count_rows, with_options


@dataclass
class Orders:
    """The refund application over one store, its order book and its simulated receiver."""

    app: EffectLedger
    receiver: SimulatedReceiver
    orders: OrderBook
    store_url: str
    writes: list[str] = field(default_factory=list)

    def ready(self, count: int, *, first: int = 0, tenant: str = "acme") -> list[str]:
        """``count`` approved refunds of ``tenant``, one per order, admitted and left READY."""
        agent = replace(AGENT, tenant_id=tenant)
        reviewer = replace(REVIEWER, tenant_id=tenant)
        operation_ids = []
        for number in range(first, first + count):
            proposal = self.app.propose(agent, "refund_order", refund(number))
            approval = self.app.approve(reviewer, proposal)
            operation = self.app.authority.admit(
                agent, proposal.proposal_id, approval_id=approval.approval_id
            )
            assert operation.state is OperationState.READY
            operation_ids.append(operation.operation_id)
        return operation_ids

    def states(self, operation_ids: list[str]) -> list[OperationState]:
        """The recorded state of each operation."""
        return [self.app.operation(REVIEWER, op).state for op in operation_ids]

    def events(self, kind: str, operation_id: str | None = None) -> int:
        """How many audit events of ``kind`` the store holds (of one operation, if named)."""
        where = f"event_type = '{kind}'"
        if operation_id is not None:
            where += f" AND operation_id = '{operation_id}'"
        return count_rows(self.store_url, "audit_events", where)

    def event_types(self, operation_id: str) -> list[str]:
        """The operation's trail, event types in sequence order."""
        return [event.event_type for event in self.app.events(REVIEWER, operation_id)]

    def watch_writes(self) -> None:
        """Note the label of every write transaction the ledger's store runs from now on."""
        store = self.app.ledger.store
        write = store.write

        def noted(body: Any, **options: Any) -> Any:
            self.writes.append(options.get("label", "write"))
            return write(body, **options)

        store.write = noted  # type: ignore[method-assign]

    def close(self) -> None:
        """Close the ledger and the receiver."""
        self.app.close()
        self.receiver.close()


def refund(number: int) -> dict[str, Any]:
    """The arguments of a refund of 30 for order ``number``."""
    return {"order_id": f"ord-{number:07d}", "amount_minor": 30, "currency": "EUR"}


def orders_world(
    store_url: str,
    tmp_path: Path,
    *,
    clock: ManualClock | None = None,
    settings: LedgerSettings | None = None,
    destination: Callable[[SimulatedReceiver], Destination] | None = None,
    once: bool = False,
) -> Orders:
    """The refund application over ``store_url``, its receiver at ``tmp_path/receiver.db``
    (taking four submissions at once), ``destination`` wrapping it if given.

    ``once``: a PostgreSQL store runs each transaction once, so a deadlock or a serialization
    failure fails the call that met it instead of being retried away (SQLite's ``BEGIN
    IMMEDIATE`` serializes writers and has neither).
    """
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    ref = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    opened = store_url
    if once and not store_url.startswith("sqlite:"):
        opened = with_options(store_url, max_attempts=1)
    app = EffectLedger(
        open_store(opened), clock=clock or ManualClock(), settings=settings or LedgerSettings()
    )
    orders = OrderBook()
    adapter = receiver if destination is None else destination(receiver)
    app.register(refund_action(orders=orders, destination=ref), adapter)
    return Orders(app=app, receiver=receiver, orders=orders, store_url=store_url)


class Counted:
    """The receiver behind an adapter that declares ``concurrent_sends`` (or nothing, for
    ``None``) and counts the submissions in flight at once, and the threads they came from."""

    def __init__(self, receiver: SimulatedReceiver, concurrent_sends: int | None) -> None:
        self.receiver = receiver
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint
        if concurrent_sends is not None:
            self.concurrent_sends = concurrent_sends
        self.in_flight = 0
        self.most = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def submit(self, command: Command, idempotency_key: str) -> Observation:
        """Submit to the receiver, noting how many submissions overlap this one."""
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.threads.add(threading.get_ident())
        try:
            time.sleep(0.02)  # long enough for the others in flight to overlap it
            return self.receiver.submit(command, idempotency_key)
        finally:
            with self._lock:
                self.in_flight -= 1

    def lookup(self, idempotency_key: str) -> Observation:
        """The receiver's own lookup."""
        return self.receiver.lookup(idempotency_key)


class Holding:
    """The receiver, whose last expected submission runs ``then`` once it is performed."""

    def __init__(self, receiver: SimulatedReceiver, expected: int, then: Callable[[], None]):
        self.receiver = receiver
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint
        self.left = expected
        self.then = then

    def submit(self, command: Command, idempotency_key: str) -> Observation:
        """Submit; after the last expected one, run ``then``."""
        observation = self.receiver.submit(command, idempotency_key)
        self.left -= 1
        if self.left == 0:
            self.then()
        return observation

    def lookup(self, idempotency_key: str) -> Observation:
        """The receiver's own lookup."""
        return self.receiver.lookup(idempotency_key)


@contextmanager
def refusing_outcome(store_url: str, operation_id: str) -> Iterator[None]:
    """Make the database refuse the recorded outcome of one operation (a real failed write)."""
    from tests.conftest import raw_sql

    condition = (
        f"NEW.operation_id = '{operation_id}' AND NEW.event_type = 'ProviderAcceptanceConfirmed'"
    )
    if store_url.startswith("sqlite:"):
        raw_sql(
            store_url,
            f"CREATE TRIGGER refuse_one BEFORE INSERT ON audit_events WHEN {condition} "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        try:
            yield
        finally:
            raw_sql(store_url, "DROP TRIGGER refuse_one")
        return
    raw_sql(
        store_url,
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'refused' USING ERRCODE = 'integrity_constraint_violation'; END; $$",
    )
    raw_sql(
        store_url,
        "CREATE TRIGGER refuse_one BEFORE INSERT ON audit_events FOR EACH ROW "
        f"WHEN ({condition}) EXECUTE FUNCTION refuse_one()",
    )
    try:
        yield
    finally:
        raw_sql(store_url, "DROP TRIGGER refuse_one ON audit_events")


def dispatch_racing(world: Orders, threads: int, claim_batch: int) -> tuple[int, list[str]]:
    """``threads`` threads, released together, each running dispatch passes of ``claim_batch``
    per claim until no READY refund is left; how many results they got, and what any pass
    raised (by type and code)."""
    barrier = threading.Barrier(threads)
    lock = threading.Lock()
    taken: list[int] = []
    failures: list[str] = []

    def claim() -> None:
        barrier.wait()
        got = 0
        while True:
            try:
                done = world.app.dispatch_ready(limit=2 * claim_batch, claim_batch=claim_batch)
            except Exception as exc:  # counted: the test requires none
                with lock:
                    failures.append(f"{type(exc).__name__}: {getattr(exc, 'code', exc)}")
                    if len(failures) > 20:  # the store is gone: stop, the test fails
                        break
                continue
            got += len(done)
            if not done and count_rows(world.store_url, "operations", "state = 'READY'") == 0:
                break
        with lock:
            taken.append(got)

    pool = [threading.Thread(target=claim) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in pool), "a claiming thread never finished"
    return sum(taken), failures


def dispatch_in_process(
    store_url: str,
    directory: str,
    stale: list[tuple[str, int]],
    threads: int,
    claim_batch: int,
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Spawned: the world over ``store_url`` with the ``stale`` orders changed, then
    :func:`dispatch_racing` once every process is ready."""
    world = orders_world(store_url, Path(directory), once=True)
    for tenant, number in stale:
        world.orders.change(tenant, refund(number)["order_id"])
    barrier.wait()
    taken, failures = dispatch_racing(world, threads, claim_batch)
    world.close()
    results.put({"worker": worker, "taken": taken, "failures": failures})
