"""Hash columns hold bytes (migration 15); a ledger written before it converts exactly.

A ledger is written at migration 14 the way the code before it wrote one: every hash column
holding its hex text. Its rows are those of a real history (proposals, approvals, performs,
a sealed Merkle log with signed checkpoints), read from a current ledger. Migration 15 then
packs the hashes: every row reads back as it was, the columns hold 32 or 33 bytes, and the
migrated ledger exports the same bundle, byte for byte, which verifies.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

import effectledger.store.postgres_schema
import effectledger.store.sqlite_schema
from effectledger import Context, ManualClock, SimulatedReceiver, SubmitMode
from effectledger.audit.bundles.export import export_log
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.ledger import Ledger
from effectledger.sql import migrations
from effectledger.store import Store, open_store
from effectledger.store.copying import RENUMBERED, TABLES, access
from effectledger.store.hashes import HASH_COLUMNS, pack_hash, unpack_hash
from tests.conftest import STORE_OPTIONS, make_store_url
from tests.races.world import AGENT, REFUND_30, approver, build, close
from tests.support.evidence import SIGNER, VERIFIER_KEY, make_history

Rows = dict[str, tuple[list[str], list[tuple[Any, ...]]]]
HASHED = {
    "operations": ("fingerprint", "last_event_hash"),
    "audit_events": ("prev_hash", "event_hash"),
    "proposals": ("digest",),
    "approvals": ("digest",),
    "log_entries": ("leaf_hash",),
}


def _every_row(store: Store) -> Rows:
    """Every table's columns and rows, in key order, as the store reads them."""

    def read(tx: Any) -> Rows:
        tables = access(tx)
        found: Rows = {}
        for table, order in TABLES:
            if table in LATER_TABLES:
                continue
            columns = [name for name in tables.columns(table) if name != RENUMBERED.get(table)]
            selected = list(order) + [name for name in columns if name not in order]
            found[table] = (selected, tables.page(table, selected, order, None, 1_000_000))
        return found

    return store.read(read)


@pytest.fixture
def history(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Store]:
    """A current ledger: refunds proposed, approved and performed (one accepted, one rejected,
    one lost), then the evidence tests' history of 12 events, every event sealed."""
    service = build(store_url, tmp_path)
    receiver = next(iter(service.destinations.values()))
    for order, mode in enumerate(
        (SubmitMode.ACCEPT, SubmitMode.PERMANENT_REJECT, SubmitMode.LOSE_REQUEST)
    ):
        proposal = service.propose(AGENT, "refund_order", {**REFUND_30, "order_id": f"ord-{order}"})
        approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
        receiver.submit_mode = mode  # type: ignore[attr-defined]
        service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    store = service.ledger.store
    other = SimulatedReceiver(tmp_path / "other.db")
    make_history(Ledger(store, clock=clock), other, Context(tenant_id="acme", actor_id="agent"))
    LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    yield store
    other.close()
    close(service)


