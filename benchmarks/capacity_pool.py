"""Does one pool's running-totals row serialize ``perform`` on PostgreSQL? Measured beside the
same work spread over one pool per process, in one run.

    python benchmarks/capacity_pool.py [--url postgresql://...] [--operations 800]
                                       [--workers 8] [--repeat 3]

Every worker process performs approved refunds through ``EffectLedger.perform`` (admission and
claim in one transaction, then submit and record), each refund moving 30 units of the
``refunds`` pool, which has a limit, so every admission reads the pool's totals under its lock
and every success moves them. Two runs on fresh schemas of the same database, alternating:

* one pool: every worker is the same tenant, so every transaction that moves units updates the
  same pool's ``capacity_totals`` rows (8, chosen by server process; every admission takes the
  same pool lock);
* one pool, one row: the same, with the schema's trigger function replaced by one that keeps
  each pool in a single row (the experiment that decided to shard);
* own pools (the floor): each worker is its own tenant, so no two workers share a totals row.

Throughput is operations per second from the first worker's start to the last worker's end,
best of ``--repeat``, the runs alternating; the ratios to the floor are the figures to watch
(1.0: sharing the pool costs nothing). Afterwards each schema's totals are checked against its
operations.
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
from multiprocessing.synchronize import Barrier
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from effectledger import Context, DestinationRef, EffectLedger, OperationState, SimulatedReceiver
from effectledger.authority.capacity import totals_mismatches_in
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def worker_main(
    url: str, folder: str, worker: int, count: int, shared: bool, start: Barrier, times: list[float]
) -> None:
    """Perform ``count`` approved refunds of 30 units in one tenant's ``refunds`` pool."""
    store = open_store(url)
    receiver = SimulatedReceiver(Path(folder) / f"receiver-{worker}.db", synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    service = EffectLedger(Ledger(store), destinations=[receiver])
    service.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    agent = Context(tenant_id="acme" if shared else f"tenant-{worker}", actor_id="agent")
    approver = Context(tenant_id=agent.tenant_id, actor_id="rita", roles=frozenset({"approver"}))
    ready: list[tuple[str, str]] = []
    for index in range(count):
        arguments = {"order_id": f"ord-{worker}{index:06d}", "amount_minor": 30, "currency": "EUR"}
        proposal = service.propose(agent, "refund_order", arguments)
        approval = service.approve(approver, proposal.proposal_id, digest=proposal.digest)
        ready.append((proposal.proposal_id, approval.approval_id))
    start.wait()
    began = time.monotonic()
    for proposal_id, approval_id in ready:
        result = service.perform(agent, proposal_id, approval=approval_id)
        if result.state is not OperationState.SUCCEEDED:
            raise SystemExit(f"{proposal_id} ended {result.state} ({result.reason})")
    times[2 * worker : 2 * worker + 2] = [began, time.monotonic()]
    receiver.close()
    store.close()


# The migration's trigger function with each pool kept in one row (shard 0).
_ONE_ROW = """
CREATE OR REPLACE FUNCTION {schema}.effectledger_capacity_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    held_delta      BIGINT := 0;
    committed_delta BIGINT := 0;
    freed_delta     BIGINT := 0;
BEGIN
    IF NEW.state = 'SUCCEEDED' THEN
        committed_delta := NEW.units;
    ELSIF NEW.state IN ('REJECTED', 'RELEASED') THEN
        freed_delta := NEW.units;
    ELSE
        held_delta := NEW.units;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.state = 'SUCCEEDED' THEN
            committed_delta := committed_delta - OLD.units;
        ELSIF OLD.state IN ('REJECTED', 'RELEASED') THEN
            freed_delta := freed_delta - OLD.units;
        ELSE
            held_delta := held_delta - OLD.units;
        END IF;
    END IF;
    IF held_delta = 0 AND committed_delta = 0 AND freed_delta = 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO capacity_totals AS t (tenant_id, pool, shard, held, committed, freed)
    VALUES (NEW.tenant_id, NEW.pool, 0, held_delta, committed_delta, freed_delta)
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = t.held + EXCLUDED.held,
        committed = t.committed + EXCLUDED.committed,
        freed = t.freed + EXCLUDED.freed;
    RETURN NULL;
END;
$$
"""


def _measure(base_url: str, workers: int, operations: int, mode: str) -> float:
    shared = mode != "own"
    schema = f"el_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    url = _with_schema(base_url, schema)
    store = open_store(url)
    parts = urlsplit(base_url)
    conninfo = urlunsplit(parts._replace(query=""))
    if mode == "one":
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(_ONE_ROW.replace("{schema}", schema).encode())
    for tenant in ["acme"] if shared else [f"tenant-{w}" for w in range(workers)]:
        limit = 30 * operations
        store.write(
            lambda tx, t=tenant, n=limit: tx.run(  # type: ignore[misc]
                "capacity_limit_set",
                {"tenant_id": t, "pool": "refunds", "limit_units": n, "now_us": 0},
            )
        )
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(workers)
    times = context.Manager().list([0.0] * (2 * workers))
    per_worker = operations // workers
    try:
        with tempfile.TemporaryDirectory() as folder:
            processes = [
                context.Process(
                    target=worker_main, args=(url, folder, w, per_worker, shared, start, times)
                )
                for w in range(workers)
            ]
            for process in processes:
                process.start()
            for process in processes:
                process.join()
            if any(process.exitcode != 0 for process in processes):
                raise SystemExit("a worker process failed")
        if store.read(totals_mismatches_in):
            raise SystemExit("the running totals differ from the operations")
    finally:
        store.close()
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return per_worker * workers / (max(times[1::2]) - min(times[0::2]))


def main() -> int:
    """Alternate the two runs and print the best throughput of each and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("EFFECTLEDGER_BENCH_POSTGRES_URL")
        or os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL"),
        help="a PostgreSQL database the benchmark may create schemas in",
    )
    parser.add_argument("--operations", type=int, default=800, help="refunds per run (800)")
    parser.add_argument("--workers", type=int, default=8, help="worker processes (8)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, best kept (3)")
    args = parser.parse_args()
    if not args.url:
        parser.error("give --url or set EFFECTLEDGER_BENCH_POSTGRES_URL")
    labels = {
        "one": "one pool, one totals row",
        "sharded": "one pool, 8 rows (shipped)",
        "own": "own pools (floor)",
    }
    best = dict.fromkeys(labels, 0.0)
    for _ in range(args.repeat):
        for mode in labels:
            rate = _measure(args.url, args.workers, args.operations, mode)
            best[mode] = max(best[mode], rate)
            print(f"  {labels[mode]}: {rate:.0f}/s", file=sys.stderr)
    print(f"{args.workers} processes, {args.operations} performs per run, best of {args.repeat}")
    for mode, label in labels.items():
        print(f"{label:26} {best[mode]:8.0f} performs/s  {best[mode] / best['own']:5.2f} x floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
