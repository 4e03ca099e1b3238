"""16 concurrent performers with group commit on and off, beside the per-operation floor.

Run it from the repository root::

    .venv/bin/python benchmarks/group_commit.py [--ops N] [--rounds N] [--layouts 1x16,4x4]
        [--url postgresql://...] [--backends sqlite,postgres]

For each backend and each layout (processes x threads, 16 performers in all by default), one
round measures, on fresh files or schemas and one after the other so a drifting machine slows
all alike:

* the floor: the per-operation commits of one operation after another, from the benchmarks'
  own floor classes (SQLite: ``ledger_sqlite.Floor``, plain ``sqlite3`` making the four durable
  commits of an operation, admit, claim, the receiver's and record, WAL and synchronous=FULL;
  PostgreSQL: ``ledger_postgres.floor_worker``, plain psycopg making the three ledger commits
  of an operation, in one process);
* ``EffectLedger.perform`` of approved refunds (proposals and approvals made before the clock
  starts) by the layout's performers at once, ``group_commit=off``, then ``group_commit=on``.

Each figure is operations per second from the performers' release to the last one's end; the
ratios to the floor of the same round are printed, and their median over ``--rounds``. The
target is >= 2x the floor with group commit on, 16 performers, on each backend. The receiver is
a simulated one (SQLite: ``synchronous=FULL``, one file shared by the performers, as the floor's
receiver commit; PostgreSQL: ``NORMAL``, as in ``ledger_postgres.py``). Every run checks that
each refund was sent once (the receiver holds exactly one effect per refund) and SUCCEEDED, or
ended IN_PROGRESS because its record ran out of its time budget (``left off/on``: how many, over
all rounds; recovery settles them). Progress on stderr.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import ledger_sqlite

from effectledger import Context, DestinationRef, EffectLedger, OperationState, SimulatedReceiver
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store

AGENT = Context(tenant_id="acme", actor_id="agent")
APPROVER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
TARGET = 2.0


def _service(url: str, receiver_path: Path, synchronous: str) -> EffectLedger:
    receiver = SimulatedReceiver(receiver_path, synchronous=synchronous)
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    service = EffectLedger(Ledger(open_store(url)), destinations=[receiver])
    service.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return service


def _close(service: EffectLedger) -> None:
    service.ledger.store.close()
    for destination in service.destinations.values():
        destination.close()  # type: ignore[attr-defined]


def _prepare(url: str, receiver_path: Path, synchronous: str, ops: int) -> list[tuple[str, str]]:
    """``ops`` proposed and approved refunds (not timed)."""
    service = _service(url, receiver_path, synchronous)
    try:
        ready = []
        for number in range(ops):
            arguments = {"order_id": f"ord-{number:07d}", "amount_minor": 30, "currency": "EUR"}
            proposal = service.propose(AGENT, "refund_order", arguments)
            approval = service.approve(APPROVER, proposal.proposal_id, digest=proposal.digest)
            ready.append((proposal.proposal_id, approval.approval_id))
        return ready
    finally:
        _close(service)


def performer_process(
    url: str,
    receiver_path: str,
    synchronous: str,
    calls: list[tuple[str, str]],
    threads: int,
    start: Barrier,
    times: Any,
    worker: int,
) -> None:
    """Spawned: perform ``calls`` from ``threads`` threads once every process is ready."""
    service = _service(url, Path(receiver_path), synchronous)
    chunks = [calls[index::threads] for index in range(threads)]
    unsettled: list[str] = []
    ready = threading.Barrier(threads + 1)

    def perform(chunk: list[tuple[str, str]]) -> None:
        ready.wait()
        for proposal_id, approval_id in chunk:
            result = service.perform(AGENT, proposal_id, approval=approval_id)
            if result.state is OperationState.IN_PROGRESS:  # sent; its record ran out of time
                unsettled.append(proposal_id)
            elif result.state is not OperationState.SUCCEEDED:  # pragma: no cover - broken run
                raise SystemExit(f"{proposal_id} ended {result.state}")

    pool = [threading.Thread(target=perform, args=(chunk,)) for chunk in chunks]
    for thread in pool:
        thread.start()
    start.wait()
    began, cpu = time.monotonic(), time.process_time()
    ready.wait()
    for thread in pool:
        thread.join()
    ended, spent = time.monotonic(), time.process_time() - cpu
    times[4 * worker : 4 * worker + 4] = [began, ended, spent, float(len(unsettled))]
    _close(service)


def performers(
    url: str, receiver_path: Path, synchronous: str, ready: list[tuple[str, str]], layout: str
) -> tuple[float, int]:
    """Operations per second of ``ready`` performed by ``layout`` (processes x threads), and
    how many performs ended IN_PROGRESS: their record ran out of its budget, the destination's
    effect made and the operation left for recovery, as the ledger reports it."""
    processes, threads = (int(part) for part in layout.split("x"))
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(processes)
    times = spawn.Manager().list([0.0] * (4 * processes))
    workers = [
        spawn.Process(
            target=performer_process,
            args=(
                url,
                str(receiver_path),
                synchronous,
                ready[index::processes],
                threads,
                start,
                times,
                index,
            ),
        )
        for index in range(processes)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    if any(process.exitcode != 0 for process in workers):
        raise SystemExit("a performer process failed")
    receiver = SimulatedReceiver(receiver_path, synchronous=synchronous)
    try:
        if receiver.counts().effects != len(ready):  # pragma: no cover - a broken run
            raise SystemExit(f"expected {len(ready)} effects, found {receiver.counts().effects}")
    finally:
        receiver.close()
    return len(ready) / (max(times[1::4]) - min(times[0::4])), int(sum(times[3::4]))


def sqlite_round(folder: Path, number: int, ops: int, layout: str) -> dict[str, float]:
    """Floor, group commit off and on, one after the other, for SQLite."""
    rates: dict[str, float] = {}
    floor = ledger_sqlite.Floor(folder, number, ops)
    try:
        began = time.perf_counter()
        floor.run(range(ops))
        rates["floor"] = ops / (time.perf_counter() - began)
    finally:
        floor.close()
    for switch in ("off", "on"):
        url = f"sqlite:///{folder / f'{layout}-{switch}-{number}.db'}?group_commit={switch}"
        receiver = folder / f"{layout}-{switch}-receiver-{number}.db"
        ready = _prepare(url, receiver, "FULL", ops)
        rates[switch], rates[f"{switch}_left"] = performers(url, receiver, "FULL", ready, layout)
    return rates


def postgres_round(base_url: str, folder: Path, ops: int, layout: str) -> dict[str, float]:
    """Floor, group commit off and on, one after the other, for PostgreSQL."""
    import ledger_postgres

    rates: dict[str, float] = {}
    floor_rate, _, floor_url = ledger_postgres._measure(
        ledger_postgres.floor_worker, base_url, 1, ops
    )
    ledger_postgres._check_and_drop(floor_url, ops)
    rates["floor"] = floor_rate
    processes = int(layout.split("x")[0])
    for switch in ("off", "on"):
        schema = f"el_group_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        pool = 16 // processes + 1
        url = ledger_postgres._with_schema(base_url, schema)
        url += f"&group_commit={switch}&pool_max_size={pool}"
        receiver = folder / f"pg-{layout}-{switch}-{schema}.db"
        ready = _prepare(url, receiver, "NORMAL", ops)
        rates[switch], rates[f"{switch}_left"] = performers(url, receiver, "NORMAL", ready, layout)
        ledger_postgres._check_and_drop(ledger_postgres._with_schema(base_url, schema), ops)
    return rates


def measure(
    backend: str, layout: str, ops: int, rounds: int, url: str | None
) -> list[dict[str, float]]:
    """Every round's rates for one backend and layout."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-group-"))
    measured = []
    try:
        for number in range(1, rounds + 1):
            sys.stderr.write(f"  {backend} {layout} round {number}/{rounds}\n")
            if backend == "sqlite":
                measured.append(sqlite_round(folder, number, ops, layout))
            else:
                assert url is not None
                measured.append(postgres_round(url, folder, ops, layout))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return measured


