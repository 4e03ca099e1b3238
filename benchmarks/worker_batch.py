"""One worker process claiming in batches, beside the per-operation 4-commit floor, in one run.

Run it from the repository root::

    .venv/bin/python benchmarks/worker_batch.py [--ops N] [--rounds N] [--batch 32]
        [--backends sqlite,postgres] [--url postgresql://...]

For each backend, each round measures on fresh files or schemas, one after the other, so a
drifting machine slows all alike:

* the floor: the four durable commits of one operation after another, written with the raw
  driver into the ledger's own schema (admit, claim, the receiver's commit, record). SQLite:
  ``ledger_sqlite.Floor``. PostgreSQL: the three ledger commits of
  ``ledger_postgres.floor_worker`` through psycopg, and the receiver's commit into a file as
  ``ledger_sqlite.Floor`` makes it;
* the worker with ``claim_batch=1``, today's per-operation dispatch: each READY operation
  rechecked, claimed, sent and recorded on its own;
* the worker with ``claim_batch=--batch``: each batch rechecked, claimed in one transaction,
  sent together within the receiver's ``concurrent_sends`` and recorded in one transaction.

Each worker run is one spawned process running :class:`effectledger.workers.Worker`'s
dispatch pass (``EffectLedger.dispatch_ready``, the guarded executor) until nothing is READY,
over ``--ops`` approved refunds admitted beforehand (proposal, approval and admission are not
timed; the ledger holds a trail key, as ``connect()`` gives one). Its figure is operations per
second from its first pass to its last, and its own CPU per operation. The destination is the
simulated receiver, its own SQLite file with WAL and ``synchronous=FULL``, the same commit the
floor's third one makes: the figure is the ledger's, not a network's (the reference HTTP
receiver would put an HTTP server on the same cores). Every run checks, by the receiver's own
count, one effect per operation, each operation SUCCEEDED, one attempt each. The ratios to the
floor of the same round are printed, and their median; the target is >= 2x the floor with
batches. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ledger_sqlite

from effectledger import (
    Context,
    DestinationRef,
    EffectLedger,
    LedgerSettings,
    OperationState,
    SimulatedReceiver,
)
from effectledger.events.authentication import TrailKey, TrailKeys, new_trail_key
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Worker, WorkerSettings

AGENT = Context(tenant_id="acme", actor_id="agent")
APPROVER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
TARGET = 2.0
PASS = 100
"""Operations one dispatch pass takes at most (the worker's default ``batch``)."""


def service(url: str, receiver: Path, key: str) -> EffectLedger:
    """The refund application over ``url`` and the receiver file, with trail key ``key``."""
    destination = SimulatedReceiver(receiver)
    ref = DestinationRef(account_id=destination.account_id, endpoint=destination.endpoint)
    settings = LedgerSettings(trail_keys=TrailKeys(TrailKey.from_key_string(key)))
    app = EffectLedger(Ledger(open_store(url), settings=settings), destinations=[destination])
    app.register(refund_action(orders=OrderBook(), destination=ref), destination)
    return app


def close(app: EffectLedger) -> None:
    """Close the store and the receiver."""
    app.ledger.store.close()
    for destination in app.destinations.values():
        destination.close()  # type: ignore[attr-defined]


def prepare(url: str, receiver: Path, key: str, ops: int) -> None:
    """``ops`` approved refunds admitted and left READY (not timed)."""
    app = service(url, receiver, key)
    progress = ledger_sqlite.Progress("admitting refunds", ops)
    try:
        for number in range(ops):
            arguments = {"order_id": f"ord-{number:07d}", "amount_minor": 30, "currency": "EUR"}
            proposal = app.propose(AGENT, "refund_order", arguments)
            approval = app.approve(APPROVER, proposal.proposal_id, digest=proposal.digest)
            app.authority.admit(AGENT, proposal.proposal_id, approval_id=approval.approval_id)
            progress.update(number + 1)
    finally:
        close(app)


def worker_process(url: str, receiver: str, key: str, claim_batch: int, ops: int, out: Any) -> None:
    """Spawned: dispatch passes of one worker until nothing is READY; time, CPU and count."""
    app = service(url, Path(receiver), key)
    settings = WorkerSettings(
        batch=PASS, claim_batch=claim_batch, recovery_threads=0, seal_interval=None
    )
    worker = Worker(app, settings)
    progress = ledger_sqlite.Progress(f"worker, claim batch {claim_batch}", ops)
    done = 0
    began, cpu = time.perf_counter(), time.process_time()
    while taken := worker.dispatch_pass():
        done += taken
        progress.update(min(done, ops))
    elapsed, spent = time.perf_counter() - began, time.process_time() - cpu
    close(app)
    out.put((done, elapsed, spent))


def run_worker(url: str, receiver: Path, key: str, claim_batch: int, ops: int) -> Run:
    """One worker process over ``ops`` READY refunds; checks one effect each at the receiver."""
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    process = spawn.Process(
        target=worker_process, args=(url, str(receiver), key, claim_batch, ops, out)
    )
    process.start()
    done, elapsed, spent = out.get(timeout=3600)
    process.join()
    if process.exitcode != 0 or done != ops:  # pragma: no cover - a broken run
        raise SystemExit(f"the worker took {done} of {ops} (exit {process.exitcode})")
    check(url, receiver, key, ops)
    return Run(rate=ops / elapsed, cpu_us=spent / ops * 1e6)


def check(url: str, receiver_path: Path, key: str, ops: int) -> None:
    """One effect per operation by the receiver's own count; each SUCCEEDED, one attempt."""
    receiver = SimulatedReceiver(receiver_path)
    try:
        counts = receiver.counts()
    finally:
        receiver.close()
    if (counts.submissions, counts.effects) != (ops, ops):  # pragma: no cover - a broken run
        raise SystemExit(f"expected {ops} submissions and effects, the receiver says {counts}")
    store = open_store(url)
    try:
        states = store.read(lambda tx: tx.all("operations_by_state", {"tenant_id": "acme"}))
    finally:
        store.close()
    found = {row["state"]: int(row["operations"]) for row in states}
    if found != {OperationState.SUCCEEDED.value: ops}:  # pragma: no cover - a broken run
        raise SystemExit(f"expected {ops} SUCCEEDED operations, found {found}")


@dataclass(frozen=True)
class Run:
    """Operations per second of one run, and its process's CPU per operation (µs)."""

    rate: float
    cpu_us: float


def sqlite_floor(folder: Path, number: int, ops: int) -> Run:
    """``ledger_sqlite.Floor``: four durable commits per operation, one after another."""
    floor = ledger_sqlite.Floor(folder, number, ops)
    try:
        began, cpu = time.perf_counter(), time.process_time()
        floor.run(range(ops))
        elapsed, spent = time.perf_counter() - began, time.process_time() - cpu
    finally:
        floor.close()
    return Run(rate=ops / elapsed, cpu_us=spent / ops * 1e6)


def postgres_floor(base_url: str, folder: Path, number: int, ops: int) -> Run:
    """The three ledger commits of ``ledger_postgres.floor_worker`` and the receiver's commit
    (``ledger_sqlite.Floor``'s, into a file), one operation after another."""
    import ledger_postgres
    import psycopg

    schema = f"el_batch_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    url = ledger_postgres._with_schema(base_url, schema)
    open_store(url).close()  # the schema, made and migrated outside the clock
    conninfo, _ = ledger_postgres._without_store_options(url)
    connection = psycopg.connect(conninfo)
    connection.execute("SELECT set_config('search_path', %s, false)", (schema,))
    connection.commit()
    receiver = ledger_sqlite._open_raw(folder / f"pg-floor-receiver-{number}.db")
    receiver.executescript(ledger_sqlite.RECEIVER_FLOOR_SCHEMA)
    try:
        began, cpu = time.perf_counter(), time.process_time()
        for index in range(ops):
            params = ledger_postgres.floor_params("acme", f"op-{index}")
            for step in ("admit", "claim"):
                for statement in ledger_postgres._FLOOR[step]:
                    connection.execute(statement, params)
                connection.commit()
            receiver.execute("BEGIN IMMEDIATE")
            receiver.execute("UPDATE counters SET value = value + 1 WHERE name = 'submissions'")
            receiver.execute(
                "SELECT fingerprint, provider_reference FROM effects WHERE idempotency_key = ?",
                (params["key"],),
            ).fetchone()
            receiver.execute(
                "INSERT INTO effects VALUES (?, ?, ?, ?, ?)",
                (params["key"], params["hash"], params["command"], params["a"], params["now"]),
            )
            receiver.execute("COMMIT")
            for statement in ledger_postgres._FLOOR["record"]:
                connection.execute(statement, params)
            connection.commit()
        elapsed, spent = time.perf_counter() - began, time.process_time() - cpu
    finally:
        receiver.close()
        connection.close()
    ledger_postgres._check_and_drop(url, ops)
    return Run(rate=ops / elapsed, cpu_us=spent / ops * 1e6)


def measure_round(
    backend: str, folder: Path, number: int, ops: int, batch: int, url: str | None
) -> dict[str, Run]:
    """Floor, worker with claim batch 1, worker with ``batch``: one round of one backend."""
    runs: dict[str, Run] = {}
    sys.stderr.write(f"{backend} round {number}: floor\n")
    if backend == "sqlite":
        runs["floor"] = sqlite_floor(folder, number, ops)
    else:
        assert url is not None
        runs["floor"] = postgres_floor(url, folder, number, ops)
    for claim_batch in (1, batch):
        key = new_trail_key()
        receiver = folder / f"{backend}-receiver-{number}-{claim_batch}.db"
        if backend == "sqlite":
            ledger_url = f"sqlite:///{folder / f'worker-{number}-{claim_batch}.db'}"
            schema = None
        else:
            import ledger_postgres

            assert url is not None
            schema = f"el_batch_{os.getpid()}_{uuid.uuid4().hex[:8]}"
            ledger_url = ledger_postgres._with_schema(url, schema)
        prepare(ledger_url, receiver, key, ops)
        try:
            runs[f"batch {claim_batch}"] = run_worker(ledger_url, receiver, key, claim_batch, ops)
        finally:
            if schema is not None:
                _drop(ledger_url)
    return runs


def _drop(url: str) -> None:
    import ledger_postgres
    import psycopg
    from psycopg import sql

    conninfo, schema = ledger_postgres._without_store_options(url)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def measure(
    backend: str, ops: int, rounds: int, batch: int, url: str | None
) -> list[dict[str, Run]]:
    """Every round's runs for one backend, in a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-worker-batch-"))
    try:
        return [
            measure_round(backend, folder, number, ops, batch, url)
            for number in range(1, rounds + 1)
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Measure each backend and print the rates, the CPU and the ratios to the floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1024, help="operations per run (1024)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians reported (3)")
    parser.add_argument("--batch", type=int, default=32, help="the claim batch measured (32)")
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
        f"one worker process, {args.ops} approved refunds per run, median of {args.rounds} "
        f"rounds, {os.cpu_count()} CPUs; floor: 4 durable commits per operation, one after "
        "another; receiver: simulated, WAL, synchronous=FULL"
    )
    head = f"{'backend':<10} {'path':<16} {'ops/s':>7} {'x floor':>8} {'cpu µs/op':>10}"
    print(f"{head} {'x floor cpu':>11}  (rounds: ops/s = x the round's floor)")
    for backend in backends:
        rounds = measure(backend, args.ops, args.rounds, args.batch, args.url)
        for name in ("floor", "batch 1", f"batch {args.batch}"):
            rates = [found[name].rate for found in rounds]
            ratio = statistics.median(found[name].rate / found["floor"].rate for found in rounds)
            cpu = statistics.median(found[name].cpu_us / found["floor"].cpu_us for found in rounds)
            label = name if name == "floor" else f"worker {name}"
            shown = ", ".join(
                f"{found[name].rate:.0f}"
                + ("" if name == "floor" else f" = {found[name].rate / found['floor'].rate:.2f}x")
                for found in rounds
            )
            print(
                f"{backend:<10} {label:<16} {statistics.median(rates):>7.0f} {ratio:>8.2f} "
                f"{statistics.median(found[name].cpu_us for found in rounds):>10.0f} "
                f"{cpu:>11.2f}  ({shown})"
            )
        best = statistics.median(
            found[f"batch {args.batch}"].rate / found["floor"].rate for found in rounds
        )
        verdict = "met" if best >= TARGET else "MISSED"
        print(f"{backend:<10} target worker batch {args.batch} >= {TARGET}x floor: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
