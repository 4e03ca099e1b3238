"""The SQLite store's connection pool: a thread borrows a connection per call and gives it back.

Counted twice: by the store's own bookkeeping and by this process's open file descriptors on
the ledger's file (``/proc/self/fd``), which no bookkeeping can hide.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from effectledger import InvalidInput, StorageError
from effectledger.store import open_store
from effectledger.store.sqlite import SQLiteStore
from tests.support.threads import file_descriptors, on_fresh_thread

_LIMIT = {"tenant_id": "acme", "pool": "refunds", "limit_units": 5, "now_us": 1}
_GET = {"tenant_id": "acme", "pool": "refunds"}

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def _limit_row(store: SQLiteStore) -> Any:
    return store.one("capacity_limit_get", _GET)


def test_calls_from_many_fresh_threads_share_one_connection(tmp_path: Path) -> None:
    """Two hundred writes and reads, each on a thread that then ends, leave one connection open."""
    path = tmp_path / "ledger.db"
    store = SQLiteStore(path)
    try:
        assert store.open_connections() == 1  # the one that migrated, kept for the next call
        for number in range(100):
            limit = {**_LIMIT, "limit_units": number + 1}
            on_fresh_thread(
                lambda limit=limit: store.write(lambda tx: tx.run("capacity_limit_set", limit))
            )
            row = on_fresh_thread(lambda: _limit_row(store))
            assert row["limit_units"] == number + 1
        assert store.open_connections() == 1
        assert file_descriptors(path) == file_descriptors(path, "-wal") == 1
    finally:
        store.close()
    assert file_descriptors(path) == 0


def test_calls_at_once_open_what_they_need_and_keep_pool_size(tmp_path: Path) -> None:
    """Sixteen reads held open at once use sixteen connections; afterwards ``pool_size`` stay
    open, and bursts after it open no more file descriptors than the first."""
    path = tmp_path / "ledger.db"
    store = open_store(f"sqlite:///{path}?pool_size=3")
    assert isinstance(store, SQLiteStore)
    try:
        for _ in range(3):
            inside = threading.Barrier(17, timeout=30)
            counted = threading.Event()

            def body(
                tx: Any, inside: threading.Barrier = inside, counted: threading.Event = counted
            ) -> None:
                tx.one("capacity_limit_get", _GET)
                inside.wait()
                counted.wait(timeout=30)

            threads = [threading.Thread(target=store.read, args=(body,)) for _ in range(16)]
            for thread in threads:
                thread.start()
            inside.wait()  # all sixteen are inside their read now, and stay until counted
            try:
                assert store.open_connections() == 16
                assert file_descriptors(path, "-wal") <= 16  # SQLite opens a WAL when it reads
            finally:
                counted.set()
                for thread in threads:
                    thread.join(timeout=30)
            assert store.open_connections() == 3
            assert file_descriptors(path, "-wal") == 3
            # SQLite keeps a closed connection's descriptor on the database file while others
            # hold their shared lock on it, and hands it to the next connection it opens.
            assert file_descriptors(path) <= 16
    finally:
        store.close()
    assert file_descriptors(path) == file_descriptors(path, "-wal") == 0


def test_a_call_inside_a_write_runs_in_that_write(tmp_path: Path) -> None:
    """A read made inside a write's body on its thread sees the write's uncommitted row."""
    store = SQLiteStore(tmp_path / "ledger.db")
    try:

        def body(tx: Any) -> Any:
            tx.run("capacity_limit_set", _LIMIT)
            return _limit_row(store)

        row = store.write(body)
        assert row is not None
        assert row["limit_units"] == 5
        assert store.open_connections() == 1
    finally:
        store.close()


def test_a_connection_given_back_inside_a_transaction_is_closed(tmp_path: Path) -> None:
    """A connection still in a transaction when its call ends is closed, never lent again."""
    path = tmp_path / "ledger.db"
    store = SQLiteStore(path)
    try:
        with store._leased() as connection:
            connection.execute("BEGIN IMMEDIATE")
        assert store.open_connections() == 0
        assert file_descriptors(path) == 0
        store.write(lambda tx: tx.run("capacity_limit_set", _LIMIT))  # a fresh one: no lock held
        assert _limit_row(store)["limit_units"] == 5
    finally:
        store.close()


def test_close_closes_every_connection_and_the_store_opens_again(tmp_path: Path) -> None:
    """``close`` closes idle and lent connections alike; a later call opens a new one."""
    path = tmp_path / "ledger.db"
    store = SQLiteStore(path, pool_size=1)
    held = threading.Event()
    release = threading.Event()
    failed: list[StorageError] = []

    def hold() -> None:
        try:
            store.read(lambda tx: (held.set(), release.wait(timeout=30)))
        except StorageError as exc:  # its connection was closed under it
            failed.append(exc)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(timeout=30)
        assert store.open_connections() == 1  # the one that migrated, lent to the reader
        store.close()
        assert store.open_connections() == 0
        assert file_descriptors(path) == 0
    finally:
        release.set()
        thread.join(timeout=30)
    assert len(failed) == 1
    assert store.open_connections() == 0  # the closed one is not taken back
    store.write(lambda tx: tx.run("capacity_limit_set", _LIMIT))
    assert store.open_connections() == 1
    store.close()


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_bad_pool_size_is_invalid_input(tmp_path: Path, value: str) -> None:
    """A ``pool_size`` that is not a whole number from 1 is refused and creates no file."""
    path = tmp_path / "ledger.db"
    with pytest.raises(InvalidInput) as caught:
        open_store(f"sqlite:///{path}?pool_size={value}")
    assert caught.value.details["field"] == "pool_size"
    assert not path.exists()
