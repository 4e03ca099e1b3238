"""The PostgreSQL ledger schema: apply migrations, or check that an existing schema is current."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow

from effectledger.errors import InvalidInput, NotFound
from effectledger.sql import load_queries, load_statements, migrations, schema
from effectledger.store import announce_migration
from effectledger.store.postgres_errors import translate
from effectledger.store.postgres_transaction import Queued

__all__ = ["check_existing", "migrate"]

_Connect = Callable[[], psycopg.Connection[DictRow]]
_log = logging.getLogger("effectledger.store")


def migrate(
    connect: _Connect,
    *,
    create_schema: bool,
    local: Sequence[Queued] = (),
    replay: bool = False,
) -> list[int]:
    """Apply pending migrations on a connection of its own; return the versions applied.

    Each migration is one transaction that first takes an advisory lock on the search path, so
    processes that start together apply it once and the others find it recorded. ``local``:
    settings each transaction makes first (behind a transaction pooler, the schema).

    A new ledger (no migration recorded) gets the current schema (``schema.sql``, which a test
    keeps equal to the migrations replayed) and every migration recorded, in one transaction
    under the same lock: one commit instead of one per migration. ``replay`` applies each
    migration in turn even then (what that test compares ``schema.sql`` with).
    """
    own = load_statements("postgres", "store.sql")
    applied: list[int] = []
    existing: bool | None = None  # whether the ledger had a schema before this call
    every = migrations("postgres")
    try:
        with connect() as connection:
            for version, name, script in every:
                with connection.transaction():
                    for statement, values in local:
                        connection.execute(statement, values)
                    connection.execute(own["set_local_lock_timeout_off"])
                    connection.execute(own["migration_lock"])
                    if create_schema:
                        connection.execute(own["schema_create"])
                    connection.execute(own["migrations_create"])
                    if existing is None:
                        done = connection.execute(own["migration_done"], {"version": 1})
                        existing = done.fetchone() is not None
                        if not existing and not replay:
                            connection.execute(schema("postgres").encode())  # one script
                            for number, title, _ in every:
                                record = {"version": number, "name": title}
                                connection.execute(own["migration_record"], record)
                            return [number for number, _, _ in every]
                    if connection.execute(own["migration_done"], {"version": version}).fetchone():
                        continue
                    if existing:  # an upgrade: say so, it may take a while
                        announce_migration(_log, version, name)
                    connection.execute(script)  # no parameters: sent as one script
                    connection.execute(own["migration_record"], {"version": version, "name": name})
                applied.append(version)
    except psycopg.Error as exc:
        raise translate(exc, "migrate") from exc
    return applied


def check_existing(connect: _Connect, schema: str | None, local: Sequence[Queued] = ()) -> None:
    """Raise unless the ledger schema exists and is current; change nothing."""
    latest = migrations("postgres")[-1][0]
    try:
        with connect() as connection, connection.transaction():
            for statement, values in local:
                connection.execute(statement, values)
            row = connection.execute(load_queries("postgres")["schema_version"]).fetchone()
    except pg_errors.UndefinedTable as exc:
        where = f"schema {schema}" if schema else "this database"
        raise NotFound(
            f"no ledger schema in {where}; `effectledger migrate` creates it",
            reason="no_database",
        ) from exc
    except psycopg.Error as exc:
        raise translate(exc, "open") from exc
    if row is None or row["version"] is None or row["version"] < latest:
        raise InvalidInput(
            "the ledger schema is behind; run `effectledger migrate`", reason="schema_behind"
        )
