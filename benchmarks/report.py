"""One table of the ledger's figures, each beside its floor measured in the same run.

Run it from the repository root::

    .venv/bin/python benchmarks/report.py [--quick | --full] [--url postgresql://...]

It runs the benchmarks' own measurements (imported from ``ledger_sqlite.py``,
``ledger_postgres.py`` and ``api_replay.py``, nothing re-implemented) and prints one row per
figure: what was measured, its floor, their ratio, the goal and whether it was met.

* **SQLite perform / floor**: ``EffectLedger.perform`` of approved refunds (WAL, synchronous=FULL)
  in operations per second, over the raw ``sqlite3`` floor that makes the same four durable
  commits per operation (admit, claim, the receiver's commit, record) into the same schema.
  Above 1.0 the ledger outruns the floor: a perform needs three commits, not four.
* **SQLite perform CPU / floor**: this process's CPU time per operation, the same two sides:
  what the Python around the transactions costs, the disk's waits left out.
* **SQLite lifecycle / floor**: admit, then ``Executor.execute``, against the same floor.
* **PostgreSQL perform / floor at N workers**: ``EffectLedger.perform`` in N processes against
  plain psycopg writing the same rows in the same tables, N processes too; and the worker
  processes' CPU per operation against the floor's (the server's CPU is not counted).
* **SQLite / PostgreSQL 16 grouped performers / floor**: ``EffectLedger.perform`` from 16
  threads of one process with ``group_commit=on`` against the per-operation floor, one
  operation after another (``group_commit.py``: SQLite's 4-commit floor, PostgreSQL's psycopg
  floor in one process).
* **replay p50**: a repeated perform of a SUCCEEDED operation (the service call and the bare
  executor) against a raw ``sqlite3`` read of the operation's row by key, and the service call
  against the executor's replay.
* **calls per replay**: the Python function calls one repeated ``EffectLedger.perform`` makes,
  counted by cProfile (``api_replay.calls_per_call``): deterministic, whatever the machine.
* **SQLite / PostgreSQL worker, claim batch 1 and 32 / floor**: one worker process dispatching
  approved refunds, claiming one operation per transaction (as before batches) and 32 per
  transaction, against the per-operation 4-commit floor of the same round
  (``worker_batch.py``; the receiver's own count checks one effect per operation).
* **bytes allocated per replay**: tracemalloc's peak above the baseline during one repeated
  ``EffectLedger.perform``, beside the raw read's (``api_replay.allocated``).
* **calls and statements per perform**: a first-time ``EffectLedger.perform``'s Python calls
  (cProfile, the simulated receiver's included) and the statements it sends to the ledger's and
  the receiver's files, beside the 4-commit floor's statements per operation
  (``profile_perform.counts``): deterministic.
* **SQLite perform instructions / floor**: the instructions a first-time perform executes
  against the 4-commit floor's, per operation, counted by valgrind's callgrind
  (``instructions.py``): the CPU goal's twin that does not move with the machine's load; "not
  run" without valgrind.
* **bytes per operation**: SQLite's bytes on disk per operation, every table with its indexes,
  in a history of 100,000 operations built as ``history.py`` builds it
  (``history.bytes_per_operation``).

The machine may be shared: every side is measured in the same run, in alternating blocks or
runs, and each ratio is the best of the rounds (``--quick``: 3 rounds for SQLite, 2 runs per
worker count for PostgreSQL, a few minutes in all; ``--full``: the benchmarks' own defaults).
PostgreSQL rows need ``--url`` or ``$EFFECTLEDGER_BENCH_POSTGRES_URL`` /
``$EFFECTLEDGER_TEST_POSTGRES_URL`` (a database the benchmark may create schemas in); without
one they are reported as not run. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import api_replay
import group_commit
import history
import instructions
import ledger_sqlite
import profile_perform
import worker_batch

SETTINGS = {
    "quick": {
        "sqlite_ops": 300,
        "rounds": 3,
        "pg_ops": 400,
        "repeat": 2,
        "replays": 3000,
        "group_ops": 160,
        "worker_ops": 256,
        "worker_rounds": 1,
        "allocations": 300,
        "history": 100_000,
        "instructions": 100,
    },
    "full": {
        "sqlite_ops": 1000,
        "rounds": 5,
        "pg_ops": 1200,
        "repeat": 3,
        "replays": 5000,
        "group_ops": 480,
        "worker_ops": 1024,
        "worker_rounds": 3,
        "allocations": 1000,
        "history": 100_000,
        "instructions": 400,
    },
}


BATCH = 32
"""The claim batch whose worker figure has a goal (``worker_batch.py``'s default)."""

REPLAY_OVER_EXECUTOR = 1.3
"""A repeated ``EffectLedger.perform`` at most this many times the executor's replay (p50)."""
REPLAY_OVER_RAW = 2.0
"""A repeated ``EffectLedger.perform`` at most this many times a raw point read (p50)."""
REPLAY_BYTES = 4096
"""Bytes a repeated ``EffectLedger.perform`` allocates at peak, at most (tracemalloc)."""
POSTGRES_CPU_OVER_FLOOR = 2.0
"""PostgreSQL client CPU per perform at most this many times the psycopg floor's."""


@dataclass(frozen=True)
class Figure:
    """One row of the table."""

    name: str
    measured: str
    floor: str
    ratio: float | None
    goal: str
    met: bool | None


def _higher(name: str, mine: float, theirs: float, unit: str, goal: float) -> Figure:
    ratio = mine / theirs
    return Figure(
        name, f"{mine:.0f} {unit}", f"{theirs:.0f} {unit}", ratio, f">= {goal}x", ratio >= goal
    )


def _lower(name: str, mine: float, theirs: float, unit: str, goal: float) -> Figure:
    ratio = mine / theirs
    return Figure(
        name, f"{mine:.0f} {unit}", f"{theirs:.0f} {unit}", ratio, f"<= {goal}x", ratio <= goal
    )


def sqlite_figures(ops: int, rounds: int) -> list[Figure]:
    """Perform and lifecycle against the 4-commit floor, throughput and CPU, best round."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-report-"))
    per_round: list[tuple[float, float, float]] = []
    cpu: dict[str, list[float]] = {"lifecycle": [], "perform": [], "floor": []}
    try:
        for round_number in range(1, rounds + 1):
            per_round.append(ledger_sqlite.interleaved_round(folder, round_number, ops, cpu))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    best_perform = max(per_round, key=lambda rates: rates[1] / rates[2])
    best_life = max(per_round, key=lambda rates: rates[0] / rates[2])
    cpu_rounds = list(zip(cpu["perform"], cpu["lifecycle"], cpu["floor"], strict=True))
    perform_cpu = min(cpu_rounds, key=lambda spent: spent[0] / spent[2])
    return [
        _higher("SQLite perform / 4-commit floor", best_perform[1], best_perform[2], "ops/s", 1.0),
        _lower("SQLite perform CPU / floor CPU", perform_cpu[0], perform_cpu[2], "µs/op", 1.5),
        _higher("SQLite lifecycle / 4-commit floor", best_life[0], best_life[2], "ops/s", 0.7),
    ]


def postgres_figures(url: str, ops: int, repeat: int, workers: list[int]) -> list[Figure]:
    """Perform against the psycopg floor at each worker count, throughput and CPU, best run."""
    import ledger_postgres

    figures: list[Figure] = []
    for count in workers:
        runs: list[tuple[float, float, float, float]] = []
        done = ops // count * count
        for _ in range(repeat):  # alternate, so both see the same machine
            floor_rate, floor_cpu, floor_url = ledger_postgres._measure(
                ledger_postgres.floor_worker, url, count, ops
            )
            ledger_postgres._check_and_drop(floor_url, done)
            rate, spent, perform_url = ledger_postgres._measure(
                ledger_postgres.perform_worker, url, count, ops
            )
            ledger_postgres._check_and_drop(perform_url, done)
            runs.append((rate, floor_rate, spent * 1e6, floor_cpu * 1e6))
        best = max(runs, key=lambda run: run[0] / run[1])
        thrifty = min(runs, key=lambda run: run[2] / run[3])
        figures.append(
            _higher(f"PostgreSQL perform / floor, {count} workers", best[0], best[1], "ops/s", 0.8)
        )
        figures.append(
            _lower(
                f"PostgreSQL perform CPU / floor, {count} w.",
                thrifty[2],
                thrifty[3],
                "µs/op",
                POSTGRES_CPU_OVER_FLOOR,
            )
        )
    return figures


def replay_figures(replays: int, rounds: int, allocations: int) -> list[Figure]:
    """Repeated performs of a finished operation against a raw read of its row, best round."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-report-replay-"))
    paths, close = api_replay.build(folder)
    rows: list[dict[str, float]] = []
    try:
        calls = {name: api_replay.calls_per_call(paths[name]) for name in paths}
        for _ in range(rounds):
            rows.append(
                {name: api_replay.latency(call, replays)[0] for name, call in paths.items()}
            )
        allocated = {
            name: api_replay.allocated(paths[name], allocations)
            for name in ("raw point read", "service perform")
        }
    finally:
        close()
        shutil.rmtree(folder, ignore_errors=True)
    figures = []
    best = min(rows, key=lambda row: row["service perform"] / row["raw point read"])
    mine, raw = best["service perform"], best["raw point read"]
    figures.append(
        Figure(
            "replay p50, EffectLedger.perform / raw read",
            f"{mine:.1f} µs",
            f"{raw:.1f} µs",
            mine / raw,
            f"<= {REPLAY_OVER_RAW}x",
            mine / raw <= REPLAY_OVER_RAW,
        )
    )
    best = min(rows, key=lambda row: row["executor replay"] / row["raw point read"])
    mine, raw = best["executor replay"], best["raw point read"]
    figures.append(
        Figure(
            "replay p50, executor / raw read",
            f"{mine:.1f} µs",
            f"{raw:.1f} µs",
            mine / raw,
            "p50 <= 50 µs",
            mine <= ledger_sqlite.REPLAY_P50_TARGET_US,
        )
    )
    best = min(rows, key=lambda row: row["service perform"] / row["executor replay"])
    mine, executor = best["service perform"], best["executor replay"]
    figures.append(
        Figure(
            "replay p50, EffectLedger.perform / executor",
            f"{mine:.1f} µs",
            f"{executor:.1f} µs",
            mine / executor,
            f"<= {REPLAY_OVER_EXECUTOR}x",
            mine / executor <= REPLAY_OVER_EXECUTOR,
        )
    )
    mine = calls["service perform"]
    figures.append(
        Figure(
            "Python calls per replay, EffectLedger.perform",
            f"{mine:.0f} calls",
            f"{calls['executor replay']:.0f} (executor)",
            mine / calls["executor replay"],
            f"<= {api_replay.CALLS_PER_REPLAY_TARGET} calls",
            mine <= api_replay.CALLS_PER_REPLAY_TARGET,
        )
    )
    mine, raw = allocated["service perform"], allocated["raw point read"]
    figures.append(
        Figure(
            "bytes allocated per replay (tracemalloc)",
            f"{mine:.0f} B",
            f"{raw:.0f} B (raw read)",
            mine / raw,
            f"<= {REPLAY_BYTES} B",
            mine <= REPLAY_BYTES,
        )
    )
    return figures


