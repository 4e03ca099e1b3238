"""The SQLite ledger on a real disk that fills up or turns read-only, then recovers.

The disk is a size-limited tmpfs (root only; CI is root): the ledger's file and its WAL live
on it, a filler file takes the free space, a remount makes it read-only. Each test proves the
refused write left nothing behind (the rows, the trails, no attempt without its event) and that
once the disk has room again the same calls and the worker finish every refund exactly once,
by the receiver's own count.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from effectledger import (
    ManualClock,
    OperationState,
    Proposal,
    StorageFull,
    StorageReadOnly,
)
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app
from effectledger.workers import Worker, WorkerSettings
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.faults._disk import SmallDisk, check_consistent, mount_small_disk, row_counts
from tests.http_api.server import serving
from tests.worker.support import LOOKUP_WINDOW, Refunds, refunds

pytestmark = pytest.mark.slow


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 4 MB tmpfs of the test's own, unmounted afterwards."""
    yield from mount_small_disk(tmp_path)


def _approved(world: Refunds) -> Proposal:
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    world.app.approve(REVIEWER, proposal)
    return proposal


def _finish(world: Refunds, clock: ManualClock) -> None:
    """Run the worker's passes, past the lookup window, until nothing is left to do."""
    worker = Worker(world.app, WorkerSettings(seal_interval=None))
    for _ in range(5):
        worker.dispatch_pass()
        clock.advance(LOOKUP_WINDOW)
        worker.recovery_pass()


def test_a_full_disk_refuses_the_write_whole_and_the_refund_finishes_once_when_freed(
    disk: SmallDisk, tmp_path: Path
) -> None:
    """On a full disk the refused step raises storage_full and writes no row; freed, every
    refund is made exactly once."""
    clock = ManualClock()
    world = refunds(disk.url, tmp_path, clock=clock)
    try:
        done = [world.app.perform(AGENT, _approved(world)) for _ in range(2)]
        assert [result.state for result in done] == [OperationState.SUCCEEDED] * 2
        proposals = [_approved(world)]  # approved before the disk fills: perform is refused
        approved = {proposals[0].proposal_id}
        assert disk.fill() > 0

        refused: StorageFull | None = None
        for _ in range(50):  # the WAL's last page may hold a step or two
            try:
                proposal = proposals[-1]
                if proposal.proposal_id in approved:
                    before = row_counts(disk.url)
                    world.app.perform(AGENT, proposal)
                    before = row_counts(disk.url)
                    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
                    proposals.append(proposal)
                before = row_counts(disk.url)
                world.app.approve(REVIEWER, proposal)
                approved.add(proposal.proposal_id)
            except StorageFull as exc:
                refused = exc
                assert row_counts(disk.url) == before  # the refused step kept nothing
                break
        assert refused is not None, "the full disk never refused a write"
        assert refused.code == "storage_full"
        assert refused.status == 503
        check_consistent(world.app, disk.url)  # reads answer on a full disk
        submitted_while_full = world.receiver.counts().effects

        disk.free()
        for proposal in proposals:  # the same calls again: each completes or replays
            if proposal.proposal_id not in approved:
                world.app.approve(REVIEWER, proposal)
            world.app.perform(AGENT, proposal)
        _finish(world, clock)

        states = check_consistent(world.app, disk.url)
        assert states == {OperationState.SUCCEEDED: 2 + len(proposals)}
        counts = world.receiver.counts()
        assert counts.effects == counts.submissions == 2 + len(proposals)
        assert counts.effects >= submitted_while_full
        for operation in world.app.operations(REVIEWER, limit=100):
            assert world.receiver.effects_for(operation.idempotency_key) == 1
    finally:
        world.close()


