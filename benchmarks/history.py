"""Does a ``perform`` slow down as the ledger's history grows? Measured beside a raw read.

Run it from the repository root::

    .venv/bin/python benchmarks/history.py [--dir DIR] [--sizes 1000,100000,1000000]
                                           [--timed N] [--replays N] [--caches K1,K2]

One SQLite ledger (``synchronous=OFF``, so the disk's flushes do not hide the statements' own
cost) and a simulated receiver. One approved refund is performed through ``EffectLedger.perform``
and its rows are the template of the history: its proposal, approval, consumption, operation,
attempt and five audit events, each copied with plain SQL (``INSERT ... SELECT`` over a counter)
under fresh ids of the same width, scattered over the key space as random ids are, with the
events sealed into the Merkle log (``log_entries``) as a running worker would have done. That
builds a million operations in minutes. At each size:

* perform: ``--timed`` new refunds, proposed and approved untimed, each ``perform`` timed
  (the first-time path: admission, claim, submit, record);
* replay: ``--replays`` performs of random operations of the history (the replay path);
* raw: a primary-key read of a random operation with plain ``sqlite3`` on the same file, the
  file's own limit at that size;

p50 and p99 in µs, once per page cache of ``--caches`` (``cache_kib`` of the store's URL; by
default SQLite's own 2000 KiB beside the store's default), each over the same file, then the
bytes on disk per operation of every table with its indexes (SQLite's ``dbstat``). Progress
goes to stderr.
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from effectledger import Context, DestinationRef, EffectLedger, OperationState, SimulatedReceiver
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.store.sqlite import CACHE_KIB

AGENT = Context(tenant_id="acme", actor_id="alice")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
# The per-operation tables, in an order that satisfies the approvals' insert trigger.
TABLES = (
    "proposals",
    "audit_events",
    "approvals",
    "approval_consumptions",
    "operations",
    "attempts",
)
ID_COLUMNS = (
    "operation_id",
    "proposal_id",
    "approval_id",
    "attempt_id",
    "event_id",
    "idempotency_key",
    "provider_reference",
)
CHUNK = 50_000
SCATTER = "printf('%08x', (c.n * 2654435761) % 4294967296)"  # a bijection of n below 2**32


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Template:
    """The rows of one real ``perform``, and the SQL that copies them ``n`` times."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.rows: dict[str, list[dict[str, object]]] = {}
        tokens: set[str] = set()
        for table in TABLES:
            cursor = connection.execute(f"SELECT * FROM {table}")
            names = [column[0] for column in cursor.description]
            self.rows[table] = [dict(zip(names, row, strict=True)) for row in cursor]
            for row in self.rows[table]:
                tokens |= {str(row[c]) for c in ID_COLUMNS if row.get(c) is not None}
        self.tokens = sorted(tokens, key=len, reverse=True)
        self.first_us = min(
            int(v)  # type: ignore[call-overload]
            for rows in self.rows.values()
            for row in rows
            for k, v in row.items()
            if k.endswith("_us") and v is not None
        )
        self.events = sorted(self.rows["audit_events"], key=lambda row: int(row["sequence"]))  # type: ignore[call-overload]

    def _text(self, value: str) -> str:
        """SQL for ``value`` with every id in it replaced by copy ``c.n``'s id (same width)."""
        expression = _quote(value)
        for token in self.tokens:
            if token in value:
                head = token.rsplit("-", 1)[0] + "-" if "-" in token else ""
                rest = token[len(head) :]
                fresh = f"{_quote(head)} || {SCATTER} || {_quote(rest[8:])}"
                expression = f"replace({expression}, {_quote(token)}, {fresh})"
        if "ord-0" in value:
            expression = f"replace({expression}, 'ord-0', 'ord-1' || printf('%07d', c.n))"
        return expression

    def _value(self, column: str, value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bytes):  # a hash column: its stored bytes
            return f"X'{value.hex()}'"
        if isinstance(value, str):
            return self._text(value)
        if column == "expires_us":
            return str(value)  # never expired: a replay is a replay, not a refusal
        if column.endswith("_us"):
            return f"{int(value) - self.first_us} + c.n * 1000"  # type: ignore[call-overload]
        return str(value)

    def statements(self) -> list[str]:
        """``INSERT ... SELECT`` statements copying every template row for ``c.n`` in a range."""
        counter = (
            "WITH RECURSIVE c(n) AS (SELECT :low UNION ALL SELECT n + 1 FROM c WHERE n < :high) "
        )
        found = []
        for table in TABLES:
            for row in self.rows[table]:
                columns = ", ".join(row)
                values = ", ".join(self._value(k, v) for k, v in row.items())
                found.append(f"{counter}INSERT INTO {table} ({columns}) SELECT {values} FROM c")
        # The history is sealed: its events sit in the Merkle log, not in log_pending.
        for index, event in enumerate(self.events):
            stored = event["event_hash"]  # hash columns hold bytes since migration 15
            leaf = (
                f"X'{stored[-32:].hex()}'"
                if isinstance(stored, bytes)
                else _quote(str(stored).split(":")[-1])
            )
            found.append(
                f"{counter}INSERT INTO log_entries (tenant_id, position, event_id, leaf_hash, "
                f"sealed_us, operation_id, sequence) "
                f"SELECT 'acme', 1000000000 + c.n * {len(self.events)} + {index}, "
                f"{self._text(str(event['event_id']))}, {leaf}, c.n * 1000, "
                f"{self._text(str(event['operation_id']))}, {int(event['sequence'])} FROM c"
            )
        found.append("DELETE FROM log_pending WHERE pending_id > :keep")
        return found