def count_figures() -> list[Figure]:
    """The first-time perform's deterministic counts: Python calls and statements."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-report-counts-"))
    try:
        counts = profile_perform.counts(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    calls, statements = counts["calls per perform"], counts["statements per perform"]
    floor = counts["floor statements"]
    most = floor + profile_perform.STATEMENTS_OVER_FLOOR
    return [
        Figure(
            "Python calls per perform (receiver incl.)",
            f"{calls:.0f} calls",
            "-",
            None,
            f"<= {profile_perform.CALLS_PER_PERFORM_TARGET} calls",
            calls <= profile_perform.CALLS_PER_PERFORM_TARGET,
        ),
        Figure(
            "statements per perform / 4-commit floor",
            f"{statements:.0f}",
            f"{floor:.0f}",
            statements / floor,
            f"<= floor + {profile_perform.STATEMENTS_OVER_FLOOR}",
            statements <= most,
        ),
    ]


def bytes_figure(size: int) -> Figure:
    """Bytes on disk per operation on SQLite, in a history of ``size`` operations."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-report-bytes-"))
    try:
        tables = history.bytes_per_operation(folder, size)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    total = sum(tables.values())
    return Figure(
        f"SQLite bytes per operation at {size:,}",
        f"{total:.0f} B",
        "-",
        None,
        f"<= {history.BYTES_PER_OPERATION_TARGET} B",
        total <= history.BYTES_PER_OPERATION_TARGET,
    )


