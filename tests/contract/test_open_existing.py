"""Opening an existing ledger or receiver without creating one: ``create=False``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from effectledger import Context, InvalidInput, NotFound, SimulatedReceiver
from effectledger.ledger import Ledger
from effectledger.store import open_store
from tests.conftest import admit, run_sql


def test_open_without_create_refuses_a_missing_store_and_creates_nothing(
    store_url: str, tmp_path: Path
) -> None:
    """A missing SQLite file or PostgreSQL schema raises NotFound (reason no_database), and a
    later migrating open finds no schema_migrations rows: nothing was created."""
    with pytest.raises(NotFound) as raised:
        open_store(store_url, create=False)
    assert raised.value.details["reason"] == "no_database"
    assert list(tmp_path.iterdir()) == []
    store = open_store(store_url, migrate=False)
    try:
        assert store.migrate()  # every migration was still pending
    finally:
        store.close()


def test_open_without_create_reads_an_existing_ledger(
    store_url: str, receiver: SimulatedReceiver, context: Context
) -> None:
    """An existing, current ledger opens with create=False and shows its operations."""
    store = open_store(store_url)
    admit(Ledger(store), context, receiver)
    store.close()
    existing = open_store(store_url, create=False)
    try:
        assert [op.operation_id for op in Ledger(existing).list_operations(context)] == ["op-1"]
    finally:
        existing.close()


@pytest.mark.slow
def test_sixteen_threads_opening_an_existing_ledger_at_once_all_open_it(
    store_url: str, receiver: SimulatedReceiver, context: Context
) -> None:
    """16 threads opening, reading and closing one existing ledger again and again all succeed:
    an opener waits out another's moment of locking (SQLite's WAL recovery and checkpoint on
    the last close) instead of failing busy, and the ledger still holds its one operation."""
    store = open_store(store_url)
    admit(Ledger(store), context, receiver)
    store.close()
    failures: list[str] = []
    seen: list[int] = []

    def open_and_read() -> None:
        for _ in range(20):
            try:
                opened = open_store(store_url, create=False)
                try:
                    seen.append(len(Ledger(opened).list_operations(context)))
                finally:
                    opened.close()
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=open_and_read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert seen == [1] * 320


def test_open_without_create_refuses_a_schema_behind_and_leaves_it(store_url: str) -> None:
    """A ledger missing its newest migration raises InvalidInput (schema_behind) and is not
    migrated by the refused open."""
    open_store(store_url).close()
    versions = sorted(row[0] for row in run_sql(store_url, "SELECT version FROM schema_migrations"))
    run_sql(store_url, "DELETE FROM schema_migrations WHERE version = ?", (versions[-1],))
    with pytest.raises(InvalidInput) as raised:
        open_store(store_url, create=False)
    assert raised.value.details["reason"] == "schema_behind"
    assert run_sql(store_url, "SELECT max(version) FROM schema_migrations")[0][0] == versions[-2]


def test_a_receiver_opened_without_create_must_exist(tmp_path: Path) -> None:
    """SimulatedReceiver(create=False) refuses a missing path, a folder and a non-receiver file
    without creating anything, and opens an existing receiver with its counts."""
    with pytest.raises(NotFound):
        SimulatedReceiver(tmp_path / "missing.db", create=False)
    with pytest.raises(InvalidInput):
        SimulatedReceiver(tmp_path, create=False)
    other = tmp_path / "other.db"
    other.write_bytes(b"not a database at all" * 100)
    with pytest.raises(InvalidInput):
        SimulatedReceiver(other, create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]
    SimulatedReceiver(tmp_path / "receiver.db").close()
    existing = SimulatedReceiver(tmp_path / "receiver.db", create=False)
    try:
        assert existing.counts().effects == 0
    finally:
        existing.close()
