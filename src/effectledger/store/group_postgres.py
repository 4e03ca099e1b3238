"""The PostgreSQL batch of a group commit (:mod:`effectledger.store.batching`).

The leader runs every member's body on one pooled connection inside one READ COMMITTED
transaction: one ``COMMIT``, one WAL flush, one round trip for all of them. Each member's
``SAVEPOINT`` (and the previous one's ``RELEASE``) waits to go with its first statement, in the
same round trip (pipeline mode, as ``BEGIN`` does for a lone write). Row and advisory locks a
member takes are held until the batch commits; across processes a lock cycle between two batches
is broken by the server's deadlock detection, which fails one statement: that member is rolled
back to its savepoint and runs alone once its batch has committed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psycopg

from effectledger.sql import load_statements
from effectledger.store.batching import ALONE, FAILED, HELD, GroupCommitter, Member
from effectledger.store.postgres_errors import Lost, translate

if TYPE_CHECKING:
    from effectledger.store.postgres import PostgresStore, _Connection
    from effectledger.store.postgres_transaction import Queued

__all__ = ["committer", "run_batch"]

_GROUP = load_statements("postgres", "group.sql")


class _Abandoned(Exception):
    """The batch's transaction cannot go on (a member's rollback to its savepoint failed)."""


def run_batch(store: PostgresStore, members: list[Member[Any]]) -> bool:
    """Run ``members`` in one transaction and commit it; see :data:`batching.BatchRunner`."""
    from effectledger.store.postgres import _OWN, _rollback

    budgets = [left for member in members if (left := member.left_s()) is not None]
    deadline = None if not budgets else time.monotonic() + max(0.001, min(budgets))
    opening: list[Queued] = store._opening(_OWN["begin_write"])
    if deadline is not None:
        opening = store._begin_write_until(deadline)
    try:
        pool = store._checked_pool()
        if deadline is None:
            connecting = pool.connection()
        else:
            connecting = pool.connection(timeout=min(pool.timeout, deadline - time.monotonic()))
        with connecting as connection:
            try:
                _run_members(store, connection, members, opening)
            except (psycopg.Error, _Abandoned):
                _rollback(connection)
                if connection.broken:
                    store._discard_broken()
                return _all_alone(members)
            except BaseException:
                _rollback(connection)
                raise
            if not any(member.state == HELD for member in members):
                _rollback(connection)
                return True  # every member runs alone; nothing to commit
            try:
                connection.execute(_OWN["commit"])
            except psycopg.Error as exc:
                if not connection.broken:
                    return _all_alone(members)  # the server answered COMMIT: it rolled back
                uncertain = Lost(exc, at_commit=True)
                for member in members:
                    if member.state == HELD:
                        member.value = None
                        member.error = translate(uncertain, member.label)
                        member.state = FAILED
            return True
    except psycopg.Error:  # no connection in time, or one lost before COMMIT: nothing committed
        store._discard_broken()
        return _all_alone(members)


def _run_members(
    store: PostgresStore,
    connection: _Connection,
    members: list[Member[Any]],
    opening: list[Queued],
) -> None:
    from effectledger.store.postgres_transaction import Transaction

    cursor = connection.cursor()
    pending = opening
    for member in members:
        transaction = Transaction(cursor, store._queries, [*pending, (_GROUP["savepoint"], None)])
        try:
            member.value = member.body(transaction)
            transaction.flush()  # anything still waiting belongs to this member
        except Exception as exc:
            if connection.broken:
                raise _Abandoned from exc
            try:
                transaction.flush()  # a body that failed before sending: open its savepoint
            except psycopg.Error as lost:
                if connection.broken:
                    raise _Abandoned from lost
            try:
                cursor.execute(_GROUP["rollback_to"])
            except psycopg.Error as exc:
                raise _Abandoned from exc
            member.value = None
            member.state = ALONE  # nothing of it is kept: its caller runs it alone
        else:
            member.state = HELD
        pending = [(_GROUP["release"], None)]


def _all_alone(members: list[Member[Any]]) -> bool:
    for member in members:
        member.value = None
        member.state = ALONE
    return False


def committer(store: PostgresStore) -> GroupCommitter:
    """The group committer of ``store``: its writes alone, or its batches."""
    return GroupCommitter(store.write, lambda members: run_batch(store, members), by_label=True)