def instruction_figure(operations: int) -> Figure:
    """A first-time perform's instructions against the 4-commit floor's (callgrind)."""
    name = "SQLite perform instructions / floor"
    missing = instructions.available()
    if missing is not None:
        return Figure(name, "not run", missing, None, f"<= {instructions.TARGET}x", None)
    sides = instructions.measure(operations)
    mine, theirs = sides["perform"].total, sides["floor"].total
    return Figure(
        name,
        f"{mine / 1e6:.2f} M/op",
        f"{theirs / 1e6:.2f} M/op",
        mine / theirs,
        f"<= {instructions.TARGET}x",
        mine / theirs <= instructions.TARGET,
    )


def group_figures(backend: str, url: str | None, ops: int, rounds: int) -> Figure:
    """16 performers in one process, group commit on, against the per-operation floor."""
    name = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[backend]
    runs = group_commit.measure(backend, "1x16", ops, rounds, url)
    best = max(runs, key=lambda rates: rates["on"] / rates["floor"])
    return _higher(
        f"{name} 16 grouped performers / floor",
        best["on"],
        best["floor"],
        "ops/s",
        group_commit.TARGET,
    )


def worker_figures(backend: str, url: str | None, ops: int, rounds: int) -> list[Figure]:
    """One worker process, claim batch 1 and 32, against the 4-commit floor, best round."""
    name = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[backend]
    runs = worker_batch.measure(backend, ops, rounds, BATCH, url)
    figures = []
    for claim_batch, goal in ((1, None), (BATCH, worker_batch.TARGET)):
        path = f"batch {claim_batch}"
        best = max(runs, key=lambda found: found[path].rate / found["floor"].rate)
        mine, floor = best[path].rate, best["floor"].rate
        figures.append(
            Figure(
                f"{name} worker, claim batch {claim_batch} / floor",
                f"{mine:.0f} ops/s",
                f"{floor:.0f} ops/s",
                mine / floor,
                "-" if goal is None else f">= {goal}x",
                None if goal is None else mine / floor >= goal,
            )
        )
    return figures


