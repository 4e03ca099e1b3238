"""Benchmark the SQLite ledger against the raw sqlite3 floor measured in the same run.

Run it from the repository root::

    .venv/bin/python benchmarks/ledger_sqlite.py [--dir DIR] [--ops N] [--replays N] [--rounds N]

It prints:

* replay latency (p50/p99, µs): ``Executor.execute`` on an operation that already SUCCEEDED, and
  the same through the model-facing ``DispatchTool``;
* bytes allocated per replay: tracemalloc's peak above the baseline during each replay, averaged
  over N replays, and what stays allocated afterwards (N replays, divided);
* lifecycle throughput (operations/s): admit -> claim -> submit -> record through the real
  ledger, executor and simulated receiver, on files with WAL and the default synchronous=FULL;
* the same through ``EffectLedger.perform`` of an approved refund (its admission and claim
  share one transaction), proposals and approvals made outside the timed blocks;
* the CPU time of this process per operation for each of the three, beside the floor's (what
  the Python around the transactions costs, without the disk's waits);
* the floor: the same four durable transactions per operation (admit, claim, the receiver's own
  commit, record) writing rows of the same shape (effectledger's own schema, random ids like
  its own) with plain ``sqlite3``, the same pragmas and ``BEGIN IMMEDIATE``, on files in the
  same folder; and the ratio of the two.

In each of ``--rounds`` rounds, lifecycle and floor alternate in blocks of 50 operations, so a
disk whose speed drifts slows both alike; the median of the per-round ratios is reported.
Targets: replay p50 <= 50 µs, lifecycle >= 0.7 x floor. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from effectledger import (
    Command,
    Context,
    DestinationRef,
    DispatchResult,
    EffectLedger,
    OperationState,
    SimulatedReceiver,
)
from effectledger.callers.tools.dispatch import DispatchTool
from effectledger.events.authentication import TrailKey, TrailKeys, new_trail_key
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger, LedgerSettings
from effectledger.sql import schema
from effectledger.store import open_store
from effectledger.workers import Executor

REPLAY_P50_TARGET_US = 50.0
LIFECYCLE_RATIO_TARGET = 0.7
PERFORM_RATIO_TARGET = 1.0
BLOCK = 50  # operations per alternating block of lifecycle and floor
CONTEXT = Context(tenant_id="acme", actor_id="alice")
APPROVER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
COMMAND = Command(
    action="send_support_reply",
    contract_version="reply-v1",
    arguments={"recipient": "customer@example.com", "body": "Your refund is on its way."},
)


class Progress:
    """A one-line progress indication on stderr for the longer phases."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.tty = sys.stderr.isatty()
        self.step = max(1, total // 4)

    def update(self, done: int) -> None:
        """Report ``done`` of ``total``: in place on a terminal, every quarter otherwise."""
        if self.tty and (done % max(1, self.total // 100) == 0 or done == self.total):
            sys.stderr.write(f"\r  {self.label}: {done}/{self.total}")
            if done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif not self.tty and (done % self.step == 0 or done == self.total):
            sys.stderr.write(f"  {self.label}: {done}/{self.total}\n")
            sys.stderr.flush()


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


@dataclass(frozen=True)
class Latency:
    """Per-call latency of a replay path."""

    p50_us: float
    p99_us: float
    mean_us: float


def measure_latency(call: Callable[[], object], count: int, label: str) -> Latency:
    """Time ``count`` calls one by one (after a warm-up) and summarise them in µs."""
    for _ in range(min(1000, count)):
        call()
    progress = Progress(label, count)
    samples: list[float] = []
    clock = time.perf_counter_ns
    gc.collect()
    for done in range(1, count + 1):
        started = clock()
        call()
        samples.append((clock() - started) / 1000)
        if done % 1000 == 0 or done == count:
            progress.update(done)
    samples.sort()
    return Latency(
        p50_us=percentile(samples, 0.50),
        p99_us=percentile(samples, 0.99),
        mean_us=statistics.fmean(samples),
    )


@dataclass(frozen=True)
class Allocation:
    """tracemalloc's view of one replay path."""

    peak_bytes_per_call: float
    retained_bytes_per_call: float


def measure_allocation(call: Callable[[], object], count: int) -> Allocation:
    """Mean peak above baseline per call, and bytes still held after ``count`` calls / count."""
    for _ in range(100):
        call()
    gc.collect()
    tracemalloc.start()
    try:
        start_current, _ = tracemalloc.get_traced_memory()
        peaks = 0
        for _ in range(count):
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            call()
            _, peak = tracemalloc.get_traced_memory()
            peaks += peak - before
        gc.collect()
        end_current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return Allocation(
        peak_bytes_per_call=peaks / count,
        retained_bytes_per_call=max(0, end_current - start_current) / count,
    )


class Lifecycle:
    """admit -> execute (claim, submit, record) through effectledger, on its own two files."""

    def __init__(self, folder: Path, round_number: int) -> None:
        self.store = open_store(f"sqlite:///{folder / f'ledger-{round_number}.db'}")
        self.receiver = SimulatedReceiver(folder / f"receiver-{round_number}.db")  # FULL
        self.ledger = Ledger(self.store)
        self.executor = Executor(self.ledger, self.receiver)
        self.destination = DestinationRef(
            account_id=self.receiver.account_id, endpoint=self.receiver.endpoint
        )

    def run(self, numbers: range) -> None:
        """Take operations ``numbers`` through their whole lifecycle."""
        for number in numbers:
            operation_id = f"op-{number}"
            self.ledger.admit(
                CONTEXT,
                operation_id=operation_id,
                revision="rev-1",
                command=COMMAND,
                destination=self.destination,
                admission_reference=f"approval/{operation_id}",
            )
            result = self.executor.execute(CONTEXT, operation_id)
            if result.state is not OperationState.SUCCEEDED:  # pragma: no cover - a broken run
                raise SystemExit(f"{operation_id} ended {result.state}")

    def close(self) -> None:
        """Close both files."""
        self.store.close()
        self.receiver.close()


class PerformLifecycle:
    """``EffectLedger.perform`` of approved refunds: admit and claim in one transaction, submit,
    record. Proposals and approvals are made before each timed block (:meth:`prepare`)."""

    def __init__(self, folder: Path, round_number: int) -> None:
        self.store = open_store(f"sqlite:///{folder / f'perform-{round_number}.db'}")
        self.receiver = SimulatedReceiver(folder / f"perform-receiver-{round_number}.db")
        destination = DestinationRef(
            account_id=self.receiver.account_id, endpoint=self.receiver.endpoint
        )
        action = refund_action(orders=OrderBook(), destination=destination)
        # A trail key, as every ledger that migrate or connect() makes holds one by default.
        keys = TrailKeys(TrailKey.from_key_string(new_trail_key()))
        ledger = Ledger(self.store, settings=LedgerSettings(trail_keys=keys))
        self.service = EffectLedger(ledger, destinations=[self.receiver])
        self.service.register(action, self.receiver)
        self.ready: dict[int, tuple[str, str]] = {}

    def prepare(self, numbers: range) -> None:
        """Propose and approve the refunds of ``numbers`` (not timed)."""
        for number in numbers:
            arguments = {"order_id": f"ord-{number}", "amount_minor": 30, "currency": "EUR"}
            proposal = self.service.propose(CONTEXT, "refund_order", arguments)
            approval = self.service.approve(APPROVER, proposal.proposal_id, digest=proposal.digest)
            self.ready[number] = (proposal.proposal_id, approval.approval_id)

    def run(self, numbers: range) -> None:
        """Perform each prepared refund once."""
        for number in numbers:
            proposal_id, approval_id = self.ready.pop(number)
            result = self.service.perform(CONTEXT, proposal_id, approval=approval_id)
            if result.state is not OperationState.SUCCEEDED:  # pragma: no cover - a broken run
                raise SystemExit(f"perform {number} ended {result.state}")

    def close(self) -> None:
        """Close both files."""
        self.store.close()
        self.receiver.close()


RECEIVER_FLOOR_SCHEMA = """
CREATE TABLE effects (
    idempotency_key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, command_json TEXT NOT NULL,
    provider_reference TEXT NOT NULL, created_ns INTEGER NOT NULL
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO counters VALUES ('submissions', 0), ('lookups', 0), ('conflicts', 0);
"""
HASH = "ab" * 32
COMMAND_JSON = (
    '{"action":"send_support_reply","arguments":{"body":"Your refund is on its way.",'
    '"recipient":"customer@example.com"},"contract_version":"reply-v1"}'
)
EVENT_SQL = (
    "INSERT INTO audit_events (event_id, tenant_id, operation_id, attempt_id, sequence, actor,"
    " event_type, recorded_us, evidence_reference, details_json, observation_id, prev_hash,"
    " event_hash) VALUES (?, 'acme', ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)"
)


def _open_raw(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA busy_timeout = 5000")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


class Floor:
    """The same four durable transactions per operation, written with plain sqlite3.

    The ledger file gets effectledger's own schema (same keys, indexes, foreign keys and
    triggers), so the rows, index updates and constraint checks match; only the Python around
    them is missing.
    """

    def __init__(self, folder: Path, round_number: int, ops: int) -> None:
        self.ledger = _open_raw(folder / f"floor-ledger-{round_number}.db")
        self.receiver = _open_raw(folder / f"floor-receiver-{round_number}.db")
        self.ledger.executescript(schema("sqlite"))
        self.receiver.executescript(RECEIVER_FLOOR_SCHEMA)
        # Random ids like the ledger's (uuid4 hex): sequential keys would append to the B-trees
        # and flatter the floor. They are drawn before any clock starts.
        self.ids = [[os.urandom(16).hex() for _ in range(5)] for _ in range(ops)]

    def close(self) -> None:
        """Close both files."""
        self.ledger.close()
        self.receiver.close()

    def run(self, numbers: range) -> None:
        """Write operations ``numbers``: admit, claim, the receiver's commit, record."""
        ledger, receiver, key, ids = self.ledger, self.receiver, ("acme",), self.ids
        for number in numbers:
            op = f"op-{number}"
            attempt, idem, event_1, event_2, event_3 = ids[number]
            idem = f"el-{idem}"
            receipt = f"rcpt-{event_3[:20]}"
            now = 1_767_225_600_000_000 + number
            # admit: the existence check, the operation row and its event
            ledger.execute("BEGIN IMMEDIATE")
            ledger.execute(
                "SELECT * FROM operations WHERE tenant_id = ? AND operation_id = ?", (*key, op)
            ).fetchone()
            ledger.execute(
                "INSERT INTO operations (tenant_id, operation_id, requester_id, revision, action,"
                " contract_version, command_json, fingerprint, admission_reference,"
                " destination_account, destination_endpoint, idempotency_key, state, version,"
                " created_us, updated_us, last_event_hash) VALUES (?, ?, 'alice', 'rev-1',"
                " 'send_support_reply', 'reply-v1', ?, ?, ?, 'acct-demo',"
                " 'https://receiver.invalid/v1/effects', ?, 'READY', 1, ?, ?, ?)"
                " ON CONFLICT (tenant_id, operation_id) DO NOTHING",
                (*key, op, COMMAND_JSON, HASH, f"approval/{op}", idem, now, now, HASH),
            )
            ledger.execute(
                EVENT_SQL,
                (event_1, op, None, 1, "alice", "OperationAdmitted", now,
                 f"approval/{op}", '{"fingerprint":"' + HASH + '","revision":"rev-1"}',
                 "0" * 64, HASH),
            )  # fmt: skip
            ledger.execute("COMMIT")
            # claim: read, attempt row, conditional state update, event
            ledger.execute("BEGIN IMMEDIATE")
            ledger.execute(
                "SELECT * FROM operations WHERE tenant_id = ? AND operation_id = ?", (*key, op)
            ).fetchone()
            ledger.execute(
                "INSERT INTO attempts (tenant_id, operation_id, attempt_id, executor_id,"
                " destination_account, destination_endpoint, idempotency_key, prepared_us,"
                " recover_after_us) VALUES (?, ?, ?, 'dispatch-worker', 'acct-demo',"
                " 'https://receiver.invalid/v1/effects', ?, ?, ?)",
                (*key, op, attempt, idem, now, now + 30_000_000),
            )
            ledger.execute(
                "UPDATE operations SET state = 'IN_PROGRESS', active_attempt_id = ?, version = 2,"
                " last_event_hash = ?, updated_us = ?"
                " WHERE tenant_id = ? AND operation_id = ? AND version = 1",
                (attempt, HASH, now, *key, op),
            )
            ledger.execute(
                EVENT_SQL,
                (event_2, op, attempt, 2, "dispatch-worker", "AttemptPrepared", now,
                 None, "{}", HASH, HASH),
            )  # fmt: skip
            ledger.execute("COMMIT")
            # the receiver's own commit: count, check, perform
            receiver.execute("BEGIN IMMEDIATE")
            receiver.execute("UPDATE counters SET value = value + 1 WHERE name = 'submissions'")
            receiver.execute(
                "SELECT fingerprint, provider_reference FROM effects WHERE idempotency_key = ?",
                (idem,),
            ).fetchone()
            receiver.execute(
                "INSERT INTO effects VALUES (?, ?, ?, ?, ?)",
                (idem, HASH, COMMAND_JSON, receipt, now),
            )
            receiver.execute("COMMIT")
            # record: read operation and attempt, observe, state update, event
            ledger.execute("BEGIN IMMEDIATE")
            ledger.execute(
                "SELECT * FROM operations WHERE tenant_id = ? AND operation_id = ?", (*key, op)
            ).fetchone()
            ledger.execute(
                "SELECT * FROM attempts WHERE tenant_id = ? AND operation_id = ?"
                " AND attempt_id = ?",
                (*key, op, attempt),
            ).fetchone()
            ledger.execute(
                "UPDATE attempts SET observation = 'Accepted', provider_reference = ?,"
                " evidence_reference = ? WHERE tenant_id = ? AND operation_id = ?"
                " AND attempt_id = ?",
                (receipt, f"receiver-reply/{receipt}", *key, op, attempt),
            )
            ledger.execute(
                "UPDATE operations SET state = 'SUCCEEDED', provider_reference = ?, version = 3,"
                " last_event_hash = ?, updated_us = ?"
                " WHERE tenant_id = ? AND operation_id = ? AND version = 2",
                (receipt, HASH, now, *key, op),
            )
            ledger.execute(
                EVENT_SQL,
                (event_3, op, attempt, 3, "dispatch-worker",
                 "ProviderAcceptanceConfirmed", now, f"receiver-reply/{receipt}",
                 '{"outcome":"Accepted","provider_reference":"rcpt"}', HASH, HASH),
            )  # fmt: skip
            ledger.execute("COMMIT")


def interleaved_round(
    folder: Path, round_number: int, ops: int, cpu: dict[str, list[float]]
) -> tuple[float, float, float]:
    """``(lifecycle, perform, floor)`` operations/s, in alternating blocks on the same disk.

    Appends each side's own CPU time per operation (µs, this process) to ``cpu``.
    """
    lifecycle, floor = Lifecycle(folder, round_number), Floor(folder, round_number, ops)
    perform = PerformLifecycle(folder, round_number)
    spent = {"lifecycle": 0.0, "perform": 0.0, "floor": 0.0}
    used = dict.fromkeys(spent, 0.0)
    progress = Progress(f"round {round_number} (lifecycle, perform and floor, alternating)", ops)
    try:
        for start in range(0, ops, BLOCK):
            numbers = range(start, min(ops, start + BLOCK))
            perform.prepare(numbers)
            sides: tuple[tuple[str, Lifecycle | PerformLifecycle | Floor], ...] = (
                ("floor", floor),
                ("lifecycle", lifecycle),
                ("perform", perform),
            )
            for name, side in sides:
                started, working = time.perf_counter(), time.process_time()
                side.run(numbers)
                spent[name] += time.perf_counter() - started
                used[name] += time.process_time() - working
            progress.update(numbers.stop)
    finally:
        lifecycle.close()
        perform.close()
        floor.close()
    for name, seconds in used.items():
        cpu[name].append(seconds / ops * 1e6)
    return ops / spent["lifecycle"], ops / spent["perform"], ops / spent["floor"]


def replay_setup(folder: Path) -> tuple[Callable[[], DispatchResult], Callable[[], DispatchResult]]:
    """One SUCCEEDED operation and the two replay paths to it: executor and model-facing tool."""
    store = open_store(f"sqlite:///{folder / 'replay-ledger.db'}")
    receiver = SimulatedReceiver(folder / "replay-receiver.db")
    ledger = Ledger(store)
    ledger.admit(
        CONTEXT,
        operation_id="op-replay",
        revision="rev-1",
        command=COMMAND,
        destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        admission_reference="approval/op-replay",
    )
    executor = Executor(ledger, receiver)
    if executor.execute(CONTEXT, "op-replay").state is not OperationState.SUCCEEDED:
        raise SystemExit("the replay operation did not succeed")  # pragma: no cover
    tool = DispatchTool(EffectLedger(ledger, destinations=[receiver]), CONTEXT, "op-replay")
    submissions = receiver.counts().submissions

    def via_executor() -> DispatchResult:
        return executor.execute(CONTEXT, "op-replay")

    def via_tool() -> DispatchResult:
        return tool.invoke()

    via_executor()
    via_tool()
    if receiver.counts().submissions != submissions:  # pragma: no cover - a broken replay
        raise SystemExit("a replay reached the destination")
    return via_executor, via_tool


def _listing(values: list[float], spec: str) -> str:
    return ", ".join(format(value, spec) for value in values)


def main(argv: list[str] | None = None) -> int:
    """Run every phase and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="folder for the database files (default: temp)")
    parser.add_argument("--ops", type=int, default=1000, help="operations per round (1000)")
    parser.add_argument("--rounds", type=int, default=5, help="lifecycle/floor rounds (5)")
    parser.add_argument("--replays", type=int, default=20000, help="timed replays per path")
    parser.add_argument("--alloc-replays", type=int, default=2000, help="traced replays per path")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="effectledger-bench-", dir=args.dir))
    print(
        f"effectledger SQLite benchmark - Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, files in {folder}"
    )
    print("settings: WAL, synchronous=FULL for ledger and receiver, BEGIN IMMEDIATE")
    try:
        via_executor, via_tool = replay_setup(folder)
        executor_latency = measure_latency(via_executor, args.replays, "replay (executor)")
        tool_latency = measure_latency(via_tool, args.replays, "replay (DispatchTool)")
        executor_alloc = measure_allocation(via_executor, args.alloc_replays)
        tool_alloc = measure_allocation(via_tool, args.alloc_replays)

        lifecycle: list[float] = []
        performs: list[float] = []
        floor: list[float] = []
        cpu: dict[str, list[float]] = {"lifecycle": [], "perform": [], "floor": []}
        for round_number in range(1, args.rounds + 1):
            life_rate, perform_rate, floor_rate = interleaved_round(
                folder, round_number, args.ops, cpu
            )
            lifecycle.append(life_rate)
            performs.append(perform_rate)
            floor.append(floor_rate)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    print()
    print("replay of a SUCCEEDED operation (one autocommit read, no write, no destination contact)")
    for name, latency, alloc in (
        ("Executor.execute", executor_latency, executor_alloc),
        ("DispatchTool.invoke", tool_latency, tool_alloc),
    ):
        print(
            f"  {name:<20} p50 {latency.p50_us:7.1f} µs   p99 {latency.p99_us:7.1f} µs   "
            f"mean {latency.mean_us:7.1f} µs   "
            f"alloc/replay {alloc.peak_bytes_per_call:7.0f} B peak, "
            f"{alloc.retained_bytes_per_call:.1f} B retained"
        )
    life, raw = statistics.median(lifecycle), statistics.median(floor)
    ratios = [mine / theirs for mine, theirs in zip(lifecycle, floor, strict=True)]
    ratio = statistics.median(ratios)
    print(f"lifecycle admit -> claim -> submit -> record, {args.ops} operations x {args.rounds}")
    print(f"  effectledger         {life:7.0f} ops/s  (rounds: {_listing(lifecycle, '.0f')})")
    print(
        f"  raw sqlite3 floor    {raw:7.0f} ops/s  (rounds: {_listing(floor, '.0f')})"
        "   4 durable commits per operation"
    )
    print(f"  ratio                {ratio:7.2f} x floor  (rounds: {_listing(ratios, '.2f')})")
    perform_ratios = [mine / theirs for mine, theirs in zip(performs, floor, strict=True)]
    perform_ratio = statistics.median(perform_ratios)
    print("EffectLedger.perform of an approved refund (admission and claim share a transaction)")
    print(
        f"  perform              {statistics.median(performs):7.0f} ops/s  "
        f"(rounds: {_listing(performs, '.0f')})"
    )
    print(
        f"  ratio                {perform_ratio:7.2f} x the 4-commit floor  "
        f"(rounds: {_listing(perform_ratios, '.2f')})   target >= {PERFORM_RATIO_TARGET}"
    )
    floor_cpu = statistics.median(cpu["floor"])
    print("CPU of this process per operation (µs, median of rounds; fsync waits excluded)")
    for name in ("lifecycle", "perform", "floor"):
        mine = statistics.median(cpu[name])
        print(f"  {name:<20} {mine:7.0f} µs   {mine / floor_cpu:5.2f} x the floor's")
    print()
    replay_ok = max(executor_latency.p50_us, tool_latency.p50_us) <= REPLAY_P50_TARGET_US
    ratio_ok = ratio >= LIFECYCLE_RATIO_TARGET
    print(
        f"target replay p50 <= {REPLAY_P50_TARGET_US:.0f} µs: {'met' if replay_ok else 'MISSED'}; "
        f"target lifecycle >= {LIFECYCLE_RATIO_TARGET} x floor: "
        f"{'met' if ratio_ok else 'MISSED'} ({ratio:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