def _copy(path: Path, template: Template, low: int, high: int, keep: int) -> None:
    """Copy the template for every ``n`` from ``low`` to ``high``, in chunks."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute("PRAGMA cache_size = -262144")
    statements = template.statements()
    start = low
    while start <= high:
        end = min(high, start + CHUNK - 1)
        connection.execute("BEGIN IMMEDIATE")
        for statement in statements:
            connection.execute(statement, {"low": start, "high": end, "keep": keep})
        connection.execute("COMMIT")
        sys.stderr.write(f"  copied {end:,} operations\n")
        start = end + 1
    connection.close()


def _check_sealed(path: Path) -> None:
    """Refuse a history whose log entries are not what the sealer writes: each names the trail
    position it sealed (``operation_id``, ``sequence``) and holds that event's leaf, so the bytes
    per operation count every column and index a running ledger's log holds."""
    connection = sqlite3.connect(path)
    wrong = connection.execute(
        "SELECT count(*) FROM log_entries AS l WHERE NOT EXISTS (SELECT 1 FROM audit_events AS e"
        " WHERE e.tenant_id = l.tenant_id AND e.operation_id = l.operation_id"
        " AND e.sequence = l.sequence AND e.event_id = l.event_id"
        " AND substr(e.event_hash, -32) = l.leaf_hash)"
    ).fetchone()[0]
    connection.close()
    if wrong:
        raise SystemExit(f"{wrong:,} log entries do not name their event's trail position and leaf")


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _raw_reads(path: Path, ids: list[str]) -> list[float]:
    """µs of a primary-key read of each operation with plain sqlite3 on the same file."""
    connection = sqlite3.connect(path)
    query = "SELECT * FROM operations WHERE tenant_id = ? AND operation_id = ?"
    samples = []
    for operation_id in ids:
        started = time.perf_counter_ns()
        connection.execute(query, ("acme", operation_id)).fetchone()
        samples.append((time.perf_counter_ns() - started) / 1000)
    connection.close()
    return samples


def _bytes_per_table(path: Path, operations: int) -> dict[str, float]:
    """Bytes on disk per operation of every table, its indexes included (``dbstat``)."""
    connection = sqlite3.connect(path)
    owner = dict(connection.execute("SELECT name, tbl_name FROM sqlite_master"))
    sizes: dict[str, float] = {}
    for name, size in connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        table = owner.get(name, name)
        sizes[table] = sizes.get(table, 0) + size / operations
    connection.close()
    return sizes


def _copied_ids(template: Template, numbers: list[int], column: str, table: str) -> list[str]:
    """The ids the copies ``numbers`` got in ``column`` of ``table``'s template row."""
    value = str(template.rows[table][0][column])
    head = value.rsplit("-", 1)[0] + "-" if "-" in value else ""
    rest = value[len(head) :]
    return [f"{head}{(n * 2654435761) % 4294967296:08x}{rest[8:]}" for n in numbers]


def _service(path: Path, folder: Path, cache_kib: int) -> EffectLedger:
    """A refund service over the ledger file with a page cache of ``cache_kib`` per connection."""
    store = open_store(f"sqlite:///{path}?synchronous=OFF&cache_kib={cache_kib}")
    receiver = SimulatedReceiver(folder / "receiver.db", synchronous="OFF")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    service = EffectLedger(Ledger(store), destinations=[receiver])
    service.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return service


def _close(service: EffectLedger) -> None:
    service.ledger.store.close()
    for destination in service.destinations.values():
        destination.close()  # type: ignore[attr-defined]


def _measure(
    service: EffectLedger,
    template: Template,
    numbers: list[int],
    timed: int,
    first_order: int,
) -> tuple[list[float], list[float]]:
    """µs of ``timed`` first performs of new refunds, and of replays of operations ``numbers``."""
    first: list[float] = []
    for index in range(timed):
        arguments = {"order_id": f"ord-2{first_order + index:011d}", "amount_minor": 30}
        new = service.propose(AGENT, "refund_order", {**arguments, "currency": "EUR"})
        granted = service.approve(RITA, new.proposal_id, digest=new.digest)
        began = time.perf_counter_ns()
        result = service.perform(AGENT, new.proposal_id, approval=granted.approval_id)
        first.append((time.perf_counter_ns() - began) / 1000)
        if result.state is not OperationState.SUCCEEDED:  # pragma: no cover
            raise SystemExit(f"perform ended {result.state}")
    proposals = _copied_ids(template, numbers, "proposal_id", "proposals")
    approvals = _copied_ids(template, numbers, "approval_id", "approvals")
    replays: list[float] = []
    for proposal_id, approval_id in zip(proposals, approvals, strict=True):
        began = time.perf_counter_ns()
        result = service.perform(AGENT, proposal_id, approval=approval_id)
        replays.append((time.perf_counter_ns() - began) / 1000)
        if result.state is not OperationState.SUCCEEDED:  # pragma: no cover
            raise SystemExit(f"replay found {result.state} ({result.reason})")
    return first, replays


