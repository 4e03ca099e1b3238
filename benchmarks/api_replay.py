"""Benchmark a repeated ``perform`` through the one-object API against the paths beneath it.

Run it from the repository root::

    .venv/bin/python benchmarks/api_replay.py [--dir DIR] [--replays N] [--rounds N] [--calls]

One operation is proposed, approved and performed (SUCCEEDED) through
:func:`effectledger.connect`, on a SQLite file with the default pragmas. Then, in each of
``--rounds`` rounds, these are measured one after the other, so drift slows all alike:

* ``raw point read``: the operation row read by primary key with plain ``sqlite3`` on a
  connection of its own, same file: the database's own floor;
* ``executor replay``: ``Executor.execute`` (no dispatch guard) on the finished operation;
* ``service perform``: ``EffectLedger.perform`` with the proposal and approval ids;
* ``facade perform``: ``EffectLedger.perform(agent, proposal)``, the call the README shows
  (it also finds the approval on the record's behalf).

It prints, per path, the median over rounds of the p50 and p99 latency (µs) and of the bytes
tracemalloc sees allocated at peak per call, and the facade's p50 as a multiple of the
executor's and of the raw read. Progress goes to stderr.

With ``--calls`` it prints instead, per path, the Python function calls one call makes as
cProfile counts them (builtins included, the path's own function not): a figure that does not
depend on the machine (``tests/acceptance/test_benchmarks.py`` asserts it). Run it in a
process that has set no OpenTelemetry provider, as a benchmark is: with one, every perform
also records its span and counters.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import platform
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from allocation import peak_bytes_per_call
from pydantic import BaseModel

from effectledger import (
    Context,
    EffectOutcome,
    OperationState,
    SimulatedReceiver,
    connect,
)
from effectledger.workers import Executor

AGENT = Context(tenant_id="acme", actor_id="agent-7")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))


class Refund(BaseModel):
    """The benchmark action's arguments."""

    order_id: str
    amount_minor: int
    currency: str


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def latency(call: Callable[[], object], count: int) -> tuple[float, float]:
    """p50 and p99 in µs of ``count`` timed calls, after a warm-up."""
    for _ in range(min(500, count)):
        call()
    gc.collect()
    samples: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(count):
        started = clock()
        call()
        samples.append((clock() - started) / 1000)
    samples.sort()
    return percentile(samples, 0.50), percentile(samples, 0.99)


CALLS_PER_REPLAY_TARGET = 40
"""Python function calls per repeated ``EffectLedger.perform`` at most (issue 31's target)."""


def calls_per_call(call: Callable[[], object], count: int = 200) -> float:
    """Python function calls (cProfile's count, builtins included) made per ``call()``.

    The calls of ``call`` itself are not counted (it is the benchmark's wrapper), nor the
    profiler's own ``disable``. A warm-up comes first, so caches filled on first use are full.
    """
    for _ in range(20):
        call()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(count):
        call()
    profile.disable()
    stats = pstats.Stats(profile)
    return (stats.total_calls - count - 1) / count


def allocated(call: Callable[[], object], count: int) -> float:
    """Mean bytes allocated at peak above the baseline per call, after a warm-up."""
    for _ in range(50):
        call()
    return peak_bytes_per_call(call, count)


def build(folder: Path) -> tuple[dict[str, Callable[[], object]], Callable[[], None]]:
    """The four replay paths over one SUCCEEDED operation, and a function that closes them."""
    receiver = SimulatedReceiver(folder / "receiver.db")
    app = connect(f"sqlite:///{folder / 'ledger.db'}")
    refund = app.action(name="refund", contract="refund-v1", arguments=Refund, destination=receiver)
    proposal = app.propose(AGENT, refund, order_id="ord-1", amount_minor=30, currency="EUR")
    approval = app.approve(RITA, proposal)
    first = app.perform(AGENT, proposal)
    if first.state is not OperationState.SUCCEEDED:  # pragma: no cover - a broken run
        raise SystemExit(f"the operation ended {first.state}")
    executor = Executor(app.ledger, receiver)
    raw = sqlite3.connect(folder / "ledger.db", isolation_level=None)
    key = (AGENT.tenant_id, proposal.operation_id)

    def raw_read() -> object:
        return raw.execute(
            "SELECT * FROM operations WHERE tenant_id = ? AND operation_id = ?", key
        ).fetchone()

    def executor_replay() -> object:
        return executor.execute(AGENT, proposal.operation_id)

    def service_perform() -> object:
        return app.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)

    def facade_perform() -> object:
        result = app.perform(AGENT, proposal)
        if result.outcome is not EffectOutcome.REPLAYED:  # pragma: no cover - a broken run
            raise SystemExit(f"a replay came back {result.outcome}")
        return result

    def close() -> None:
        raw.close()
        app.close()
        receiver.close()

    paths: dict[str, Callable[[], object]] = {
        "raw point read": raw_read,
        "executor replay": executor_replay,
        "service perform": service_perform,
        "facade perform": facade_perform,
    }
    return paths, close


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="folder for the files (default: a new one)")
    parser.add_argument("--replays", type=int, default=5000, help="timed calls per path/round")
    parser.add_argument("--allocations", type=int, default=500, help="traced calls per path/round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--calls", action="store_true", help="print Python calls per call of each path instead"
    )
    args = parser.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="effectledger-api-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths, close = build(folder)
    if args.calls:
        try:
            for name, call in paths.items():
                print(f"{name}: {calls_per_call(call):.1f} calls")
        finally:
            close()
            if args.dir is None:
                shutil.rmtree(folder, ignore_errors=True)
        return 0
    p50s: dict[str, list[float]] = {name: [] for name in paths}
    p99s: dict[str, list[float]] = {name: [] for name in paths}
    allocations: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for round_number in range(1, args.rounds + 1):
            sys.stderr.write(f"  round {round_number}/{args.rounds}\n")
            for name, call in paths.items():
                p50, p99 = latency(call, args.replays)
                p50s[name].append(p50)
                p99s[name].append(p99)
            for name, call in paths.items():
                allocations[name].append(allocated(call, args.allocations))
    finally:
        close()
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"Repeated perform of a SUCCEEDED operation, SQLite {sqlite3.sqlite_version}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs; median of {args.rounds} "
        f"interleaved rounds, {args.replays} timed calls each"
    )
    print(f"{'path':<18}{'p50 µs':>10}{'p99 µs':>10}{'bytes/call':>12}")
    medians = {name: statistics.median(values) for name, values in p50s.items()}
    for name in paths:
        print(
            f"{name:<18}{medians[name]:>10.1f}{statistics.median(p99s[name]):>10.1f}"
            f"{statistics.median(allocations[name]):>12.0f}"
        )
    facade = medians["facade perform"]
    print(
        f"facade perform p50 = {facade / medians['executor replay']:.1f}x the executor replay, "
        f"{facade / medians['raw point read']:.1f}x the raw point read"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
