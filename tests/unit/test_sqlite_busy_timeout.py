"""A write's time budget on SQLite: the lock is waited for no longer than the budget left.

The budget is the connection's busy timeout while the write runs, and the store's own timeout
is back afterwards; a budget at least as long as that timeout changes nothing, so no statement
sets it. The settings are read back from SQLite itself (``PRAGMA busy_timeout``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from effectledger import StorageBusy
from effectledger.store.sqlite import SQLiteStore

_LIMIT = {"tenant_id": "acme", "pool": "refunds", "limit_units": 5, "now_us": 1}


def _timeout(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA busy_timeout").fetchone()[0])


def _pragmas(store: SQLiteStore, budget_s: float | None) -> tuple[list[str], int, int]:
    """The PRAGMAs one write sends, the timeout inside its body and the one after it."""
    sent: list[str] = []
    inside: list[int] = []
    with store._leased() as connection:  # the write runs on the connection this thread holds
        connection.set_trace_callback(sent.append)
        try:
            store.write(lambda tx: inside.append(_timeout(connection)), budget_s=budget_s)
        finally:
            connection.set_trace_callback(None)
        after = _timeout(connection)
    pragmas = [text for text in sent if text.startswith("PRAGMA busy_timeout =")]
    return pragmas, inside[0], after


def test_a_short_budget_bounds_the_wait_and_the_store_timeout_comes_back(tmp_path: Path) -> None:
    """A 1 s budget under a 5 s timeout waits at most about 1 s, then 5 s holds again."""
    store = SQLiteStore(tmp_path / "ledger.db", busy_timeout_ms=5000)
    try:
        pragmas, inside, after = _pragmas(store, 1.0)
        assert 0 < inside <= 1000
        assert after == 5000
        assert len(pragmas) == 2
    finally:
        store.close()


def test_a_budget_longer_than_the_timeout_sets_nothing(tmp_path: Path) -> None:
    """A budget the store's own timeout already fits within sends no PRAGMA at all."""
    store = SQLiteStore(tmp_path / "ledger.db", busy_timeout_ms=500)
    try:
        for budget in (10.0, None, 10.0):
            pragmas, inside, after = _pragmas(store, budget)
            assert (pragmas, inside, after) == ([], 500, 500)
    finally:
        store.close()


def test_a_budgeted_write_that_finds_the_file_locked_writes_nothing(tmp_path: Path) -> None:
    """Another connection holding the write lock: StorageBusy, no row, the timeout restored."""
    store = SQLiteStore(tmp_path / "ledger.db", busy_timeout_ms=5000, max_attempts=1)
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StorageBusy):
            store.write(
                lambda tx: tx.run("capacity_limit_set", _LIMIT), label="limit", budget_s=0.05
            )
        holder.execute("ROLLBACK")
        with store._leased() as connection:
            assert _timeout(connection) == 5000
            assert connection.execute("SELECT count(*) FROM capacity_limits").fetchone()[0] == 0
    finally:
        holder.close()
        store.close()
