"""The SQLite batch of a group commit (:mod:`effectledger.store.batching`).

The leader runs every member's body on the connection it borrows for the batch (opened with
``check_same_thread=False``) inside one ``BEGIN IMMEDIATE``: the file's one write lock is taken
once for the batch, and its one ``COMMIT`` is one WAL append and one fsync for all of them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any

from effectledger.sql import load_statements
from effectledger.store.batching import ALONE, HELD, GroupCommitter, Member
from effectledger.store.sqlite_transaction import Transaction

if TYPE_CHECKING:
    from effectledger.store.sqlite import SQLiteStore

__all__ = ["committer", "run_batch"]

_GROUP = load_statements("sqlite", "group.sql")


class _Abandoned(Exception):
    """The batch's transaction ended under a member (SQLite rolled it back whole)."""


def run_batch(store: SQLiteStore, members: list[Member[Any]]) -> bool:
    """Run ``members`` in one transaction and commit it; see :data:`batching.BatchRunner`."""
    entry = store._borrow()
    try:
        if entry.read_only:
            return _all_alone(members)  # each is refused alone, with the usual error
        return _run(store, entry.connection, members)
    finally:
        store._give_back(entry)


def _run(store: SQLiteStore, connection: sqlite3.Connection, members: list[Member[Any]]) -> bool:
    own = store._own
    budgets = [left for member in members if (left := member.left_s()) is not None]
    timeout_ms = store.busy_timeout_ms
    if budgets:  # wait for the lock no longer than the tightest budget allows
        timeout_ms = max(1, min(timeout_ms, int(min(budgets) * 1000)))
    try:
        if timeout_ms != store.busy_timeout_ms:
            store._set_busy_timeout(connection, timeout_ms)
        connection.execute(own["begin_write"])
        for member in members:
            connection.execute(_GROUP["savepoint"])
            try:
                member.value = member.body(
                    Transaction(connection, store._queries, store._compound, store._columns)
                )
            except Exception:
                if not connection.in_transaction:
                    raise _Abandoned from None
                connection.execute(_GROUP["rollback_to"])
                connection.execute(_GROUP["release"])
                member.state = ALONE  # nothing of it is kept: its caller runs it alone
                continue
            connection.execute(_GROUP["release"])
            member.state = HELD
        connection.execute(own["commit"])
    except (sqlite3.Error, _Abandoned):
        _rollback(connection, own["rollback"])
        return _all_alone(members)  # nothing was committed: each runs alone, with its retries
    except BaseException:
        _rollback(connection, own["rollback"])
        raise
    finally:
        if timeout_ms != store.busy_timeout_ms:
            with contextlib.suppress(sqlite3.Error):
                store._set_busy_timeout(connection, store.busy_timeout_ms)
    return True


def _rollback(connection: sqlite3.Connection, rollback: str) -> None:
    if connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.execute(rollback)


def _all_alone(members: list[Member[Any]]) -> bool:
    for member in members:
        member.value = None
        member.state = ALONE
    return False


def committer(store: SQLiteStore) -> GroupCommitter:
    """The group committer of ``store``: its writes alone, or its batches."""
    return GroupCommitter(store.write, lambda members: run_batch(store, members))
