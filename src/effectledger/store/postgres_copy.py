"""Whole-table access to a PostgreSQL ledger, for moving it to another store.

Used by :mod:`effectledger.store.copying` (``effectledger migrate --from/--to``) through
``Transaction.tables()``; its statements are in ``sql/postgres/copy.sql``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from effectledger.sql import load_statements
from effectledger.store.hashes import pack_row

__all__ = ["Tables"]

_COPY = load_statements("postgres", "copy.sql")


def _names(names: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(name) for name in names)


class Tables:
    """Whole-table reads and writes for moving a ledger (:mod:`effectledger.store.copying`)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[DictRow]) -> None:
        self._cursor = cursor

    def _fill(self, name: str, **parts: sql.Composable) -> sql.Composed:
        return sql.SQL(_COPY[name]).format(**parts)

    def tables(self) -> list[str]:
        return [str(row["name"]) for row in self._cursor.execute(_COPY["copy_tables"])]

    def columns(self, table: str) -> list[str]:
        rows = self._cursor.execute(_COPY["copy_columns"], {"table": table}).fetchall()
        return [str(row["name"]) for row in rows]

    def count(self, table: str) -> int:
        row = self._cursor.execute(self._fill("copy_count", table=sql.Identifier(table)))
        found = row.fetchone()
        return 0 if found is None else int(found["n"])

    def page(
        self,
        table: str,
        columns: Sequence[str],
        order: Sequence[str],
        after: Sequence[Any] | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        names = {"table": sql.Identifier(table), "columns": _names(columns), "order": _names(order)}
        params: dict[str, Any] = {"limit": limit}
        if after is None:
            statement = self._fill("copy_first", **names)
        else:
            marks = sql.SQL(", ").join(sql.Placeholder(f"k{index}") for index in range(len(after)))
            statement = self._fill("copy_after", after=marks, **names)
            params.update({f"k{index}": value for index, value in enumerate(after)})
        return [tuple(row.values()) for row in self._cursor.execute(statement, params)]

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        statement = self._fill(
            "copy_insert",
            table=sql.Identifier(table),
            columns=_names(columns),
            values=sql.SQL(", ").join(sql.Placeholder() for _ in columns),
        )
        self._cursor.executemany(statement, [pack_row(columns, row) for row in rows])

    def clear(self, table: str) -> None:
        self._cursor.execute(self._fill("copy_clear", table=sql.Identifier(table)))
