"""One SQLite write or read transaction: named queries on one connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from effectledger.model.operations import Row
from effectledger.store.hashes import storable
from effectledger.store.sqlite_copy import Tables

__all__ = ["Transaction"]


def _columns(
    cursor: sqlite3.Cursor, statement: str, names: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The column names of ``statement``'s answer on ``cursor``, kept in ``names`` for next time."""
    found = names[statement] = tuple(column[0] for column in cursor.description)
    return found


class Transaction:
    """The named queries of one transaction on one connection (the store begins and ends it)."""

    __slots__ = ("_columns", "_compound", "_connection", "_queries")

    def tables(self) -> Tables:
        """Whole-table access to this transaction, for moving a ledger to another store."""
        return Tables(self._connection)

    def __init__(
        self,
        connection: sqlite3.Connection,
        queries: Mapping[str, str],
        compound: Mapping[str, tuple[str, ...]],
        columns: dict[str, tuple[str, ...]],
    ) -> None:
        self._connection = connection
        self._queries = queries
        self._compound = compound
        self._columns = columns  # the store's: each statement's column names, by its text

    # Rows are answered as dictionaries, as PostgreSQL's are: the driver's own row finds a
    # column by name by comparing it with every name before it, and the ledger reads the columns
    # of a trail's events and of an operation by name many times (docs/scaling.md, "Columns by
    # name cost their position"). The cursor answers plain tuples; each statement's names are
    # learned once per store (one database, one schema).

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        params = storable(params)
        if name not in self._compound:  # a membership test, not a call: every statement's path
            statement = self._queries[name]
            cursor = self._connection.execute(statement, params)
            cursor.row_factory = None
            found = cursor.fetchone()
        else:
            steps = self._compound[name]
            # A query of several statements answers with its first one, run to its end first.
            statement = steps[0]
            cursor = self._connection.execute(statement, params)
            cursor.row_factory = None
            rows = cursor.fetchall()
            for step in steps[1:]:
                self._connection.execute(step, params)
            found = rows[0] if rows else None
        if found is None:
            return None
        try:
            names = self._columns[statement]
        except KeyError:
            names = _columns(cursor, statement, self._columns)
        return dict(zip(names, found, strict=True))

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        params = storable(params)
        statement = self._queries[name]
        cursor = self._connection.execute(statement, params)
        cursor.row_factory = None
        found = cursor.fetchall()
        if not found:
            return []
        try:
            names = self._columns[statement]
        except KeyError:
            names = _columns(cursor, statement, self._columns)
        return [dict(zip(names, row, strict=True)) for row in found]

    def run(self, name: str, params: Mapping[str, Any]) -> int:
        params = storable(params)
        if name not in self._compound:
            return self._connection.execute(self._queries[name], params).rowcount
        steps = self._compound[name]
        count = 0
        for statement in steps:  # a query of several statements counts its last one
            count = self._connection.execute(statement, params).rowcount
        return count

    def queue(self, name: str, params: Mapping[str, Any]) -> None:
        if name in self._compound and not self._compound[name]:
            return  # no statement (a lock BEGIN IMMEDIATE holds)
        self.run(name, params)  # in process: nothing to save by waiting