def test_the_worker_backs_off_on_a_full_disk_and_resumes_once_it_is_freed(
    disk: SmallDisk, tmp_path: Path
) -> None:
    """A worker whose claims hit a full disk waits, doubling, and makes each refund once later."""
    clock = ManualClock()
    world = refunds(disk.url, tmp_path, clock=clock)
    try:
        operation_ids = world.ready(3)
        disk.fill()
        waits: list[float] = []

        def wait(seconds: float) -> bool:
            waits.append(seconds)
            if len(waits) == 3:
                assert world.receiver.counts().effects == 0  # nothing sent while full
                disk.free()
            clock.advance(LOOKUP_WINDOW)
            done = world.states(operation_ids) == [OperationState.SUCCEEDED] * 3
            return done or len(waits) > 100

        settings = WorkerSettings(
            dispatch_interval=0.01,
            recovery_interval=0.01,
            recovery_threads=0,
            seal_interval=None,
            backoff_initial=0.5,
            backoff_max=1.0,
        )
        worker = Worker(world.app, settings, wait=wait)
        worker.start()
        assert worker.join(timeout=60)

        assert waits[:3] == [0.5, 1.0, 1.0]
        assert worker.totals["dispatch"].store_down >= 3
        assert world.states(operation_ids) == [OperationState.SUCCEEDED] * 3
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (3, 3)
        assert check_consistent(world.app, disk.url) == {OperationState.SUCCEEDED: 3}
    finally:
        world.close()


def test_a_read_only_disk_answers_reads_refuses_writes_and_resumes_when_writable(
    disk: SmallDisk, tmp_path: Path
) -> None:
    """On a file system remounted read-only the ledger (and its HTTP API) reads, refuses every
    write with storage_read_only and writes nothing; remounted writable, it performs once."""
    clock = ManualClock()
    world = refunds(disk.url, tmp_path, clock=clock)
    (first,) = world.ready(1)
    proposal = _approved(world)
    token = ApiKeys(world.app.store).create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    before = row_counts(disk.url)
    world.close()  # Linux remounts read-only only a file system nobody holds open for writing
    disk.remount("ro")

    world = refunds(disk.url, tmp_path, clock=clock)
    try:
        with (
            serving(create_app(world.app, ApiKeys(world.app.store))) as base,
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token.token}"}) as http,
        ):
            read = http.get(f"/v1/operations/{first}")
            assert read.status_code == 200, read.text
            assert read.json()["state"] == "READY"
            write = http.post(
                "/v1/proposals", json={"action": "refund_order", "arguments": REFUND_30}
            )
            assert write.status_code == 503, write.text
            assert write.json()["code"] == "storage_read_only"
        assert world.app.operation(REVIEWER, first).state is OperationState.READY
        assert world.app.summary(REVIEWER).by_state["READY"] == 1
        with pytest.raises(StorageReadOnly) as refused:
            world.app.perform(AGENT, proposal)
        assert refused.value.code == "storage_read_only"
        with pytest.raises(StorageReadOnly):
            world.app.propose(AGENT, "refund_order", REFUND_30)
        with pytest.raises(StorageReadOnly):
            world.app.dispatch_ready()
        assert world.receiver.counts().effects == 0  # nothing was sent
        assert world.app.operation(REVIEWER, first).state is OperationState.READY

        disk.remount("rw")
        assert row_counts(disk.url) == before  # not a row was written while read-only
        result = world.app.perform(AGENT, proposal)
        assert result.state is OperationState.SUCCEEDED
        _finish(world, clock)
        assert check_consistent(world.app, disk.url) == {OperationState.SUCCEEDED: 2}
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (2, 2)
    finally:
        world.close()


CRASHED_WRITER = """
import os, sys
from pathlib import Path
from tests.worker.support import refunds
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
world = refunds(sys.argv[1], Path(sys.argv[2]))
proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
world.app.approve(REVIEWER, proposal)
print(world.app.perform(AGENT, proposal).operation_id, flush=True)
os._exit(0)  # no close: the commits stay in the WAL, not yet in the database file
"""


def test_a_read_only_disk_shows_the_commits_a_crashed_writer_left_in_the_wal(
    disk: SmallDisk, tmp_path: Path
) -> None:
    """A process that ended without closing left its last commits in the WAL; on the disk
    remounted read-only the ledger still reads them."""
    done = subprocess.run(
        [sys.executable, "-c", CRASHED_WRITER, disk.url, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    operation_id = done.stdout.strip()
    assert (disk.path / "ledger.db-wal").stat().st_size > 0
    disk.remount("ro")
    world = refunds(disk.url, tmp_path)
    try:
        assert world.app.operation(REVIEWER, operation_id).state is OperationState.SUCCEEDED
        with pytest.raises(StorageReadOnly):
            world.app.propose(AGENT, "refund_order", REFUND_30)
        assert world.receiver.counts().effects == 1
    finally:
        world.close()
