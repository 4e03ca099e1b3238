"""Lifecycle throughput of the PostgreSQL ledger beside the raw psycopg floor, in one run.

    python benchmarks/ledger_postgres.py [--url postgresql://...] [--operations 1200]
                                         [--workers 1,4,8] [--repeat 3]

For each number of worker processes, the same number of operations is pushed through two runs
on fresh schemas of the same database:

* ledger: each operation is admitted, then performed by ``Executor.execute`` (status read,
  claim, submit to a simulated receiver, record): three ledger transactions per operation.
* perform: ``EffectLedger.perform`` of an approved refund, the call users make: admission and
  claim share one transaction, then submit and record (two ledger transactions). Proposals and
  approvals are made before the timed part.
* floor: plain psycopg with the same three transactions per operation writing the same rows
  (operation insert + event; attempt insert + operation update + event; attempt update +
  operation update + event) into the same tables, with the same keys, indexes and triggers.

Each worker has its own simulated receiver file (SQLite, ``synchronous=NORMAL``) so the
destination does not dominate. Throughput is operations per second from the first worker's
start to the last worker's end, best of ``--repeat`` alternating runs (the machine may be shared);
the ratio ledger/floor is the figure to watch (target >= 0.5). The CPU columns are the worker
processes' own CPU time per operation (the server's is not included): once the machine's cores
are saturated, throughput follows CPU per operation.
The URL defaults to ``$EFFECTLEDGER_BENCH_POSTGRES_URL``, then ``$EFFECTLEDGER_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from effectledger import (
    Command,
    Context,
    DestinationRef,
    EffectLedger,
    OperationState,
    SimulatedReceiver,
)
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor

_COMMAND = Command(
    action="send_support_reply",
    contract_version="reply-v1",
    arguments={"recipient": "customer@example.com", "body": "Your refund is on its way."},
)


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _without_store_options(url: str) -> tuple[str, str]:
    """The libpq URL and the schema named in a store URL."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    return urlunsplit(parts._replace(query=urlencode(query))), schema


def ledger_worker(
    url: str, folder: str, worker: int, count: int, start: Barrier, times: list[float]
) -> None:
    """Admit and perform ``count`` operations through the ledger."""
    store = open_store(url)
    ledger = Ledger(store)
    receiver = SimulatedReceiver(Path(folder) / f"receiver-{worker}.db", synchronous="NORMAL")
    executor = Executor(ledger, receiver)
    context = Context(tenant_id=f"tenant-{worker % 4}", actor_id="agent")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ids = [f"w{worker}-op-{index}" for index in range(count)]
    start.wait()
    began, cpu = time.monotonic(), time.process_time()
    for operation_id in ids:
        ledger.admit(
            context,
            operation_id=operation_id,
            revision="rev-1",
            command=_COMMAND,
            destination=destination,
            admission_reference=f"approval/{operation_id}",
        )
        result = executor.execute(context, operation_id)
        if result.state is not OperationState.SUCCEEDED:
            raise SystemExit(f"{operation_id} ended {result.state}")
    ended = time.monotonic()
    times[3 * worker : 3 * worker + 3] = [began, ended, time.process_time() - cpu]
    receiver.close()
    store.close()


