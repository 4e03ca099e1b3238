"""One SQLite write or read transaction: named queries on one connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from effectledger.model.operations import Row
from effectledger.store.hashes import storable
from effectledger.store.sqlite_copy import Tables

__all__ = ["Transaction"]


class Transaction:
    """The named queries of one transaction on one connection (the store begins and ends it)."""

    __slots__ = ("_compound", "_connection", "_queries")

    def tables(self) -> Tables:
        """Whole-table access to this transaction, for moving a ledger to another store."""
        return Tables(self._connection)

    def __init__(
        self,
        connection: sqlite3.Connection,
        queries: Mapping[str, str],
        compound: Mapping[str, tuple[str, ...]],
    ) -> None:
        self._connection = connection
        self._queries = queries
        self._compound = compound

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        params = storable(params)
        if name not in self._compound:  # a membership test, not a call: every statement's path
            row: Row | None = self._connection.execute(self._queries[name], params).fetchone()
            return row
        steps = self._compound[name]
        # A query of several statements answers with its first one, run to its end first.
        rows = self._connection.execute(steps[0], params).fetchall()
        for statement in steps[1:]:
            self._connection.execute(statement, params)
        return rows[0] if rows else None

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        params = storable(params)
        return list(self._connection.execute(self._queries[name], params).fetchall())

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