def table(figures: list[Figure]) -> str:
    """The figures as one aligned text table."""
    head = ("figure", "measured", "floor", "ratio", "goal", "met?")
    lines = [
        (
            figure.name,
            figure.measured,
            figure.floor,
            "-" if figure.ratio is None else f"{figure.ratio:.2f}x",
            figure.goal,
            "-" if figure.met is None else ("yes" if figure.met else "NO"),
        )
        for figure in figures
    ]
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]
    out = []
    for row in [head, tuple("-" * width for width in widths), *lines]:
        out.append(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return "\n".join(line.rstrip() for line in out)


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="short runs, a few minutes (default)")
    size.add_argument("--full", action="store_true", help="the benchmarks' own run lengths")
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "EFFECTLEDGER_BENCH_POSTGRES_URL", os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL")
        ),
        help="a PostgreSQL database the benchmark may create schemas in",
    )
    parser.add_argument("--workers", default="1,4,8", help="PostgreSQL worker process counts")
    args = parser.parse_args(argv)
    chosen = SETTINGS["full" if args.full else "quick"]
    sys.stderr.write("SQLite perform, lifecycle and floor\n")
    figures = sqlite_figures(chosen["sqlite_ops"], chosen["rounds"])
    sys.stderr.write("replays\n")
    figures += replay_figures(chosen["replays"], chosen["rounds"], chosen["allocations"])
    sys.stderr.write("calls and statements per perform\n")
    figures += count_figures()
    sys.stderr.write("instructions per perform and per floor operation (callgrind)\n")
    figures.append(instruction_figure(chosen["instructions"]))
    sys.stderr.write("bytes per operation\n")
    figures.append(bytes_figure(chosen["history"]))
    sys.stderr.write("group commit, 16 performers\n")
    figures.append(group_figures("sqlite", None, chosen["group_ops"], chosen["rounds"]))
    sys.stderr.write("one worker process claiming in batches\n")
    figures += worker_figures("sqlite", None, chosen["worker_ops"], chosen["worker_rounds"])
    workers = [int(part) for part in args.workers.split(",")]
    if args.url:
        figures += worker_figures(
            "postgres", args.url, chosen["worker_ops"], chosen["worker_rounds"]
        )
        figures.append(group_figures("postgres", args.url, chosen["group_ops"], chosen["repeat"]))
        sys.stderr.write("PostgreSQL perform and floor\n")
        figures += postgres_figures(args.url, chosen["pg_ops"], chosen["repeat"], workers)
    else:
        figures += [
            Figure(f"PostgreSQL perform / floor, {count} workers", "not run", "-", None,
                   ">= 0.8x", None)
            for count in workers
        ]  # fmt: skip
        figures.append(
            Figure(
                "PostgreSQL 16 grouped performers / floor", "not run", "-", None, ">= 2.0x", None
            )
        )
        figures.append(
            Figure(
                f"PostgreSQL worker, claim batch {BATCH} / floor",
                "not run",
                "-",
                None,
                f">= {worker_batch.TARGET}x",
                None,
            )
        )
    print(
        f"effectledger figures, {'full' if args.full else 'quick'} run, {os.cpu_count()} CPUs: "
        f"each ratio is the best of {chosen['rounds']} SQLite rounds / {chosen['repeat']} "
        f"PostgreSQL runs ({chosen['worker_rounds']} for the worker rows), floor measured in the "
        "same run"
    )
    print(table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
