"""``effectledger worker`` as real processes: many share one store, signals stop them cleanly,
a killed one leaves its operation for another to reconcile, and ``recover --app`` settles a
lost reply. Each test checks the rows and the receiver's own count of effects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import LedgerSettings, OperationState
from effectledger.clock import SystemClock
from tests.conftest import count_rows
from tests.worker.apps import LOADING_VARIABLE, RECEIVER_VARIABLE, RECOVER_AFTER_VARIABLE
from tests.worker.support import Refunds, refunds, wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.worker.apps:refunds"
FAST = ("--dispatch-interval", "0.05", "--recovery-interval", "0.05", "--seal-interval", "0")

pytestmark = pytest.mark.slow


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[Refunds]:
    """The refund application on the wall clock; its lost replies are due for lookup at once."""
    made = refunds(
        store_url,
        tmp_path,
        clock=SystemClock(),
        settings=LedgerSettings(recover_after=timedelta(0)),
    )
    yield made
    made.close()


def start_worker(
    store_url: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``effectledger worker --app tests.worker.apps:refunds`` from the repository root."""
    return subprocess.Popen(
        [sys.executable, "-m", "effectledger.cli", "worker", "--db", store_url, "--app", APP,
         *FAST, *args],
        cwd=ROOT,
        env={**os.environ, RECEIVER_VARIABLE: str(tmp_path / "receiver.db"), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def started(process: subprocess.Popen[str]) -> None:
    """Read the worker's log until it says its loops run (or it ends)."""
    assert process.stderr is not None
    for line in process.stderr:
        if "worker started" in line:
            return


def stop(process: subprocess.Popen[str], number: int = signal.SIGTERM) -> tuple[int, str, str]:
    """Send ``number`` to the worker and wait for it: exit code, standard output and error."""
    process.send_signal(number)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def test_four_worker_processes_share_one_store_without_double_work(
    world: Refunds, store_url: str, tmp_path: Path
) -> None:
    """4 worker processes of 2+2 threads perform each READY refund once and look each lost reply
    up once; SIGTERM stops each with exit 0."""
    ready = world.ready(40)
    lost = world.uncertain(8)
    workers = [
        start_worker(store_url, tmp_path, "--dispatch-threads", "2", "--recovery-threads", "2")
        for _ in range(4)
    ]
    try:
        for worker in workers:  # each has loaded its app and runs its loops before it is stopped
            started(worker)
        wait_until(lambda: set(world.states(ready + lost)) == {OperationState.SUCCEEDED})
    finally:
        stopped = [stop(worker) for worker in workers]
    for code, out, err in stopped:
        assert code == 0, err
        assert "worker stopped" in out
        assert "SIGTERM received" in err
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (48, 48)
    assert count_rows(store_url, "attempts") == 48
    assert world.events("AttemptPrepared") == 48
    assert world.events("ReconciliationStarted") == 8
    assert world.events("OperationReleased") == 0


def test_sigint_stops_an_idle_worker_with_exit_zero(
    world: Refunds, store_url: str, tmp_path: Path
) -> None:
    """SIGINT stops a worker with nothing to do, as SIGTERM does, and nothing is written."""
    before = count_rows(store_url, "audit_events")
    worker = start_worker(store_url, tmp_path)
    assert worker.stderr is not None
    for line in worker.stderr:  # the first log lines, until the loops run
        if "worker started" in line:
            break
    code, out, err = stop(worker, signal.SIGINT)
    assert code == 0, err
    assert "worker stopped: dispatched 0" in out
    assert count_rows(store_url, "audit_events") == before


def test_sigterm_while_the_app_loads_stops_the_worker_with_exit_zero(
    world: Refunds, store_url: str, tmp_path: Path
) -> None:
    """A SIGTERM that arrives while the worker is still loading its application stops it with
    exit 0 once it has loaded, before it dispatches anything: the READY refund stays READY."""
    (operation_id,) = world.ready(1)
    before = count_rows(store_url, "audit_events")
    mark = tmp_path / "loading"
    worker = subprocess.Popen(
        [sys.executable, "-m", "effectledger.cli", "worker", "--db", store_url,
         "--app", "tests.worker.apps:slow_refunds", *FAST],
        cwd=ROOT,
        env={**os.environ, RECEIVER_VARIABLE: str(tmp_path / "receiver.db"),
             LOADING_VARIABLE: str(mark)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    wait_until(mark.exists, timeout=60)  # the factory runs: the app is loading
    code, out, err = stop(worker)
    assert code == 0, err
    assert "SIGTERM received" in err
    assert "worker stopped" in out
    assert world.states([operation_id]) == [OperationState.READY]
    assert count_rows(store_url, "audit_events") == before
    assert world.receiver.counts().submissions == 0


def test_a_killed_worker_leaves_its_operation_for_another_to_reconcile(
    world: Refunds, store_url: str, tmp_path: Path
) -> None:
    """A worker claiming one operation at a time killed after the receiver answered, before
    recording, leaves the refund IN_PROGRESS; another worker looks it up and records it
    SUCCEEDED without sending again."""
    (operation_id,) = world.ready(1)
    timing = {RECOVER_AFTER_VARIABLE: "1"}
    killed = start_worker(
        store_url,
        tmp_path,
        "--recovery-threads",
        "0",
        "--claim-batch",
        "1",
        env={**timing, "EFFECTLEDGER_CRASH_AT": "after_reply"},
    )
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert world.states([operation_id]) == [OperationState.IN_PROGRESS]
    assert world.receiver.counts().effects == 1

    survivor = start_worker(store_url, tmp_path, env=timing)
    try:
        wait_until(lambda: world.states([operation_id]) == [OperationState.SUCCEEDED])
    finally:
        code, _, err = stop(survivor)
    assert code == 0, err
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert count_rows(store_url, "attempts") == 1
    assert world.events("ProviderAcceptanceReconciled") == 1


def test_recover_with_the_app_reconciles_its_declared_destination(
    world: Refunds, store_url: str, tmp_path: Path
) -> None:
    """``recover --app --once`` looks up a lost reply at the application's destination."""
    (operation_id,) = world.uncertain(1)
    done = subprocess.run(
        [sys.executable, "-m", "effectledger.cli", "recover", "--db", store_url, "--app", APP,
         "--once", "--json"],
        cwd=ROOT,
        env={**os.environ, RECEIVER_VARIABLE: str(tmp_path / "receiver.db")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"resolved": [{"tenant_id": "acme"' in done.stdout
    assert world.states([operation_id]) == [OperationState.SUCCEEDED]
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects, counts.lookups) == (1, 1, 1)


def test_json_logs_are_one_object_per_line(world: Refunds, store_url: str, tmp_path: Path) -> None:
    """``--log-format json`` prints each log line as one JSON object with level and message."""
    world.ready(1)
    done = subprocess.run(
        [sys.executable, "-m", "effectledger.cli", "worker", "--db", store_url, "--app", APP,
         "--once", "--log-format", "json", "--seal-interval", "0"],
        cwd=ROOT,
        env={**os.environ, RECEIVER_VARIABLE: str(tmp_path / "receiver.db")},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert {"time", "level", "logger", "message"} <= records[0].keys()
    assert any(r["message"] == "dispatch: 1 operation(s) taken" for r in records)
    assert world.receiver.counts().effects == 1