def _at_migration_14(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Create the store of ``url`` with the migrations up to 14 only, as the code before had."""
    with monkeypatch.context() as patch:
        for module in (effectledger.store.sqlite_schema, effectledger.store.postgres_schema):
            patch.setattr(
                module, "migrations", lambda dialect: [m for m in migrations(dialect) if m[0] <= 14]
            )
        store = open_store(url, migrate=False)
        try:  # one by one, as then: not today's schema.sql
            store.migrate(replay=True)
        finally:
            store.close()


def _writer(url: str) -> Iterator[Callable[[str, Sequence[str], list[tuple[Any, ...]]], None]]:
    """A function inserting rows straight through the driver, as the code before wrote them."""
    if url.startswith("sqlite:"):
        connection = sqlite3.connect(urlsplit(url).path[1:], isolation_level=None)

        def sqlite_insert(table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
            if table in RENUMBERED:
                connection.execute(f"DELETE FROM {table}")
            marks = ", ".join("?" for _ in columns)
            if rows:
                connection.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
                )

        yield sqlite_insert
        connection.close()
        return
    import psycopg

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    for option in STORE_OPTIONS:  # the store's own options, not libpq's
        query.pop(option, None)
    with psycopg.connect(urlunsplit(parts._replace(query=urlencode(query)))) as connection:
        connection.execute("SELECT set_config('search_path', %s, false)", (schema,))

        def postgres_insert(
            table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]
        ) -> None:
            if table in RENUMBERED:
                connection.execute(f"DELETE FROM {table}".encode())
            marks = ", ".join("%s" for _ in columns)
            statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            if rows:
                with connection.cursor() as cursor:
                    cursor.executemany(statement.encode(), rows)

        yield postgres_insert


LATER = {"log_entries": ("operation_id", "sequence"), "proposals": ("stated_reason",)}
"""Columns a later migration added (16: the position each entry sealed, filled in from events;
18: the agent's stated reason)."""
LATER_TABLES = frozenset({"operation_traces"})
"""Tables a later migration added (17: admission traces, telemetry, not compared here)."""


def _write_as_text(url: str, rows: Rows, edit: Callable[[str, dict[str, Any]], None]) -> None:
    """Write ``rows`` into the migration-14 store of ``url``, every hash as its hex text."""
    for write in _writer(url):
        for table, (columns, found) in rows.items():
            kept = [
                name
                for name in columns
                if name != RENUMBERED.get(table) and name not in LATER.get(table, ())
            ]
            texts = []
            for row in found:
                values = dict(zip(columns, row, strict=True))
                assert all(type(values[name]) is str for name in HASHED.get(table, ()))
                edit(table, values)
                texts.append(tuple(values[name] for name in kept))
            if texts or table in RENUMBERED:
                write(table, kept, texts)


def _stored_hashes(url: str) -> list[tuple[str, str, object]]:
    """``(table, column, raw value)`` of every hash column, read around the store."""
    found: list[tuple[str, str, object]] = []
    for table, columns in HASHED.items():
        for column in columns:
            statement = f"SELECT {column} FROM {table}"
            if url.startswith("sqlite:"):
                with sqlite3.connect(urlsplit(url).path[1:]) as connection:
                    values = [row[0] for row in connection.execute(statement)]
                connection.close()
            else:
                from tests.conftest import run_sql

                values = [row[0] for row in run_sql(url, statement)]
            found.extend((table, column, value) for value in values)
    return found


def test_a_ledger_written_before_migration_15_converts_exactly(
    history: Store,
    backend: str,
    tmp_path: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every row of a migration-14 ledger reads back as it was once its hashes are bytes; the
    columns hold 32 or 33 bytes and the ledger exports the same bundle, which verifies."""
    rows = _every_row(history)
    assert len(rows["proposals"][1]) == len(rows["approvals"][1]) == 3
    assert len(rows["log_entries"][1]) == len(rows["audit_events"][1]) > 12
    before = tmp_path / "before.jsonl"
    export_log(history, "acme", before, clock=clock)
    old = tmp_path / "old"
    old.mkdir()
    url = make_store_url(backend, old)
    _at_migration_14(url, monkeypatch)
    _write_as_text(url, rows, lambda table, values: None)
    assert all(type(value) is str for _, _, value in _stored_hashes(url))  # as it was written

    migrated = open_store(url)
    try:
        assert _every_row(migrated) == rows
        stored = _stored_hashes(url)
        assert len(stored) == sum(len(rows[t][1]) * len(c) for t, c in HASHED.items())
        for table, column, value in stored:
            raw = bytes(value)  # type: ignore[arg-type]
            assert len(raw) in (32, 33), (table, column, raw)
            assert pack_hash(unpack_hash(raw)) == raw
        after = tmp_path / "after.jsonl"
        export_log(migrated, "acme", after, clock=clock)
        assert after.read_bytes() == before.read_bytes()
        assert verify_bundle(after, [VERIFIER_KEY]).ok
    finally:
        migrated.close()


def test_hash_text_the_ledger_did_not_write_survives_migration_15(
    history: Store, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand-edited hash that is not hex reads back as the same text after the migration."""
    rows = _every_row(history)
    edited = {}

    def edit(table: str, values: dict[str, Any]) -> None:
        if table == "audit_events" and not edited:
            values["event_hash"] = "v2:edited by hand"
            edited[values["event_id"]] = values["event_hash"]

    old = tmp_path / "old"
    old.mkdir()
    url = make_store_url(backend, old)
    _at_migration_14(url, monkeypatch)
    _write_as_text(url, rows, edit)
    migrated = open_store(url)
    try:
        columns, found = _every_row(migrated)["audit_events"]
        events = {row[columns.index("event_id")]: row for row in found}
        ((event_id, text),) = edited.items()
        assert events[event_id][columns.index("event_hash")] == text
        assert len(found) == len(rows["audit_events"][1])
    finally:
        migrated.close()


def test_hash_columns_are_named_alike_in_every_table() -> None:
    """Every hash column the migration converts is one the stores read back as a string."""
    assert {column for columns in HASHED.values() for column in columns} <= HASH_COLUMNS


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # SQLite's rebuild only
def test_the_sqlite_rebuild_reports_rows_copied_and_the_time_left(
    history: Store,
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Upgrading a migration-14 SQLite ledger says, after each table migration 15 rebuilds, how
    many rows it copied (each table's own count), how many of the whole rebuild are done and
    about how long the rest takes, ending with every row copied."""
    import logging

    rows = _every_row(history)
    old = tmp_path / "old"
    old.mkdir()
    url = make_store_url(backend, old)
    _at_migration_14(url, monkeypatch)
    _write_as_text(url, rows, lambda table, values: None)
    with caplog.at_level(logging.WARNING, logger="effectledger.store"):
        open_store(url).close()
    said = [r.getMessage() for r in caplog.records if r.name == "effectledger.store"]
    copies = [line for line in said if line.startswith("migration 0015: copied")]
    copied = {line.split(" rows into ")[1].split(" ")[0]: line for line in copies}
    rebuilt = ("operations", "audit_events", "proposals", "approvals", "log_entries")
    total = sum(len(rows[table][1]) for table in rebuilt)
    for table in rebuilt:
        count = len(rows[table][1])
        assert copied[table].startswith(f"migration 0015: copied {count:,} rows into {table} in ")
    assert copies[-1].endswith(f"; {total:,} of {total:,} rows, about 0 s left")
    assert said[0].startswith("applying schema migration 0015 (hash_bytes)")
