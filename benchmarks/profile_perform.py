"""Where the CPU of ``EffectLedger.perform`` goes: a cProfile of performs on SQLite.

Run it from the repository root::

    .venv/bin/python benchmarks/profile_perform.py [--performs N] [--top N] [--synchronous OFF]

Approved refunds are proposed and approved first (not profiled), then ``--performs`` of them are
performed once each under cProfile, with the ledger and the simulated receiver on files at
``synchronous=OFF`` by default, so the disk's flushes do not hide the Python. It prints the CPU
time per perform without the profiler (measured first, on its own performs) beside the CPU per
operation of the floor of ``benchmarks/ledger_sqlite.py`` (the same four commits in raw
``sqlite3``, at the same ``synchronous``) and their ratio; the time each statement takes in the
driver's ``execute``, per perform and per floor operation, side by side; the statements each
perform sends to the ledger's file; and the ``--top`` functions by their own time, grouped into
hashing, canonical encoding, validation, statements (the driver) and the rest.

With ``--counts`` it prints instead the figures that do not depend on the machine (``counts``):
Python calls per perform, statements per perform and the floor's statements per operation
(``tests/acceptance/test_benchmarks.py`` asserts them).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from effectledger import Context, DestinationRef, EffectLedger, OperationState, SimulatedReceiver
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from ledger_sqlite import Floor  # the floor of the benchmark this profile explains

AGENT = Context(tenant_id="acme", actor_id="alice")
APPROVER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
GROUPS = (
    ("hashing", ("openssl_sha256", "hexdigest", "hash_of_entry", "digest_bytes", "leaf_of")),
    ("canonical encoding", ("canonical.py", "encoder.py", "record.py", "chain.py")),
    ("validation", ("validate", "refuse_unstorable", "integrity.py", "__post_init__")),
    ("statements", ("sqlite3.", "'execute'", "fetchone", "fetchall", "store/sqlite.py")),
)


class Bench:
    """A service with one registered refund action: the ledger at ``url``, a receiver file."""

    def __init__(self, url: str, receiver: Path, synchronous: str) -> None:
        self.store = open_store(url)
        self.receiver = SimulatedReceiver(receiver, synchronous=synchronous)
        destination = DestinationRef(
            account_id=self.receiver.account_id, endpoint=self.receiver.endpoint
        )
        self.service = EffectLedger(Ledger(self.store), destinations=[self.receiver])
        self.service.register(
            refund_action(orders=OrderBook(), destination=destination), self.receiver
        )
        self.made = 0

    def approved(self, count: int) -> list[tuple[str, str]]:
        """``count`` proposals approved and ready to perform."""
        ready = []
        for _ in range(count):
            self.made += 1
            arguments = {"order_id": f"ord-{self.made}", "amount_minor": 30, "currency": "EUR"}
            proposal = self.service.propose(AGENT, "refund_order", arguments)
            approval = self.service.approve(APPROVER, proposal.proposal_id, digest=proposal.digest)
            ready.append((proposal.proposal_id, approval.approval_id))
        return ready

    def perform(self, ready: list[tuple[str, str]]) -> None:
        """Perform each of ``ready`` once; stop at one that does not succeed."""
        for proposal_id, approval_id in ready:
            result = self.service.perform(AGENT, proposal_id, approval=approval_id)
            if result.state is not OperationState.SUCCEEDED:  # pragma: no cover - a broken run
                raise SystemExit(f"perform of {proposal_id} ended {result.state}")

    def close(self) -> None:
        """Close both files."""
        self.store.close()
        self.receiver.close()


Timings = collections.defaultdict[str, list[int]]


class Timed:
    """A connection whose ``execute`` adds each statement's CPU time to ``timings``, by its text."""

    def __init__(self, connection: sqlite3.Connection, timings: Timings, file: str) -> None:
        self.__dict__.update(_real=connection, _timings=timings, _file=file)

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        """Run ``sql`` on the real connection, timed."""
        started = time.thread_time_ns()  # CPU, not wall: a busy machine's waits are left out
        cursor = self._real.execute(sql, params)
        words = sql.partition("=")[0] if sql.startswith("PRAGMA") else sql  # one line a PRAGMA
        entry = self._timings[f"{self._file} {' '.join(words.split()[:4])[:44]}"]
        entry[0] += 1
        entry[1] += time.thread_time_ns() - started
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)


