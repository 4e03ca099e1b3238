"""One PostgreSQL transaction as the ledger sees it: named statements on one cursor.

The store (:mod:`effectledger.store.postgres`) opens and commits the transaction; this module
sends its statements, holding back those whose answer nobody reads so they travel with the
next one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import DictRow

from effectledger.model.operations import Row
from effectledger.store.hashes import storable
from effectledger.store.postgres_copy import Tables

__all__ = ["Queued", "Transaction"]

Queued = tuple[str, Mapping[str, Any] | None]


class Transaction:
    """The statements of one transaction on one cursor.

    Statements whose answer nobody reads (``BEGIN``, a budget's timeouts, :meth:`queue`'s
    locks) wait and go to the server together with the next statement that is answered, in
    one round trip (psycopg's pipeline mode). The server still runs them one by one, in order,
    each under a snapshot of its own (READ COMMITTED): a read sent after a lock in the same
    round trip runs once the lock is granted and sees what was committed before that.
    """

    __slots__ = ("_cursor", "_queries", "_queued")

    def __init__(
        self,
        cursor: psycopg.Cursor[DictRow],
        queries: Mapping[str, str],
        opening: list[Queued],
    ) -> None:
        self._cursor = cursor
        self._queries = queries
        self._queued = opening

    def _execute(self, query: str, params: Mapping[str, Any]) -> psycopg.Cursor[DictRow]:
        if not self._queued:
            return self._cursor.execute(query, params)
        self.flush(query, params)
        return self._cursor

    def flush(self, query: str | None = None, params: Mapping[str, Any] | None = None) -> None:
        """Send what waits (and ``query``, whose answer the cursor then holds) in one round trip.

        An error of any of them is raised here, and the transaction is then aborted.
        """
        queued, self._queued = self._queued, []
        if not queued and query is None:
            return  # nothing waits: no round trip
        connection = self._cursor.connection
        side = connection.cursor()
        with connection.pipeline():
            for statement, values in queued:
                side.execute(statement, values)
            if query is not None:
                self._cursor.execute(query, params)

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        params = storable(params)
        return self._execute(self._queries[name], params).fetchone()

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        params = storable(params)
        return list(self._execute(self._queries[name], params).fetchall())

    def run(self, name: str, params: Mapping[str, Any]) -> int:
        params = storable(params)
        return self._execute(self._queries[name], params).rowcount

    def queue(self, name: str, params: Mapping[str, Any]) -> None:
        params = storable(params)
        self._queued.append((self._queries[name], params))

    def tables(self) -> Tables:
        """Whole-table access to this transaction, for moving a ledger to another store."""
        return Tables(self._cursor)
