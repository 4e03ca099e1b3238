"""The fault harness: run the driver in a real child process and read durable facts afterwards."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from effectledger import (
    Attempt,
    AuditEvent,
    Context,
    LedgerSettings,
    ManualClock,
    Operation,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.audit import verify_chain
from effectledger.destinations.simulated import ReceiverCounts
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.faults.driver import ACTOR, RECEIVER_SYNCHRONOUS, TENANT

DRIVER = Path(__file__).with_name("driver.py")
CRASH_ENV = "EFFECTLEDGER_CRASH_AT"
# Children and parents share this start: every window is computed from it, nobody sleeps.
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CHILD_TIMEOUT_S = 60
SIGKILLED = -signal.SIGKILL
CONTEXT = Context(tenant_id=TENANT, actor_id=ACTOR)


@dataclass(frozen=True, slots=True)
class ChildRun:
    """How a driver process ended and what it announced."""

    returncode: int
    lines: list[str]
    stderr: str

    def started(self) -> list[str]:
        """The steps the child began, in order."""
        return [line.removeprefix("start ") for line in self.lines if line.startswith("start ")]

    def finished(self) -> list[str]:
        """The steps the child completed, in order."""
        return [line.removeprefix("done ") for line in self.lines if line.startswith("done ")]


def run_driver(
    store_url: str,
    receiver_path: Path,
    steps: Sequence[str],
    *,
    operation_id: str = "op-1",
    crash_at: str | None = None,
    submit_mode: SubmitMode = SubmitMode.ACCEPT,
) -> ChildRun:
    """Run the driver's ``steps`` in a fresh interpreter, armed at ``crash_at`` if given."""
    env = {name: value for name, value in os.environ.items() if name != CRASH_ENV}
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    completed = subprocess.run(
        [
            sys.executable,
            str(DRIVER),
            "--store",
            store_url,
            "--receiver",
            str(receiver_path),
            "--start",
            START.isoformat(),
            "--operation",
            operation_id,
            "--submit-mode",
            submit_mode.value,
            *steps,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    return ChildRun(
        returncode=completed.returncode,
        lines=completed.stdout.splitlines(),
        stderr=completed.stderr,
    )


@dataclass(frozen=True, slots=True)
class Facts:
    """What the ledger's rows and the receiver's own file say about one operation."""

    operation: Operation
    attempts: list[Attempt]
    events: list[AuditEvent]
    counts: ReceiverCounts
    effects_for_key: int

    @property
    def event_types(self) -> list[str]:
        """The audit trail's event types, in sequence order."""
        return [event.event_type for event in self.events]


class Survivor:
    """A new ledger and receiver over the files a killed child left behind."""

    def __init__(
        self,
        store_url: str,
        receiver_path: Path,
        *,
        settings: LedgerSettings | None = None,
        now: datetime = START,
    ) -> None:
        self.clock = ManualClock(now)
        self.store = open_store(store_url)
        self.ledger = Ledger(self.store, clock=self.clock, settings=settings)
        self.receiver = SimulatedReceiver(receiver_path, synchronous=RECEIVER_SYNCHRONOUS)
        self.recovery = RecoveryWorker(self.ledger, self.receiver)
        self.executor = Executor(self.ledger, self.receiver)

    def facts(self, operation_id: str = "op-1") -> Facts:
        """Read the durable facts and check the operation's audit hash chain end to end."""
        operation = self.ledger.get(CONTEXT, operation_id)
        events = self.ledger.events(CONTEXT, operation_id)
        verify_chain(events, head=operation.last_event_hash)
        return Facts(
            operation=operation,
            attempts=self.ledger.attempts(CONTEXT, operation_id),
            events=events,
            counts=self.receiver.counts(),
            effects_for_key=self.receiver.effects_for(operation.idempotency_key),
        )

    def close(self) -> None:
        """Close the store's and the receiver's connections."""
        self.store.close()
        self.receiver.close()


@contextmanager
def survivor(
    store_url: str,
    receiver_path: Path,
    *,
    settings: LedgerSettings | None = None,
    now: datetime = START,
) -> Iterator[Survivor]:
    """A :class:`Survivor` that is closed afterwards."""
    opened = Survivor(store_url, receiver_path, settings=settings, now=now)
    try:
        yield opened
    finally:
        opened.close()


def spawn_all(
    target: Callable[..., None], per_worker: Sequence[tuple[object, ...]], *, timeout_s: float = 120
) -> list[dict[str, Any]]:
    """Start one spawned process per argument tuple, released together; return their reports.

    Each process is called as ``target(*args, barrier, results, worker)`` and must put one dict
    on ``results`` and exit 0. A process that dies first fails the test at once (the others,
    stuck at the barrier, are terminated) instead of leaving it to time out.
    """
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(len(per_worker))
    results = spawn.Queue()
    processes = [
        spawn.Process(target=target, args=(*args, barrier, results, worker), daemon=True)
        for worker, args in enumerate(per_worker)
    ]
    for process in processes:
        process.start()
    reports: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(reports) < len(processes):
            try:
                reports.append(results.get(timeout=0.2))
            except queue.Empty:
                died = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
                assert not died, f"a worker died with exit code {died[0]}"
                assert time.monotonic() < deadline, "the workers did not finish in time"
    finally:
        for process in processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.terminate()
                process.join()
        results.close()
    assert [process.exitcode for process in processes] == [0] * len(processes)
    return sorted(reports, key=lambda report: int(report["worker"]))