def floor_cpu(folder: Path, synchronous: str, count: int) -> tuple[float, Timings]:
    """The floor's CPU per operation (µs) and its statements' times, both on their own runs."""
    floor = Floor(folder, 0, 2 * count + 200)
    try:
        for connection in (floor.ledger, floor.receiver):
            connection.execute(f"PRAGMA synchronous = {synchronous}")
        floor.run(range(200))  # warm up
        started = time.process_time()
        floor.run(range(200, 200 + count))
        used_us = (time.process_time() - started) / count * 1e6
        timings: Timings = collections.defaultdict(lambda: [0, 0])
        floor.ledger = Timed(floor.ledger, timings, "ledger")  # type: ignore[assignment]
        floor.receiver = Timed(floor.receiver, timings, "receiver")  # type: ignore[assignment]
        floor.run(range(200 + count, 200 + 2 * count))
    finally:
        floor.close()
    return used_us, timings


def perform_timings(bench: Bench, count: int) -> Timings:
    """The time each statement of ``count`` performs takes in ``execute``, by file and text."""
    timings: Timings = collections.defaultdict(lambda: [0, 0])
    ready = bench.approved(count)
    store = bench.store
    receiver = bench.receiver._connect()
    with store._leased():  # type: ignore[attr-defined]  # every perform here runs on it
        entry = store._pool._held.entry  # type: ignore[attr-defined]
        ledger = entry.connection
        entry.connection = Timed(ledger, timings, "ledger")
        bench.receiver._local.connection = Timed(receiver, timings, "receiver")
        try:
            bench.perform(ready)
        finally:
            entry.connection = ledger
            bench.receiver._local.connection = receiver
    return timings


def print_timings(title: str, timings: Timings, count: int) -> None:
    """Each statement's count and time per operation, the costliest first."""
    total = sum(spent for _, spent in timings.values())
    number = sum(times for times, _ in timings.values())
    print(f"  {title}: {number / count:.0f} statements, {total / count / 1000:.0f} µs in execute")
    for text, (times, spent) in sorted(timings.items(), key=lambda item: -item[1][1]):
        print(
            f"    {spent / count / 1000:6.1f} µs  {times / count:3.0f} x "
            f"{spent / times / 1000:5.1f} µs  {text}"
        )


def group_of(where: str) -> str:
    """The group a profiled function's location falls into."""
    for name, marks in GROUPS:
        if any(mark in where for mark in marks):
            return name
    return "the rest (control flow, rows, telemetry)"


def statements_of_one(bench: Bench) -> list[str]:
    """The statements one perform sends to the ledger's file, first words only."""
    seen: list[str] = []
    ready = bench.approved(1)
    connection: sqlite3.Connection
    with bench.store._leased() as connection:  # type: ignore[attr-defined]
        connection.set_trace_callback(seen.append)
        try:
            bench.perform(ready)
        finally:
            connection.set_trace_callback(None)
    # A statement that fires triggers is reported again for each of them: count it once.
    unique = [text for i, text in enumerate(seen) if i == 0 or text != seen[i - 1]]
    return [" ".join(text.split()[:4]) for text in unique]


CALLS_PER_PERFORM_TARGET = 500
"""Python calls per first-time perform, the simulated receiver's included (issue 31's target)."""
STATEMENTS_OVER_FLOOR = 2
"""Statements per perform at most this many more than the floor's per operation (issue 31)."""


def _traced(connections: list[sqlite3.Connection], run: Any) -> int:
    """Statements ``run()`` sends to ``connections``, each counted once (a statement that fires
    triggers is reported again for each of them)."""
    seen: list[str] = []
    for connection in connections:
        connection.set_trace_callback(seen.append)
    try:
        run()
    finally:
        for connection in connections:
            connection.set_trace_callback(None)
    return len([text for i, text in enumerate(seen) if i == 0 or text != seen[i - 1]])


