"""A thousand approval cycles through each of the five adapters, each tool call on whatever
thread its framework runs it, open no connections for good: the ledger's open connections are
the same before and after, on both backends.

Connections are counted where they are, not where a message says: the store's own count, and
beside it this process's file descriptors on the SQLite file and its WAL (``/proc/self/fd``)
or the server's own sessions of the store (``pg_stat_activity``, by an application name that
only this test's store uses). Afterwards the ledger still performs, and sixteen threads racing
over the same approved proposals still make exactly one effect per operation.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from effectledger import Proposal
from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows, require_postgres, sqlite_path, with_options
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS
from tests.support.threads import file_descriptors, on_fresh_thread

CYCLES = 1000
ORDERS = iter(range(100_000, 1_000_000))


class Counted:
    """The ledger's open connections, counted by the store and by the OS or the server."""

    def __init__(self, store_url: str) -> None:
        self.name = f"el-conns-{uuid.uuid4().hex[:12]}"
        self.sqlite = store_url.startswith("sqlite:")
        self.url = store_url if self.sqlite else with_options(store_url, application_name=self.name)

    def now(self, world: World) -> dict[str, int]:
        """The store's count and, for SQLite, the descriptors on the file and on its WAL; for
        PostgreSQL, the server's sessions that carry this store's application name."""
        counts = {"store": world.ledger.store.open_connections()}  # type: ignore[attr-defined]
        if self.sqlite:
            path = sqlite_path(self.url)
            counts["file"] = file_descriptors(path)
            counts["wal"] = file_descriptors(Path(f"{path}-wal"))
            return counts
        with psycopg.connect(require_postgres(), autocommit=True) as connection:
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (self.name,)
            ).fetchone()
        counts["server"] = 0 if row is None else int(row[0])
        return counts

    def settled(self, world: World, within_s: float = 10.0) -> dict[str, int]:
        """:meth:`now`, once the server has seen off the sessions the pool closed: a backend
        whose client hung up stays in ``pg_stat_activity`` until it has exited, a moment later.
        SQLite's counts are read once."""
        deadline = time.monotonic() + within_s
        while True:
            counts = self.now(world)
            if self.sqlite or counts["server"] <= counts["store"] or time.monotonic() > deadline:
                return counts
            time.sleep(0.05)


@pytest.fixture
def counted(store_url: str) -> Counted:
    """The test's store URL, named so the server can tell its sessions apart."""
    if store_url.startswith("sqlite:") and not os.path.isdir("/proc/self/fd"):
        pytest.skip("counting file descriptors needs /proc")
    return Counted(store_url)


@pytest.fixture
def world(counted: Counted, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger over the counted URL."""
    with fresh_world(counted.url, tmp_path) as opened:
        yield opened


def refund(world: World) -> dict[str, Any]:
    """A refund of a new order, at a known resource version."""
    arguments = {**REFUND_30, "order_id": f"ord-{next(ORDERS)}"}
    world.orders.change("acme", arguments["order_id"])
    return arguments


def stable(before: dict[str, int], after: dict[str, int], store_url: str) -> None:
    """SQLite: the very same counts. PostgreSQL: within the pool's bound, and the server
    holds no session of the store beyond those the pool counts."""
    if store_url.startswith("sqlite:"):
        assert after == before
    else:
        assert after["store"] <= 4  # pool_max_size
        assert after["server"] <= after["store"]


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_thousand_framework_cycles_leave_the_open_connections_as_they_were(
    framework: str, world: World, counted: Counted
) -> None:
    """A thousand pause-approve-resume cycles through a real agent open no connection for good;
    every cycle performed once and the ledger performs afterwards."""
    driver = DRIVERS[framework](world.app)

    def cycle(number: int) -> str:
        paused = driver.pause(AGENT, refund(world), f"call-{number}")
        proposal = driver.propose(AGENT, paused)
        world.app.approve(REVIEWER, proposal)
        return str(driver.resume(paused, AGENT, Grant.of(proposal))["outcome"])

    assert cycle(0) == "performed"  # the first connection, imports and the framework warm
    before = counted.now(world)
    outcomes = [cycle(number) for number in range(1, CYCLES + 1)]
    after = counted.settled(world)
    assert outcomes == ["performed"] * CYCLES
    stable(before, after, counted.url)
    assert cycle(CYCLES + 1) == "performed"
    assert world.receiver.counts().effects == CYCLES + 2
    assert count_rows(counted.url, "operations") == CYCLES + 2


def plain_cycle(world: World) -> str:
    """Propose, approve and perform a refund, each ledger call on a thread of its own."""
    arguments = refund(world)
    proposal: Proposal = on_fresh_thread(
        lambda: world.app.propose(AGENT, "refund_order", arguments)
    )
    on_fresh_thread(lambda: world.app.approve(REVIEWER, proposal))
    return str(on_fresh_thread(lambda: world.app.perform(AGENT, proposal)).outcome)


@pytest.mark.parametrize(
    "cycles",
    [
        pytest.param(50, id="50"),
        pytest.param(CYCLES, id="1000", marks=[pytest.mark.slow, pytest.mark.soak]),
    ],
)
def test_plain_calls_from_fresh_threads_leave_the_open_connections_as_they_were(
    cycles: int, world: World, counted: Counted
) -> None:
    """Ledger calls each on a thread that then ends keep the open connections where they were;
    afterwards sixteen threads racing over eight approved proposals make one effect each."""
    assert plain_cycle(world) == "performed"
    before = counted.now(world)
    outcomes = [plain_cycle(world) for _ in range(cycles)]
    after = counted.settled(world)
    assert outcomes == ["performed"] * cycles
    stable(before, after, counted.url)

    proposals = [world.app.propose(AGENT, "refund_order", refund(world)) for _ in range(8)]
    for proposal in proposals:
        world.app.approve(REVIEWER, proposal)
    barrier = threading.Barrier(16, timeout=60)
    performed: list[str] = []
    lock = threading.Lock()

    def race(seed: int) -> None:
        order = list(proposals)
        random.Random(seed).shuffle(order)
        barrier.wait()
        for proposal in order:
            outcome = world.app.perform(AGENT, proposal).outcome
            with lock:
                performed.append(f"{proposal.proposal_id}:{outcome}")

    threads = [threading.Thread(target=race, args=(seed,)) for seed in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(performed) == 16 * 8
    for proposal in proposals:
        outcomes_of = [p for p in performed if p.startswith(f"{proposal.proposal_id}:")]
        assert outcomes_of.count(f"{proposal.proposal_id}:performed") == 1
    assert world.receiver.counts().effects == cycles + 1 + 8
    assert count_rows(counted.url, "operations") == cycles + 1 + 8
    raced = counted.settled(world)
    if counted.sqlite:  # at most pool_size stay open once the racers are done
        assert raced["store"] <= 8
        assert raced["wal"] == raced["store"]
    else:
        stable(before, raced, counted.url)
