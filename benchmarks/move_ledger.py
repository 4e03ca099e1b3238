"""Moving an SQLite ledger to PostgreSQL beside a raw copy of the same rows, in one run.

    python benchmarks/move_ledger.py [--url postgresql://...] [--operations 2000] [--batch 1000]

An SQLite ledger is filled with ``--operations`` performed refunds, sealed into its signed log.
Then, into fresh schemas of the same PostgreSQL database:

* move: ``effectledger.audit.moving.move_ledger`` (what ``migrate --from --to`` runs): every
  table copied in batches in one transaction, read back and digested, every trail's chain and
  every checkpoint verified, then committed.
* floor: plain ``sqlite3`` -> psycopg with the same tables, the same order and batches in one
  transaction, and nothing checked.

Prints rows, seconds and rows per second of each and the ratio move/floor (the cost of the
verification). The URL defaults to ``$EFFECTLEDGER_BENCH_POSTGRES_URL``, then
``$EFFECTLEDGER_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from effectledger import Context, DestinationRef, EffectLedger, SimulatedReceiver
from effectledger.audit.keys.signers import Signer
from effectledger.audit.moving import move_ledger
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store
from effectledger.store.copying import RENUMBERED, TABLES

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
REVIEWER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
REFUND = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR", "reason": "damaged"}


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _fill(path: Path, operations: int) -> str:
    url = f"sqlite:///{path / 'ledger.db'}?synchronous=NORMAL"
    receiver = SimulatedReceiver(path / "receiver.db", synchronous="NORMAL")
    ledger = EffectLedger(open_store(url), signer=Signer("log.example/bench", bytes(range(32))))
    ledger.register(
        refund_action(
            orders=OrderBook(),
            destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        ),
        receiver,
    )
    ledger.set_capacity_limit(REVIEWER, "refunds", 10 * operations * REFUND["amount_minor"])
    for index in range(operations):
        proposal = ledger.propose(AGENT, "refund_order", REFUND)
        ledger.approve(REVIEWER, proposal)
        ledger.perform(AGENT, proposal)
        if index % 500 == 499:
            ledger.seal(REVIEWER)
    ledger.seal(REVIEWER)
    ledger.close()
    receiver.close()
    return f"sqlite:///{path / 'ledger.db'}"


def _floor(source: Path, target_url: str, batch: int) -> int:
    """Copy the same tables with the raw drivers: no digest, no verification."""
    open_store(target_url).close()  # the same migrated schema, created outside the timing
    parts = urlsplit(target_url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    return _raw_copy(source, urlunsplit(parts._replace(query=urlencode(query))), schema, batch)


def _raw_copy(source: Path, base: str, schema: str, batch: int) -> int:
    rows = 0
    reader = sqlite3.connect(source)
    try:
        with psycopg.connect(base) as connection:
            connection.execute("SELECT set_config('search_path', %s, false)", (schema,))
            with connection.cursor() as cursor:
                for table, order in TABLES:
                    names = [row[1] for row in reader.execute(f'PRAGMA table_info("{table}")')]
                    names = [name for name in names if name != RENUMBERED.get(table)]
                    if table in RENUMBERED:
                        cursor.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
                    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        sql.Identifier(table),
                        sql.SQL(", ").join(map(sql.Identifier, names)),
                        sql.SQL(", ").join(sql.Placeholder() * len(names)),
                    )
                    columns = ", ".join(f'"{name}"' for name in names)
                    keys = ", ".join(f'"{name}"' for name in order)
                    selected = reader.execute(f'SELECT {columns} FROM "{table}" ORDER BY {keys}')
                    while page := selected.fetchmany(batch):
                        cursor.executemany(insert, page)
                        rows += len(page)
    finally:
        reader.close()
    return rows


def main() -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("EFFECTLEDGER_BENCH_POSTGRES_URL")
        or os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL"),
    )
    parser.add_argument("--operations", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    if not args.url:
        print("set --url or $EFFECTLEDGER_TEST_POSTGRES_URL", file=sys.stderr)
        return 2
    schemas = [f"bench_move_{uuid.uuid4().hex[:8]}", f"bench_floor_{uuid.uuid4().hex[:8]}"]
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        source = _fill(Path(folder), args.operations)
        print(f"filled {args.operations} refunds in {time.perf_counter() - started:.1f} s")
        try:
            started = time.perf_counter()
            report = move_ledger(source, _with_schema(args.url, schemas[0]), batch=args.batch)
            move_s = time.perf_counter() - started
            moved = sum(report.rows.values())
            floor_url = _with_schema(args.url, schemas[1])
            started_floor = time.perf_counter()
            floor_rows = _floor(Path(folder) / "ledger.db", floor_url, args.batch)
            floor_s = time.perf_counter() - started_floor
        finally:
            with psycopg.connect(args.url, autocommit=True) as connection:
                for schema in schemas:
                    connection.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                    )
    print(f"{'run':<6} {'rows':>8} {'seconds':>8} {'rows/s':>9}")
    print(f"{'move':<6} {moved:>8} {move_s:>8.2f} {moved / move_s:>9.0f}")
    print(f"{'floor':<6} {floor_rows:>8} {floor_s:>8.2f} {floor_rows / floor_s:>9.0f}")
    print(
        f"move/floor {floor_s / move_s:.2f} (verified {report.trails} trails, "
        f"{report.checkpoints} checkpoints)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
