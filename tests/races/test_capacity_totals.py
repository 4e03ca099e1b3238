"""Running capacity totals under real concurrency: 16 threads and 4 processes, on both backends.

Admissions, successes, rejections and lost requests race on one pool with a limit; afterwards
every pool's running totals equal the sum over its operations, and the operations the ledger
holds or committed never exceed the limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger, SimulatedReceiver, SubmitMode
from effectledger.authority.capacity import rebuild_totals_in, totals_mismatches_in
from tests.conftest import count_rows, raw_sql
from tests.faults._harness import spawn_all
from tests.races.test_authority_races import PROCESSES, THREADS, race
from tests.races.world import (
    AGENT,
    REFUND_30,
    approver,
    build,
    close,
    perform_answered_in_process,
    repair_or_perform_in_process,
)

LIMIT = 240  # eight refunds of 30
MODES = (SubmitMode.ACCEPT, SubmitMode.PERMANENT_REJECT, SubmitMode.LOSE_REQUEST)
HELD = "('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW', 'RETRY_PENDING')"
# One row of the pool's totals (PostgreSQL spreads a pool over several) gains 500 held units.
TAMPER = (
    "UPDATE capacity_totals SET held = held + 500 "
    "WHERE shard = (SELECT min(shard) FROM capacity_totals)"
)


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver, its pool limited to :data:`LIMIT`."""
    made = build(store_url, tmp_path)
    made.authority.set_capacity_limit("acme", "refunds", LIMIT)
    yield made
    close(made)


def _units(store_url: str, where: str) -> int:
    rows = raw_sql(store_url, f"SELECT coalesce(sum(units), 0) FROM operations WHERE {where}")
    return int(rows[0][0])  # type: ignore[call-overload]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_racing_transitions_keep_the_totals_equal_to_the_operations(
    mode: str, service: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """Racing performs that succeed, are rejected or lose their request leave totals equal to
    the recount, and never hold or commit more than the limit."""
    calls: list[tuple[str, str, str]] = []
    for index in range(THREADS):
        arguments = {**REFUND_30, "order_id": f"ord-{3000 + index}"}
        proposal = service.propose(AGENT, "refund_order", arguments)
        approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
        calls.append((proposal.proposal_id, approval.approval_id, MODES[index % 3].value))
    if mode == "threads":
        # One service per thread: each receiver object answers in its own mode.
        services = [build(store_url, tmp_path) for _ in range(THREADS)]
        try:
            for one, (_, _, answer) in zip(services, calls, strict=True):
                next(iter(one.destinations.values())).submit_mode = SubmitMode(answer)  # type: ignore[attr-defined]
            outcomes = [
                (r.outcome, r.reason)
                for r in race(
                    THREADS,
                    lambda i: services[i].perform(AGENT, calls[i][0], approval=calls[i][1]),
                )
            ]
        finally:
            for one in services:
                close(one)
    else:
        chunks = [(store_url, str(tmp_path), calls[i::PROCESSES]) for i in range(PROCESSES)]
        reports = spawn_all(perform_answered_in_process, chunks)
        outcomes = [(o, r) for report in reports for o, r, _ in report["outcomes"]]
    admitted = count_rows(store_url, "operations")
    denied = [reason for _, reason in outcomes if reason == "capacity_exceeded"]
    assert admitted + len(denied) == THREADS
    assert admitted >= LIMIT // 30  # rejections only free units: at least eight got in
    assert service.ledger.store.read(totals_mismatches_in) == []
    held = _units(store_url, f"state IN {HELD}")
    committed = _units(store_url, "state = 'SUCCEEDED'")
    freed = _units(store_url, "state IN ('REJECTED', 'RELEASED')")
    assert held + committed <= LIMIT
    assert held + committed + freed == 30 * admitted
    usage = service.authority.capacity(AGENT, "refunds")
    assert (usage.held, usage.committed, usage.freed) == (held, committed, freed)
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    try:
        assert receiver.counts().effects == count_rows(
            store_url, "operations", "state = 'SUCCEEDED'"
        )
    finally:
        receiver.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_repairs_racing_performs_leave_the_totals_right(
    mode: str, store_url: str, tmp_path: Path
) -> None:
    """Repairs of tampered totals racing performs that move units leave every pool's totals
    equal to its operations; only the first repair finds the tampering."""
    service = build(store_url, tmp_path)
    calls: list[tuple[str, str, str]] = []
    try:
        for index in range(THREADS):
            arguments = {**REFUND_30, "order_id": f"ord-{4000 + index}"}
            proposal = service.propose(AGENT, "refund_order", arguments)
            approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
            calls.append((proposal.proposal_id, approval.approval_id, MODES[index % 3].value))
        service.perform(AGENT, calls[0][0], approval=calls[0][1])
        raw_sql(store_url, TAMPER)
        store = service.ledger.store
        if mode == "threads":
            services = [build(store_url, tmp_path) for _ in range(THREADS)]
            try:

                def one(i: int) -> int:
                    if i < 4:  # four repairers, twelve performers
                        return len(store.write(rebuild_totals_in, label="capacity repair"))
                    proposal_id, approval_id, answer = calls[i]
                    receiver = next(iter(services[i].destinations.values()))
                    receiver.submit_mode = SubmitMode(answer)  # type: ignore[attr-defined]
                    services[i].perform(AGENT, proposal_id, approval=approval_id)
                    return 0

                found = sum(race(THREADS, one))
            finally:
                for other in services:
                    close(other)
        else:
            performs = calls[4:]
            chunks = [
                (store_url, str(tmp_path), 3 if worker == 0 else 0, performs[worker::PROCESSES])
                for worker in range(PROCESSES)
            ]
            found = sum(
                report["found"] for report in spawn_all(repair_or_perform_in_process, chunks)
            )
        assert found == 1  # the first repair fixed it; the later ones found nothing to fix
        assert store.read(totals_mismatches_in) == []
        assert count_rows(store_url, "operations") == (THREADS - 4) + 1
        usage = service.authority.capacity(AGENT, "refunds")
        held = _units(store_url, f"state IN {HELD}")
        assert (usage.held, usage.committed) == (held, _units(store_url, "state = 'SUCCEEDED'"))
    finally:
        close(service)