def counts(folder: Path, performs: int = 200) -> dict[str, float]:
    """The deterministic figures of a first-time perform, whatever the machine.

    ``calls per perform``: Python function calls per ``EffectLedger.perform`` of an approved
    refund as cProfile counts them (builtins and the simulated receiver included);
    ``statements per perform``: the statements one perform sends to the ledger's and the
    receiver's files; ``floor statements``: the same for one operation of the 4-commit floor.
    """
    bench = Bench(
        f"sqlite:///{folder / 'counts.db'}?synchronous=OFF", folder / "counts-r.db", "OFF"
    )
    try:
        bench.perform(bench.approved(50))  # warm up: caches filled on first use are full
        ready = bench.approved(performs)
        profile = cProfile.Profile()
        profile.enable()
        bench.perform(ready)
        profile.disable()
        calls = (pstats.Stats(profile).total_calls - 2) / performs  # less perform() and disable
        one = bench.approved(1)
        with bench.store._leased() as ledger:  # type: ignore[attr-defined]
            statements = _traced([ledger, bench.receiver._connect()], lambda: bench.perform(one))
    finally:
        bench.close()
    floor = Floor(folder, 0, 60)
    try:
        floor.run(range(50))
        floor_statements = _traced([floor.ledger, floor.receiver], lambda: floor.run(range(50, 60)))
    finally:
        floor.close()
    return {
        "calls per perform": calls,
        "statements per perform": statements,
        "floor statements": floor_statements / 10,
    }


def main(argv: list[str] | None = None) -> int:
    """Profile the performs and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--performs", type=int, default=2000, help="profiled performs (2000)")
    parser.add_argument("--top", type=int, default=25, help="functions listed (25)")
    parser.add_argument("--synchronous", default="OFF", help="PRAGMA synchronous (OFF)")
    parser.add_argument(
        "--counts",
        action="store_true",
        help="print only the deterministic counts (calls, statements) per perform",
    )
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="effectledger-profile-"))
    if args.counts:
        try:
            for name, figure in counts(folder).items():
                print(f"{name}: {figure:.1f}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return 0
    try:
        sync = args.synchronous
        bench = Bench(
            f"sqlite:///{folder / 'ledger.db'}?synchronous={sync}", folder / "receiver.db", sync
        )
        bench.perform(bench.approved(200))  # warm up
        ready = bench.approved(args.performs)
        started = time.process_time()
        bench.perform(ready)
        plain_us = (time.process_time() - started) / args.performs * 1e6
        statements = statements_of_one(bench)
        timings = perform_timings(bench, args.performs)
        floor_us, floor_timings = floor_cpu(folder, args.synchronous, args.performs)
        ready = bench.approved(args.performs)
        profile = cProfile.Profile()
        profile.enable()
        bench.perform(ready)
        profile.disable()
        bench.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"EffectLedger.perform on SQLite, synchronous={args.synchronous}, {args.performs} performs"
    )
    print(f"CPU per perform without the profiler: {plain_us:.0f} µs")
    print(
        f"CPU per operation of the 4-commit floor (raw sqlite3, same synchronous): "
        f"{floor_us:.0f} µs; perform / floor {plain_us / floor_us:.2f} x"
    )
    print("CPU time in the driver's execute, by statement (one perform; one floor operation)")
    print_timings("perform", timings, args.performs)
    print_timings("floor", floor_timings, args.performs)
    print(f"statements per perform on the ledger's file: {len(statements)}")
    for text in statements:
        print(f"  {text}")
    stats = pstats.Stats(profile)
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in rows.values())
    groups: dict[str, float] = {}
    for (filename, line, name), row in rows.items():
        where = f"{filename}:{line}({name})"
        groups[group_of(where)] = groups.get(group_of(where), 0.0) + row[2]
    print("own time by group (profiled; the profiler inflates small Python functions)")
    for name, seconds in sorted(groups.items(), key=lambda item: -item[1]):
        print(f"  {name:<42} {seconds / total:6.1%}   {seconds / args.performs * 1e6:6.0f} µs")
    print(f"top {args.top} functions by own time")
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