def summary(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Median rates and median per-round ratios to the floor."""
    return {
        "floor": statistics.median(r["floor"] for r in rounds),
        "off": statistics.median(r["off"] for r in rounds),
        "on": statistics.median(r["on"] for r in rounds),
        "off_ratio": statistics.median(r["off"] / r["floor"] for r in rounds),
        "on_ratio": statistics.median(r["on"] / r["floor"] for r in rounds),
        "off_left": sum(r["off_left"] for r in rounds),
        "on_left": sum(r["on_left"] for r in rounds),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure each backend and layout and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=480, help="operations per run (480)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians reported (3)")
    parser.add_argument("--layouts", default="1x16,4x4", help="processes x threads (1x16,4x4)")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "EFFECTLEDGER_BENCH_POSTGRES_URL", os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL")
        ),
        help="a PostgreSQL database the benchmark may create schemas in",
    )
    args = parser.parse_args(argv)
    backends = [name for name in args.backends.split(",") if name != "postgres" or args.url]
    print(
        f"group commit, {args.ops} refunds per run, median of {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs; floor: one operation after another, per-operation commits"
    )
    print(
        f"{'backend':<10} {'layout':>6} {'floor ops/s':>11} {'off ops/s':>9} {'off/floor':>9} "
        f"{'on ops/s':>8} {'on/floor':>8}  {'left off/on':>11}  target on/floor >= {TARGET}"
    )
    for backend in backends:
        for layout in args.layouts.split(","):
            got = summary(measure(backend, layout, args.ops, args.rounds, args.url))
            print(
                f"{backend:<10} {layout:>6} {got['floor']:>11.0f} {got['off']:>9.0f} "
                f"{got['off_ratio']:>9.2f} {got['on']:>8.0f} {got['on_ratio']:>8.2f}  "
                f"{got['off_left']:>5.0f}/{got['on_left']:<5.0f}  "
                f"{'met' if got['on_ratio'] >= TARGET else 'MISSED'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
