"""Whole-table access to an SQLite ledger, for moving it to another store.

:mod:`effectledger.store.copying` (``effectledger migrate --from/--to``) reads and writes every
table through this, inside one of the store's transactions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from effectledger.sql import load_statements
from effectledger.store.hashes import pack_row

__all__ = ["Tables"]

_COPY = load_statements("sqlite", "copy.sql")


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)  # names checked by store.copying


class Tables:
    """Whole-table reads and writes for moving a ledger (:mod:`effectledger.store.copying`)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def tables(self) -> list[str]:
        return [str(row[0]) for row in self._connection.execute(_COPY["copy_tables"])]

    def columns(self, table: str) -> list[str]:
        rows = self._connection.execute(_COPY["copy_columns"], {"table": table})
        return [str(row[0]) for row in rows]

    def count(self, table: str) -> int:
        row = self._connection.execute(_COPY["copy_count"].format(table=_quoted([table])))
        return int(row.fetchone()[0])

    def page(
        self,
        table: str,
        columns: Sequence[str],
        order: Sequence[str],
        after: Sequence[Any] | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        names = {"table": _quoted([table]), "columns": _quoted(columns), "order": _quoted(order)}
        params: dict[str, Any] = {"limit": limit}
        if after is None:
            statement = _COPY["copy_first"].format(**names)
        else:
            marks = ", ".join(f":k{index}" for index in range(len(after)))
            statement = _COPY["copy_after"].format(after=marks, **names)
            params.update({f"k{index}": value for index, value in enumerate(after)})
        return [tuple(row) for row in self._connection.execute(statement, params)]

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        statement = _COPY["copy_insert"].format(
            table=_quoted([table]),
            columns=_quoted(columns),
            values=", ".join("?" for _ in columns),
        )
        self._connection.executemany(statement, [pack_row(columns, row) for row in rows])

    def clear(self, table: str) -> None:
        self._connection.execute(_COPY["copy_clear"].format(table=_quoted([table])))