def perform_worker(
    url: str, folder: str, worker: int, count: int, start: Barrier, times: list[float]
) -> None:
    """Perform ``count`` approved refunds through ``EffectLedger.perform``."""
    store = open_store(url)
    receiver = SimulatedReceiver(Path(folder) / f"receiver-{worker}.db", synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    action = refund_action(orders=OrderBook(), destination=destination)
    service = EffectLedger(Ledger(store), destinations=[receiver])
    service.register(action, receiver)
    agent = Context(tenant_id=f"tenant-{worker % 4}", actor_id="agent")
    approver = Context(tenant_id=agent.tenant_id, actor_id="rita", roles=frozenset({"approver"}))
    ready: list[tuple[str, str]] = []
    for index in range(count):
        arguments = {"order_id": f"ord-{worker}{index:06d}", "amount_minor": 30, "currency": "EUR"}
        proposal = service.propose(agent, "refund_order", arguments)
        approval = service.approve(approver, proposal.proposal_id, digest=proposal.digest)
        ready.append((proposal.proposal_id, approval.approval_id))
    start.wait()
    began, cpu = time.monotonic(), time.process_time()
    for proposal_id, approval_id in ready:
        result = service.perform(agent, proposal_id, approval=approval_id)
        if result.state is not OperationState.SUCCEEDED:
            raise SystemExit(f"{proposal_id} ended {result.state}")
    ended = time.monotonic()
    times[3 * worker : 3 * worker + 3] = [began, ended, time.process_time() - cpu]
    receiver.close()
    store.close()


_FLOOR = {
    "admit": [
        "INSERT INTO operations (tenant_id, operation_id, requester_id, revision, action, "
        "contract_version, command_json, fingerprint, admission_reference, destination_account, "
        "destination_endpoint, idempotency_key, state, version, created_us, updated_us, "
        "last_event_hash) VALUES (%(t)s, %(o)s, 'agent', 'rev-1', 'send_support_reply', "
        "'reply-v1', %(command)s, %(hash)s, %(ref)s, 'acct-demo', "
        "'https://receiver.invalid/v1/effects', %(key)s, 'READY', 1, %(now)s, %(now)s, %(hash)s)",
        "INSERT INTO audit_events (event_id, tenant_id, operation_id, attempt_id, sequence, "
        "actor, event_type, recorded_us, evidence_reference, details_json, observation_id, "
        "prev_hash, event_hash) VALUES (%(e1)s, %(t)s, %(o)s, NULL, 1, 'agent', "
        "'OperationAdmitted', %(now)s, %(ref)s, %(details)s, NULL, %(hash)s, %(hash)s)",
    ],
    "claim": [
        "INSERT INTO attempts (tenant_id, operation_id, attempt_id, executor_id, "
        "destination_account, destination_endpoint, idempotency_key, prepared_us, "
        "recover_after_us) VALUES (%(t)s, %(o)s, %(a)s, 'dispatch-worker', 'acct-demo', "
        "'https://receiver.invalid/v1/effects', %(key)s, %(now)s, %(now)s)",
        "UPDATE operations SET state = 'IN_PROGRESS', active_attempt_id = %(a)s, version = 2, "
        "last_event_hash = %(hash)s, updated_us = %(now)s "
        "WHERE tenant_id = %(t)s AND operation_id = %(o)s AND version = 1",
        "INSERT INTO audit_events (event_id, tenant_id, operation_id, attempt_id, sequence, "
        "actor, event_type, recorded_us, evidence_reference, details_json, observation_id, "
        "prev_hash, event_hash) VALUES (%(e2)s, %(t)s, %(o)s, %(a)s, 2, 'dispatch-worker', "
        "'AttemptPrepared', %(now)s, NULL, '{}', NULL, %(hash)s, %(hash)s)",
    ],
    "record": [
        "UPDATE attempts SET observation = 'Accepted', provider_reference = %(ref)s, "
        "evidence_reference = %(ref)s "
        "WHERE tenant_id = %(t)s AND operation_id = %(o)s AND attempt_id = %(a)s",
        "UPDATE operations SET state = 'SUCCEEDED', provider_reference = %(ref)s, version = 3, "
        "last_event_hash = %(hash)s, updated_us = %(now)s "
        "WHERE tenant_id = %(t)s AND operation_id = %(o)s AND version = 2",
        "INSERT INTO audit_events (event_id, tenant_id, operation_id, attempt_id, sequence, "
        "actor, event_type, recorded_us, evidence_reference, details_json, observation_id, "
        "prev_hash, event_hash) VALUES (%(e3)s, %(t)s, %(o)s, %(a)s, 3, 'dispatch-worker', "
        "'ProviderAcceptanceConfirmed', %(now)s, %(ref)s, %(details)s, NULL, %(hash)s, %(hash)s)",
    ],
}


_FLOOR_COMMAND = '{"action":"send_support_reply","arguments":{"body":"Your refund is on its way.",'
_FLOOR_COMMAND += '"recipient":"customer@example.com"},"contract_version":"reply-v1"}'


def floor_params(tenant_id: str, operation_id: str) -> dict[str, object]:
    """The parameters of one floor operation's statements (:data:`_FLOOR`), fresh random ids."""
    return {
        "t": tenant_id,
        "o": operation_id,
        "a": uuid.uuid4().hex,
        "key": f"el-{uuid.uuid4().hex}",
        "ref": f"approval/{operation_id}",
        "command": _FLOOR_COMMAND,
        "hash": uuid.uuid4().hex * 2,
        "details": '{"fingerprint":"' + uuid.uuid4().hex * 2 + '","revision":"rev-1"}',
        "now": time.time_ns() // 1000,
        "e1": uuid.uuid4().hex,
        "e2": uuid.uuid4().hex,
        "e3": uuid.uuid4().hex,
    }


def floor_worker(
    url: str, folder: str, worker: int, count: int, start: Barrier, times: list[float]
) -> None:
    """The same three transactions per operation, written with plain psycopg."""
    conninfo, schema = _without_store_options(url)
    connection = psycopg.connect(conninfo)
    connection.execute("SELECT set_config('search_path', %s, false)", (schema,))
    connection.commit()
    start.wait()
    began, cpu = time.monotonic(), time.process_time()
    for index in range(count):
        params = floor_params(f"tenant-{worker % 4}", f"w{worker}-op-{index}")
        for step in ("admit", "claim", "record"):
            for statement in _FLOOR[step]:
                connection.execute(statement, params)
            connection.commit()
    ended = time.monotonic()
    times[3 * worker : 3 * worker + 3] = [began, ended, time.process_time() - cpu]
    connection.close()


def _measure(
    target: Callable[[str, str, int, int, Barrier, list[float]], None],
    base_url: str,
    workers: int,
    operations: int,
) -> tuple[float, float, str]:
    """Run ``target`` in ``workers`` processes on a fresh schema.

    Returns operations per second, the workers' own CPU seconds per operation, and the URL.
    """
    schema = f"el_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    url = _with_schema(base_url, schema)
    open_store(url).close()  # create and migrate the schema outside the measurement
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(workers)
    times = context.Manager().list([0.0] * (3 * workers))
    per_worker = operations // workers
    with tempfile.TemporaryDirectory() as folder:
        processes = [
            context.Process(target=target, args=(url, folder, w, per_worker, start, times))
            for w in range(workers)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        if any(process.exitcode != 0 for process in processes):
            raise SystemExit(f"a {target.__name__} process failed")
    elapsed = max(times[1::3]) - min(times[0::3])
    done = per_worker * workers
    return done / elapsed, sum(times[2::3]) / done, url


def _check_and_drop(url: str, expected: int) -> None:
    conninfo, schema = _without_store_options(url)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            sql.SQL("SELECT count(*) FROM {}.operations WHERE state = 'SUCCEEDED'").format(
                sql.Identifier(schema)
            )
        ).fetchone()
        connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    if row is None or row[0] != expected:
        raise SystemExit(f"expected {expected} SUCCEEDED operations, found {row}")


def main() -> int:
    """Run the benchmark and print one line per worker count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "EFFECTLEDGER_BENCH_POSTGRES_URL", os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL")
        ),
        help="a PostgreSQL database the benchmark may create schemas in",
    )
    parser.add_argument("--operations", type=int, default=1200, help="operations per run")
    parser.add_argument("--workers", default="1,4,8", help="worker process counts")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each; the best of each is reported"
    )
    args = parser.parse_args()
    if not args.url:
        parser.error("give --url or set EFFECTLEDGER_BENCH_POSTGRES_URL")
    counts = [int(part) for part in args.workers.split(",")]
    print(
        f"{args.operations} operations per run, 3 transactions per operation, "
        f"best of {args.repeat} runs"
    )
    print(
        f"{'workers':>7}  {'path':>7}  {'ops/s':>6}  {'floor ops/s':>11}  {'ratio':>5}  "
        f"{'cpu':>6}  {'floor cpu':>9}  {'cpu ratio':>9}   (client CPU, us per operation)"
    )
    paths = {"ledger": ledger_worker, "perform": perform_worker}
    for workers in counts:
        floors: list[tuple[float, float]] = []
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        done = args.operations // workers * workers
        for _ in range(args.repeat):  # alternate, so all see the same machine
            *floor, floor_url = _measure(floor_worker, args.url, workers, args.operations)
            _check_and_drop(floor_url, done)
            floors.append((floor[0], floor[1]))
            for name, target in paths.items():
                *found, found_url = _measure(target, args.url, workers, args.operations)
                _check_and_drop(found_url, done)
                measured[name].append((found[0], found[1]))
        floor_rate, floor_cpu = max(floors)
        for name, runs in measured.items():
            rate, cpu = max(runs)
            print(
                f"{workers:>7}  {name:>7}  {rate:>6.0f}  {floor_rate:>11.0f}  "
                f"{rate / floor_rate:>5.2f}  {cpu * 1e6:>6.0f}  {floor_cpu * 1e6:>9.0f}  "
                f"{cpu / floor_cpu:>9.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
