"""The SQLite ledger schema: apply migrations, or check that an existing file is current."""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from effectledger.errors import InvalidInput, NotFound, StorageError
from effectledger.sql import load_statements, migrations, schema
from effectledger.store import announce_migration
from effectledger.store.sqlite_faults import is_busy, translate

__all__ = ["apply_migrations", "check_existing", "statements", "up_to_date"]

_log = logging.getLogger("effectledger.store")


def up_to_date(connection: sqlite3.Connection, own: Mapping[str, str]) -> bool:
    """Whether every migration is applied: the newest, and none missing below it."""
    versions = [version for version, _, _ in migrations("sqlite")]
    try:
        row = connection.execute(own["migrations_applied"]).fetchone()
    except sqlite3.OperationalError:  # no schema_migrations table yet
        return False
    return row is not None and row[0] is not None and tuple(row) >= (versions[-1], len(versions))


def apply_migrations(
    connection: sqlite3.Connection, own: Mapping[str, str], *, replay: bool = False
) -> list[int]:
    """Apply the pending migrations on ``connection``, one ``BEGIN IMMEDIATE`` each.

    ``own`` holds the store's own statements (``store.sql``). Returns the versions applied.

    A new ledger (no migration recorded) gets the current schema (``schema.sql``, which a test
    keeps equal to the migrations replayed) and every migration recorded, in one ``BEGIN
    IMMEDIATE``: one script instead of eighteen. ``replay`` applies each migration in turn even
    then (what that test compares ``schema.sql`` with).
    """
    applied: list[int] = []
    connection.execute(own["migrations_create"])
    existing = connection.execute(own["migration_done"], {"version": 1}).fetchone() is not None
    every = migrations("sqlite")
    if not existing and not replay and _create_current(connection, own, every):
        return [version for version, _, _ in every]
    for version, name, sql in every:
        connection.execute(own["begin_write"])
        try:
            done = connection.execute(own["migration_done"], {"version": version}).fetchone()
            if done is None:
                if existing:  # an upgrade: say so, and how far it got, it may take a while
                    announce_migration(_log, version, name)
                    _run_reporting(connection, version, sql)
                else:
                    for statement in statements(sql):
                        connection.execute(statement)
                connection.execute(
                    own["migration_record"],
                    {"version": version, "name": name, "applied_us": time.time_ns() // 1000},
                )
                applied.append(version)
            connection.execute(own["commit"])
        except BaseException:
            connection.execute(own["rollback"])
            raise
    return applied


@functools.cache
def _current_schema() -> tuple[str, ...]:
    """The statements of ``schema.sql``, split once per process."""
    return tuple(statements(schema("sqlite")))


def _create_current(
    connection: sqlite3.Connection, own: Mapping[str, str], every: list[tuple[int, str, str]]
) -> bool:
    """Give a new ledger the current schema and record every migration, in one ``BEGIN
    IMMEDIATE``; ``False`` (nothing changed) when another connection began the ledger first."""
    connection.execute(own["begin_write"])
    try:
        if connection.execute(own["migration_done"], {"version": 1}).fetchone() is not None:
            connection.execute(own["commit"])
            return False
        for statement in _current_schema():
            connection.execute(statement)
        applied_us = time.time_ns() // 1000
        for version, name, _ in every:
            record = {"version": version, "name": name, "applied_us": applied_us}
            connection.execute(own["migration_record"], record)
        connection.execute(own["commit"])
    except BaseException:
        connection.execute(own["rollback"])
        raise
    return True


_COUNT = load_statements("sqlite", "copy.sql")["copy_count"]
"""How many rows a table holds (the table's name, a word the migration's SQL spelled, filled
in)."""
_COPY = re.compile(r"\s*INSERT\s+INTO\s+(?:main\.)?(\w+)\b[^;]*?\bSELECT\b", re.I | re.S)
"""A statement that copies rows into a table (a rebuild's copy, or a table filled from another)."""


def _run_reporting(connection: sqlite3.Connection, version: int, sql: str) -> None:
    """Run one migration's statements on an existing ledger, saying after each copy how many
    rows it moved, how long it took, and (for a table that held rows before, as a rebuild's
    does) how many rows of the whole migration are copied and about how long the rest takes."""
    script = list(statements(sql))
    targets = [found.group(1) for s in script if (found := _COPY.match(s))]
    expected = {table: _rows(connection, table) for table in dict.fromkeys(targets)}
    total = sum(rows or 0 for rows in expected.values())
    copied = 0
    began = time.monotonic()
    for statement in script:
        found = _COPY.match(statement)
        started = time.monotonic()
        cursor = connection.execute(statement)
        if found is None:
            continue
        table, rows = found.group(1), max(cursor.rowcount, 0)
        took = time.monotonic() - started
        if expected.get(table):
            copied += rows
        elapsed = time.monotonic() - began
        left = (total - copied) * elapsed / copied if copied and total > copied else 0.0
        whole = f"; {copied:,} of {total:,} rows, about {left:.0f} s left" if total else ""
        _log.warning(
            "migration %04d: copied %s rows into %s in %.1f s%s",
            version,
            f"{rows:,}",
            table,
            took,
            whole,
        )


def _rows(connection: sqlite3.Connection, table: str) -> int | None:
    """How many rows ``table`` holds, or ``None`` when it does not exist yet."""
    try:
        row = connection.execute(_COUNT.format(table=f'main."{table}"')).fetchone()
    except sqlite3.OperationalError:
        return None
    return int(row[0])


def check_existing(path: Path, schema_version: Callable[[], Any]) -> None:
    """Raise unless ``path`` is an existing ledger database with the current schema.

    ``schema_version`` reads the stored schema version's row from the file.
    """
    if not path.exists():
        raise NotFound(
            f"no ledger database at {path}; `effectledger migrate` creates one",
            reason="no_database",
        )
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file", reason="not_a_database")
    latest = migrations("sqlite")[-1][0]
    try:
        row = schema_version()
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise translate(exc, f"opening {path}") from exc
        raise InvalidInput(
            f"{path} is not an effectledger database", reason="not_a_database"
        ) from exc
    except sqlite3.DatabaseError as exc:
        raise InvalidInput(f"{path} is not an SQLite database", reason="not_a_database") from exc
    if row is None or row[0] is None or row[0] < latest:
        raise InvalidInput(
            f"the ledger schema of {path} is behind; run `effectledger migrate`",
            reason="schema_behind",
        )


def statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements (triggers contain inner ``;``)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--") and not buffer.strip():
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            if statement:
                yield statement
            buffer = ""
    if buffer.strip():
        raise StorageError("a migration ends with an incomplete statement")
