"""Batch claimers race over one READY set: 16 threads, and 4 processes of 4 threads, both backends.

Refunds of two tenants wait READY, some of them stale (their order changed), so batches claim
and release across two pools' running totals at once. Afterwards each refund was claimed once
(one attempt, one ``AttemptPrepared``) and sent once by the receiver's own count, or released
once and never sent; no pass failed (on PostgreSQL the store runs each transaction once, so a
deadlock between batch claimers would fail a pass instead of being retried away), and every
pool's running totals equal the recount of its operations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import OperationState
from effectledger.authority.capacity import totals_mismatches_in
from tests.conftest import count_rows
from tests.faults._harness import spawn_all
from tests.races.test_authority_races import PROCESSES, THREADS
from tests.worker.batch_world import Orders, dispatch_in_process, dispatch_racing, orders_world

PER_TENANT = 64
TENANTS = ("acme", "globex")
STALE = [(tenant, number) for tenant in TENANTS for number in range(3, PER_TENANT, 8)]
CLAIM_BATCH = 8

pytestmark = pytest.mark.slow


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[Orders]:
    """Refunds of two tenants left READY in a fresh store, the stale ones' orders changed."""
    made = orders_world(store_url, tmp_path, once=True)
    for tenant in TENANTS:
        made.ready(PER_TENANT, tenant=tenant)
    for tenant, number in STALE:
        made.orders.change(tenant, f"ord-{number:07d}")
    yield made
    made.close()


def _each_once(world: Orders, taken: int) -> None:
    """Each refund claimed once and sent once, or released once and never sent."""
    url = world.store_url
    total = PER_TENANT * len(TENANTS)
    sent = total - len(STALE)
    assert taken == total  # every pass reported what it performed or released, once
    assert count_rows(url, "operations", "state = 'SUCCEEDED'") == sent
    assert count_rows(url, "operations", "state = 'RELEASED'") == len(STALE)
    assert count_rows(url, "attempts") == sent
    assert world.events("AttemptPrepared") == sent
    assert world.events("ProviderAcceptanceConfirmed") == sent
    assert world.events("OperationReleased") == len(STALE)
    doubled = (
        "operation_id IN (SELECT operation_id FROM attempts "
        "GROUP BY tenant_id, operation_id HAVING count(*) > 1)"
    )
    assert count_rows(url, "attempts", doubled) == 0
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects, counts.replays) == (sent, sent, 0)
    assert world.app.ledger.store.read(totals_mismatches_in) == []
    for tenant in TENANTS:
        stale = sum(1 for owner, _ in STALE if owner == tenant)
        where = f"tenant_id = '{tenant}' AND state = '{OperationState.SUCCEEDED}'"
        assert count_rows(url, "operations", where) == PER_TENANT - stale


def test_sixteen_threads_claim_each_operation_once(world: Orders) -> None:
    """16 threads of one process claiming batches of 8 over the same READY refunds."""
    taken, failures = dispatch_racing(world, THREADS, CLAIM_BATCH)
    assert failures == []
    _each_once(world, taken)


def test_four_processes_claim_each_operation_once(world: Orders, tmp_path: Path) -> None:
    """4 processes of 4 threads each claiming batches of 8 over the same READY refunds."""
    arguments = (world.store_url, str(tmp_path), STALE, THREADS // PROCESSES, CLAIM_BATCH)
    reports = spawn_all(dispatch_in_process, [arguments] * PROCESSES, timeout_s=600)
    assert [report["failures"] for report in reports] == [[]] * PROCESSES
    _each_once(world, sum(int(report["taken"]) for report in reports))