BYTES_PER_OPERATION_TARGET = 4096
"""Bytes on disk per operation at 100,000 operations, at most (issue 31's target: 4 KB)."""


def _template(service: EffectLedger, path: Path) -> tuple[Template, int]:
    """One approved refund performed: its rows as the template, and the sealed pending id."""
    proposal = service.propose(
        AGENT, "refund_order", {"order_id": "ord-0", "amount_minor": 30, "currency": "EUR"}
    )
    approval = service.approve(RITA, proposal.proposal_id, digest=proposal.digest)
    service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    with sqlite3.connect(path) as connection:
        template = Template(connection)
        keep = int(connection.execute("SELECT max(pending_id) FROM log_pending").fetchone()[0])
    connection.close()
    return template, keep


def bytes_per_operation(folder: Path, size: int) -> dict[str, float]:
    """Bytes on disk per operation of each table with its indexes, in a history of ``size``
    operations built as :func:`main` builds it (nothing timed)."""
    path = folder / "bytes-ledger.db"
    service = _service(path, folder, CACHE_KIB)
    try:
        template, keep = _template(service, path)
        _copy(path, template, 1, size - 1, keep)
    finally:
        _close(service)
    _check_sealed(path)
    return _bytes_per_table(path, size)


def main(argv: list[str] | None = None) -> int:
    """Build the history size by size and print perform's and replay's cost beside a raw read."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="folder for the database files (default: temp)")
    parser.add_argument("--sizes", default="1000,100000,1000000", help="history sizes (operations)")
    parser.add_argument("--timed", type=int, default=300, help="timed first performs per size")
    parser.add_argument("--replays", type=int, default=1000, help="timed replays per size")
    parser.add_argument(
        "--caches",
        default=f"2000,{CACHE_KIB}",
        help=f"page caches to compare, KiB per connection (SQLite's default 2000, the store's "
        f"{CACHE_KIB})",
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    caches = [int(cache) for cache in args.caches.split(",")]
    if not sizes or sizes[0] < 2:
        parser.error("give sizes of at least 2 operations")
    folder = Path(tempfile.mkdtemp(prefix="effectledger-history-", dir=args.dir))
    path = folder / "ledger.db"
    services = {cache: _service(path, folder, cache) for cache in caches}
    print(
        f"effectledger history benchmark - Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, synchronous=OFF, "
        f"{args.timed} first performs and {args.replays} random replays per size and cache (µs)"
    )
    rng = random.Random(7)
    try:
        template, keep = _template(services[caches[0]], path)
        print(
            f"{'operations':>10} {'cache KiB':>9}  {'perform p50':>11} {'p99':>7}"
            f"  {'replay p50':>10} {'p99':>7}  {'raw p50':>7} {'p99':>7}  {'build s':>7}"
        )
        made, performed, sizes_seen = 1, 0, []
        for size in sizes:
            started = time.monotonic()
            _copy(path, template, made, size - 1 - performed, keep)
            built = time.monotonic() - started
            _check_sealed(path)
            made = size - performed
            for cache, service in services.items():
                numbers = [rng.randrange(1, made) for _ in range(args.replays)]
                first, replays = _measure(service, template, numbers, args.timed, performed)
                performed += args.timed
                ids = _copied_ids(template, numbers, "operation_id", "operations")
                raw = _raw_reads(path, ids)
                (f50, f99), (r50, r99), (w50, w99) = map(_percentiles, (first, replays, raw))
                print(
                    f"{size:>10} {cache:>9}  {f50:>11.0f} {f99:>7.0f}  {r50:>10.0f} {r99:>7.0f}"
                    f"  {w50:>7.1f} {w99:>7.1f}  {built:>7.1f}"
                )
            sizes_seen.append((size, _bytes_per_table(path, made + performed)))
        print("bytes on disk per operation, by table with its indexes (dbstat):")
        tables = sorted({t for _, sizes_of in sizes_seen for t, b in sizes_of.items() if b >= 1})
        print(f"{'table':>22}" + "".join(f"  {size:>10}" for size, _ in sizes_seen))
        for table in tables:
            row = "".join(f"  {sizes_of.get(table, 0):>10.0f}" for _, sizes_of in sizes_seen)
            print(f"{table:>22}{row}")
        totals = "".join(f"  {sum(sizes_of.values()):>10.0f}" for _, sizes_of in sizes_seen)
        print(f"{'total':>22}{totals}")
    finally:
        for service in services.values():
            _close(service)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
