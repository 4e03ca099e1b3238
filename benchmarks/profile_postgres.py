"""Where the client CPU of ``EffectLedger.perform`` on PostgreSQL goes, beside the psycopg floor.

Run it from the repository root::

    .venv/bin/python benchmarks/profile_postgres.py [--url postgresql://...] [--performs N]
                                                    [--rounds N] [--top N]

On a fresh schema of the database, approved refunds are performed one after another in this
process (the simulated receiver on a file at ``synchronous=OFF``), alternating rounds with the
floor of ``benchmarks/ledger_postgres.py`` (plain psycopg, the same three transactions per
operation writing the same rows), so both see the same machine. It prints the client CPU per
perform and per floor operation (best round of each) and their ratio; the statements one perform
sends, with its round trips (a statement on its own is one, a pipeline of statements is one);
then a cProfile of the performs (CPU time, not wall time), own time grouped into the driver
(psycopg and its pool), the receiver's SQLite, canonical encoding, hashing, validation and the
rest, and the ``--top`` functions by own time.
The URL defaults to ``$EFFECTLEDGER_BENCH_POSTGRES_URL``, then ``$EFFECTLEDGER_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from ledger_postgres import _FLOOR, floor_params
from profile_perform import Bench
from psycopg import sql

GROUPS = (
    ("driver (psycopg, its pool)", ("psycopg",)),
    ("receiver (SQLite)", ("sqlite3.", "destinations/simulated.py")),
    ("hashing", ("openssl_sha256", "hexdigest", "hash_of_entry", "digest_bytes", "leaf_of")),
    ("canonical encoding", ("canonical.py", "encoder.py", "record.py", "chain.py")),
    ("validation", ("validate", "refuse_unstorable", "integrity.py", "__post_init__")),
)


def floor_cpu_us(conninfo: str, schema: str, count: int, offset: int) -> float:
    """Client CPU per operation of the floor's three plain psycopg transactions."""
    with psycopg.connect(conninfo) as connection:
        connection.execute("SELECT set_config('search_path', %s, false)", (schema,))
        connection.commit()
        started = time.process_time()
        for index in range(offset, offset + count):
            params = floor_params("tenant-floor", f"floor-op-{index}")
            for step in ("admit", "claim", "record"):
                for statement in _FLOOR[step]:
                    connection.execute(statement, params)
                connection.commit()
        return (time.process_time() - started) / count * 1e6


@contextlib.contextmanager
def counting(seen: list[str]) -> Iterator[None]:
    """Note each statement psycopg sends (``P`` when in a pipeline) and each pipeline's end."""
    execute, pipeline = psycopg.Cursor.execute, psycopg.Connection.pipeline

    def noted_execute(self: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        mark = "P" if self.connection._pipeline is not None else " "
        seen.append(f"{mark} {' '.join(str(query).split()[:5])}")
        return execute(self, query, *args, **kw)

    @contextlib.contextmanager
    def noted_pipeline(self: psycopg.Connection[Any]) -> Iterator[Any]:
        with pipeline(self) as inside:
            yield inside
        seen.append("| one round trip for the statements above marked P")

    psycopg.Cursor.execute = noted_execute  # type: ignore[method-assign]
    psycopg.Connection.pipeline = noted_pipeline  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Connection.pipeline = pipeline  # type: ignore[method-assign]


def group_of(where: str) -> str:
    """The group a profiled function's location falls into."""
    for name, marks in GROUPS:
        if any(mark in where for mark in marks):
            return name
    return "the rest (ledger logic, rows, telemetry)"


def main(argv: list[str] | None = None) -> int:
    """Measure, count, profile and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "EFFECTLEDGER_BENCH_POSTGRES_URL", os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL")
        ),
        help="a PostgreSQL database the benchmark may create a schema in",
    )
    parser.add_argument("--performs", type=int, default=300, help="performs per round (300)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (3)")
    parser.add_argument("--top", type=int, default=20, help="functions listed (20)")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("give --url or set EFFECTLEDGER_BENCH_POSTGRES_URL")
    schema = f"el_profile_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(args.url)
    conninfo = urlunsplit(parts._replace(query=urlencode(parse_qsl(parts.query))))
    url = urlunsplit(parts._replace(query=urlencode([*parse_qsl(parts.query), ("schema", schema)])))
    folder = Path(tempfile.mkdtemp(prefix="effectledger-profile-"))
    bench = Bench(url, folder / "receiver.db", "OFF")
    try:
        bench.perform(bench.approved(50))  # warm up: pool, prepared statements
        floor_cpu_us(conninfo, schema, 50, 0)
        performs: list[float] = []
        floors: list[float] = []
        for round_ in range(args.rounds):
            ready = bench.approved(args.performs)
            started = time.process_time()
            bench.perform(ready)
            performs.append((time.process_time() - started) / args.performs * 1e6)
            floors.append(floor_cpu_us(conninfo, schema, args.performs, (round_ + 1) * 10**6))
        seen: list[str] = []
        ready = bench.approved(1)
        with counting(seen):
            bench.perform(ready)
        ready = bench.approved(args.performs)
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        bench.perform(ready)
        profile.disable()
    finally:
        bench.store.close()
        bench.receiver.close()
        shutil.rmtree(folder, ignore_errors=True)
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    perform_us, floor_us = min(performs), min(floors)
    print(f"EffectLedger.perform on PostgreSQL, best of {args.rounds} rounds of {args.performs}")
    print(
        f"client CPU: perform {perform_us:.0f} µs, floor {floor_us:.0f} µs per operation, "
        f"ratio {perform_us / floor_us:.2f}"
    )
    statements = [line for line in seen if not line.startswith("|")]
    alone = sum(1 for line in statements if line.startswith(" "))
    trips = alone + sum(1 for line in seen if line.startswith("|"))
    floor_statements = sum(len(step) + 1 for step in _FLOOR.values())  # and each COMMIT
    print(
        f"statements per perform: {len(statements)} in {trips} round trips "
        f"(floor: {floor_statements} statements, as many round trips)"
    )
    for line in seen:
        print(f"  {line}")
    stats = pstats.Stats(profile)
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in rows.values())
    groups: dict[str, float] = {}
    for (filename, line, name), row in rows.items():
        where = f"{filename}:{line}({name})"
        groups[group_of(where)] = groups.get(group_of(where), 0.0) + row[2]
    print("own CPU time by group (profiled; the profiler inflates small Python functions)")
    for name, seconds in sorted(groups.items(), key=lambda item: -item[1]):
        print(f"  {name:<42} {seconds / total:6.1%}   {seconds / args.performs * 1e6:6.0f} µs")
    print(f"top {args.top} functions by own time")
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
