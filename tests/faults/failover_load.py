"""The load and the failures of the failover tests and of ``benchmarks/failover.py``.

:class:`Load` runs performer processes (``tests.faults.failover_performer``) and collects their
answers; :func:`inflict` kills, stops and switches over the primary at random moments and
notes when; :func:`settle` drives every operation to a final state the way the worker would
(dispatch what is READY, recover what is uncertain by lookup); :func:`figures` turns the
answers and the failure times into the figures the benchmark prints.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectledger import EffectLedgerError, OperationState
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.clock import SystemClock
from effectledger.store import open_store
from tests.conftest import run_sql
from tests.faults._patroni import HaCluster
from tests.support.evidence import SIGNER
from tests.worker.support import Refunds

ROOT = Path(__file__).resolve().parents[2]
FINAL = frozenset({OperationState.SUCCEEDED, OperationState.REJECTED, OperationState.RELEASED})
ANSWERED = frozenset({"performed", "replayed"})


@dataclass
class Load:
    """Performer processes running against a store, and what they answered."""

    folder: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stop_file(self) -> Path:
        """The file whose existence tells every performer to stop."""
        return self.folder / "stop"

    def start(self, urls: list[str], threads: int, *, pause: float = 0.0) -> None:
        """One performer process per URL, each with ``threads`` threads resting ``pause``
        seconds after each refund; each writes its answers to a file of its own (a pipe nobody
        reads would stall it once full)."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for url in urls:
            index = len(self.processes)
            out = (self.folder / f"answers-{index}.jsonl").open("w")
            err = (self.folder / f"errors-{index}.txt").open("w")
            self.processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.faults.failover_performer",
                        "--store",
                        url,
                        "--folder",
                        str(self.folder),
                        "--threads",
                        str(threads),
                        "--stop-file",
                        str(self.stop_file),
                        "--pause",
                        str(pause),
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=err,
                )
            )
            out.close()
            err.close()

    def stop(self) -> None:
        """Tell every performer to stop, wait for it, and collect its answers."""
        self.stop_file.touch()
        for index, process in enumerate(self.processes):
            process.wait(timeout=180)
            err = (self.folder / f"errors-{index}.txt").read_text("utf-8")
            assert process.returncode == 0, err[-3000:]
            out = (self.folder / f"answers-{index}.jsonl").read_text("utf-8")
            self.answers += [json.loads(line) for line in out.splitlines() if line.strip()]

    def performed(self) -> list[dict[str, Any]]:
        """The perform answers that said the refund was performed or replayed."""
        return [a for a in self.answers if a.get("outcome") in ANSWERED]

    def errors(self) -> list[dict[str, Any]]:
        """The answers that were an error, with its code."""
        return [a for a in self.answers if "error" in a]


def seal_loop(store_url: str, done: threading.Event, sealed: list[int]) -> None:
    """Seal tenant acme's events every half second until ``done``, whatever the database does."""
    store = None
    while not done.is_set():
        try:
            if store is None:
                store = open_store(store_url)
            sealed.append(LogSealer(store, SIGNER, clock=SystemClock()).seal("acme").sealed)
        except EffectLedgerError:
            pass
        done.wait(0.5)
    if store is not None:
        store.close()


def every_operation(url: str) -> list[tuple[str, OperationState, str]]:
    """(operation id, state, idempotency key) of every operation in the store's table.

    Read around the ledger because a run makes more operations than one listing returns
    (``operations`` stops at 10,000, the newest first).
    """
    rows = run_sql(url, "SELECT operation_id, state, idempotency_key FROM operations")
    return [(str(op), OperationState(str(state)), str(key)) for op, state, key in rows]


def settle(world: Refunds, url: str, timeout: float = 180.0) -> dict[str, OperationState]:
    """Dispatch what is READY and recover what is uncertain until every operation is final."""
    deadline = time.monotonic() + timeout
    while True:
        world.app.dispatch_ready(limit=1000)
        world.app.recover(limit=1000)
        states = {op: state for op, state, _ in every_operation(url)}
        if set(states.values()) <= FINAL:
            return states
        assert time.monotonic() < deadline, sorted(set(states.values()))
        time.sleep(1)


@dataclass(frozen=True)
class Inflicted:
    """One failure the test caused: what, when it began, and when the cluster was healthy."""

    action: str
    at: float
    healthy_at: float


def inflict(
    cluster: HaCluster, kills: int, switchovers: int, stops: int, *, seed: int | None = None
) -> list[Inflicted]:
    """Kill, stop and switch the primary over at random moments; wait for health after each."""
    chance = random.Random(seed)
    plan = ["kill"] * kills + ["switchover"] * switchovers + ["stop"] * stops
    chance.shuffle(plan)
    done = []
    for action in plan:
        time.sleep(chance.uniform(0.5, 2.5))
        at = time.time()
        if action == "kill":
            cluster.kill_primary()
        elif action == "switchover":
            cluster.switchover()
        else:
            stopped = cluster.stop_primary()
            time.sleep(chance.uniform(0.5, 2.0))
            cluster.start(stopped)
        time.sleep(0.5)
        cluster.wait_healthy(timeout=180)
        done.append(Inflicted(action=action, at=at, healthy_at=time.time()))
    return done


def refused_windows(answers: list[dict[str, Any]], inflicted: list[Inflicted]) -> list[float]:
    """Per failure, the seconds from its start to the next refund performed after it."""
    done_at = sorted(a["t"] for a in answers if a.get("outcome") == "performed")
    windows = []
    for failure in inflicted:
        after = next((t for t in done_at if t > failure.at), None)
        if after is not None:
            windows.append(after - failure.at)
    return windows


def figures(
    answers: list[dict[str, Any]], inflicted: list[Inflicted], started: float, ended: float
) -> dict[str, Any]:
    """Performs per second before, during and after the failures, and the refused windows."""
    done_at = [a["t"] for a in answers if a.get("outcome") == "performed"]
    first = inflicted[0].at if inflicted else ended
    last = inflicted[-1].healthy_at if inflicted else ended

    def rate(low: float, high: float) -> float:
        span = high - low
        return sum(low <= t < high for t in done_at) / span if span > 0 else 0.0

    windows = refused_windows(answers, inflicted)
    codes: dict[str, int] = {}
    for answer in answers:
        if "error" in answer:
            codes[answer["error"]] = codes.get(answer["error"], 0) + 1
    return {
        "before_per_s": rate(started, first),
        "during_per_s": rate(first, last),
        "after_per_s": rate(last, ended),
        "refused_p50_s": statistics.median(windows) if windows else 0.0,
        "refused_max_s": max(windows) if windows else 0.0,
        "errors": codes,
    }
