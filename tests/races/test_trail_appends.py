"""Appends racing on one trail, 16 threads and 4 processes on both backends: each append reads
the trail's head after taking the trail's lock, so no two appends take the same place.

On PostgreSQL the lock and the read after it reach the server in one round trip (pipeline
mode); each runs as a statement of its own under READ COMMITTED, so the read's snapshot is
taken once the lock is granted and holds every append committed before. A read that saw an
older head would chain two events after the same one: a duplicate sequence (refused by the
trail's key) or a fork, and the counts below would not add up."""

from __future__ import annotations

from typing import Any

import pytest

from effectledger.events.chain import verify_chain
from effectledger.ledger import Ledger, append_event
from effectledger.model.operations import Context
from effectledger.model.states import EventType
from effectledger.store import open_store
from tests.conftest import raw_sql
from tests.faults._harness import spawn_all
from tests.races.test_authority_races import PROCESSES, THREADS, race

TRAIL = "op-shared"
CONTEXT = Context(tenant_id="acme", actor_id="auditor")
PER_PROCESS = 8


def _append(ledger: Ledger, index: int) -> None:
    """Append one audit-only event, numbered ``index``, to the shared trail."""
    ledger.store.write(
        lambda tx: append_event(
            tx,
            ledger,
            tenant_id=CONTEXT.tenant_id,
            operation_id=TRAIL,
            actor=f"worker-{index}",
            event_type=EventType.ADMISSION_DENIED,
            details={"index": index},
        ),
        label="append",
    )


def append_in_process(
    store_url: str, indexes: list[int], barrier: Any, results: Any, worker: int
) -> None:
    """Spawned: append the events numbered ``indexes`` after the barrier."""
    store = open_store(store_url)
    ledger = Ledger(store)
    barrier.wait()
    for index in indexes:
        _append(ledger, index)
    store.close()
    results.put({"worker": worker, "appended": len(indexes)})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_racing_appends_to_one_trail_chain_one_after_another(mode: str, store_url: str) -> None:
    """Every racing append is stored once, at its own sequence, in one unbroken chain."""
    store = open_store(store_url)
    ledger = Ledger(store)
    if mode == "threads":
        total = THREADS
        race(THREADS, lambda index: _append(ledger, index))
    else:
        total = PROCESSES * PER_PROCESS
        chunks = [list(range(total))[worker::PROCESSES] for worker in range(PROCESSES)]
        reports = spawn_all(append_in_process, [(store_url, chunk) for chunk in chunks])
        assert sum(report["appended"] for report in reports) == total
    rows = raw_sql(
        store_url,
        f"SELECT sequence FROM audit_events WHERE operation_id = '{TRAIL}' ORDER BY sequence",
    )
    assert [row[0] for row in rows] == list(range(1, total + 1))
    events = ledger.events(CONTEXT, TRAIL)
    verify_chain(events)
    assert sorted(event.details["index"] for event in events) == list(range(total))
    store.close()
