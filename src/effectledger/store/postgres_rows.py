"""PostgreSQL rows as dicts, their hash columns (``bytea``) read back as hash strings.

The row factory of every connection of the PostgreSQL store: :func:`psycopg.rows.dict_row`
with the columns named in :data:`~effectledger.store.hashes.HASH_COLUMNS` unpacked by
:func:`~effectledger.store.hashes.unpacked`; a result without such a column is dict_row's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.rows import DictRow, RowMaker, dict_row

from effectledger.store.hashes import HASH_COLUMNS, unpacked

__all__ = ["hash_dict_row"]


def hash_dict_row(cursor: Any) -> RowMaker[DictRow]:
    """A row maker for ``cursor``'s result: dicts, hash columns as their strings."""
    make = dict_row(cursor)
    hashed = [
        index
        for index, column in enumerate(cursor.description or ())
        if column.name in HASH_COLUMNS
    ]
    if not hashed:
        return make

    def row(values: Sequence[Any]) -> DictRow:
        found = list(values)
        for index in hashed:
            found[index] = unpacked(found[index])
        return make(found)

    return row
