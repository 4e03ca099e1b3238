"""SQL as data: the same named queries in every dialect, and migrations that equal schema.sql."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from effectledger.sql import DIALECTS, load_queries, migrations, schema
from effectledger.store import open_store
from effectledger.store.postgres import PostgresStore
from effectledger.store.sqlite import SQLiteStore
from tests.conftest import drop_postgres_schema, postgres_schema, require_postgres, with_options

_SQLITE_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_POSTGRES_PARAMETER = re.compile(r"%\(([a-z_][a-z0-9_]*)\)s")
_PARAMETERS = {"sqlite": _SQLITE_PARAMETER, "postgres": _POSTGRES_PARAMETER}
_QUERY_USE = re.compile(r"\.(?:one|all|run)\(\s*\"([a-z_][a-z0-9_]*)\"")


def _parameters(dialect: str, statement: str) -> set[str]:
    return set(_PARAMETERS[dialect].findall(statement))


def test_every_named_query_exists_in_every_dialect() -> None:
    """Both dialects define exactly the same set of named queries."""
    names = {dialect: set(load_queries(dialect)) for dialect in DIALECTS}
    assert names["sqlite"] == names["postgres"]


def test_named_queries_take_the_same_parameters_in_every_dialect() -> None:
    """A named query binds the same parameter names whichever dialect runs it.

    A query SQLite has nothing to run for (a lock that ``BEGIN IMMEDIATE`` already holds) is
    empty there and binds nothing.
    """
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    empty = {name for name, statement in sqlite.items() if not statement}
    assert empty == {"advisory_lock", "capacity_totals_lock"}
    for name, statement in sqlite.items():
        if name not in empty:
            assert _parameters("sqlite", statement) == _parameters("postgres", postgres[name]), name


def test_every_query_the_code_runs_is_defined() -> None:
    """Every query name the package runs by name is defined (for every dialect)."""
    package = resources.files("effectledger")
    used: set[str] = set()
    for path in Path(str(package)).rglob("*.py"):
        used |= set(_QUERY_USE.findall(path.read_text("utf-8")))
    assert used, "no query uses found: the pattern is stale"
    for dialect in DIALECTS:
        assert used <= set(load_queries(dialect)), dialect


def test_migrations_are_numbered_alike_in_every_dialect() -> None:
    """Both dialects have the same migrations, by number and name."""
    listed = {d: [(v, n) for v, n, _ in migrations(d)] for d in DIALECTS}
    assert listed["sqlite"] == listed["postgres"]


# -- SQLite ------------------------------------------------------------------------------


def _sqlite_description(path: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' AND tbl_name != 'schema_migrations' ORDER BY name"
        ).fetchall()
    connection.close()
    return [(kind, name, table, " ".join((text or "").split())) for kind, name, table, text in rows]


def test_sqlite_migrations_replay_to_schema_sql(tmp_path: Path) -> None:
    """Replaying every SQLite migration gives exactly the objects of schema.sql, and so does a
    new ledger, which gets schema.sql in one transaction with every migration recorded."""
    migrated, declared, fresh = (tmp_path / f"{name}.db" for name in ("old", "declared", "new"))
    replayed = SQLiteStore.from_url(f"sqlite:///{migrated}", migrate=False)
    try:
        assert replayed.migrate(replay=True) == [version for version, _, _ in migrations("sqlite")]
    finally:
        replayed.close()
    with sqlite3.connect(declared) as connection:
        connection.executescript(schema("sqlite"))
    connection.close()
    assert _sqlite_description(migrated) == _sqlite_description(declared)
    assert len(_sqlite_description(declared)) >= 9
    open_store(f"sqlite:///{fresh}").close()
    assert _sqlite_description(fresh) == _sqlite_description(declared)
    recorded = "SELECT version, name FROM schema_migrations ORDER BY version"
    with sqlite3.connect(fresh) as one, sqlite3.connect(migrated) as other:
        assert one.execute(recorded).fetchall() == other.execute(recorded).fetchall()
    one.close()
    other.close()


# -- PostgreSQL --------------------------------------------------------------------------

_DESCRIBE = {
    "columns": """
        SELECT table_name, column_name, ordinal_position, data_type, is_nullable,
               column_default
        FROM information_schema.columns
        WHERE table_schema = %(schema)s AND table_name != 'schema_migrations'
        ORDER BY table_name, ordinal_position""",
    "constraints": """
        SELECT rel.relname, con.conname, con.contype,
               replace(pg_get_constraintdef(con.oid), %(schema)s || '.', '')
        FROM pg_constraint AS con
        JOIN pg_class AS rel ON rel.oid = con.conrelid
        JOIN pg_namespace AS ns ON ns.oid = rel.relnamespace
        WHERE ns.nspname = %(schema)s AND rel.relname != 'schema_migrations'
        ORDER BY rel.relname, con.conname""",
    "indexes": """
        SELECT tablename, indexname, replace(indexdef, %(schema)s || '.', '')
        FROM pg_indexes
        WHERE schemaname = %(schema)s AND tablename != 'schema_migrations'
        ORDER BY tablename, indexname""",
    "triggers": """
        SELECT rel.relname, trg.tgname,
               replace(pg_get_triggerdef(trg.oid), %(schema)s || '.', '')
        FROM pg_trigger AS trg
        JOIN pg_class AS rel ON rel.oid = trg.tgrelid
        JOIN pg_namespace AS ns ON ns.oid = rel.relnamespace
        WHERE ns.nspname = %(schema)s AND NOT trg.tgisinternal
        ORDER BY rel.relname, trg.tgname""",
    "functions": """
        SELECT proc.proname, pg_get_function_result(proc.oid), proc.prosrc
        FROM pg_proc AS proc
        JOIN pg_namespace AS ns ON ns.oid = proc.pronamespace
        WHERE ns.nspname = %(schema)s
        ORDER BY proc.proname""",
}


def _postgres_description(url: str, schema_name: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as connection:
        return {
            part: connection.execute(query, {"schema": schema_name}).fetchall()
            for part, query in _DESCRIBE.items()
        }


@pytest.fixture
def two_schemas(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """The server URL and two fresh schema names, dropped afterwards."""
    base = require_postgres()
    migrated = postgres_schema(tmp_path / "migrated")
    declared = postgres_schema(tmp_path / "declared")
    yield base, migrated, declared
    for name in (migrated, declared):
        drop_postgres_schema(name)


@pytest.mark.postgres
def test_postgres_migrations_replay_to_schema_sql(two_schemas: tuple[str, str, str]) -> None:
    """Replaying every PostgreSQL migration gives the same catalog description as schema.sql
    (which a new ledger is given at once)."""
    base, migrated, declared = two_schemas
    replayed = PostgresStore.from_url(with_options(base, schema=migrated), migrate=False)
    try:
        every = [version for version, _, _ in migrations("postgres")]
        assert replayed.migrate(replay=True) == every
    finally:
        replayed.close()
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(declared)))
        connection.execute("SELECT set_config('search_path', %s, false)", (declared,))
        with connection.transaction():
            connection.execute(schema("postgres").encode())
    described_migrated = _postgres_description(base, migrated)
    described_declared = _postgres_description(base, declared)
    assert described_migrated == described_declared
    assert len(described_declared["columns"]) > 40
    assert len(described_declared["triggers"]) >= 3  # the append-only and immutability guards


def test_migrate_applies_nothing_twice(store_url: str) -> None:
    """Migrating an up-to-date store applies nothing and leaves it usable."""
    store = open_store(store_url)
    try:
        assert store.migrate() == []
        assert store.one("operation_get", {"tenant_id": "t", "operation_id": "o"}) is None
    finally:
        store.close()


@pytest.mark.postgres
def test_concurrent_migrations_apply_each_version_once(postgres_url: str) -> None:
    """Processes that start together on an empty schema apply each migration exactly once."""
    applied: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def migrate() -> None:
        start.wait()
        try:
            store = PostgresStore.from_url(postgres_url, migrate=False)
            applied.append(store.migrate())
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    versions = [version for versions in applied for version in versions]
    assert sorted(versions) == [version for version, _, _ in migrations("postgres")]
    store = PostgresStore.from_url(postgres_url, migrate=False)
    try:
        assert store.migrate() == []
    finally:
        store.close()


_MIGRATE_IN_A_PROCESS = """
import json, sys
from effectledger.store.sqlite import SQLiteStore
store = SQLiteStore.from_url(sys.argv[1], migrate=False)
try:
    print(json.dumps(store.migrate()))
finally:
    store.close()
"""


@pytest.mark.slow
def test_a_new_sqlite_ledger_opened_at_once_records_each_migration_once(tmp_path: Path) -> None:
    """Sixteen threads, then four processes, migrating one brand-new SQLite file at once: one
    of them gives it the current schema, every version is applied once and recorded once."""
    every = [version for version, _, _ in migrations("sqlite")]
    recorded = "SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version"
    declared = tmp_path / "declared.db"
    with sqlite3.connect(declared) as connection:
        connection.executescript(schema("sqlite"))
    connection.close()

    def check(path: Path, applied: list[list[int]]) -> None:
        assert sorted(version for versions in applied for version in versions) == every
        with sqlite3.connect(path) as connection:
            assert connection.execute(recorded).fetchall() == [(version, 1) for version in every]
        connection.close()
        assert _sqlite_description(path) == _sqlite_description(declared)

    threaded = tmp_path / "threads.db"
    start = threading.Barrier(16)
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        store = SQLiteStore.from_url(f"sqlite:///{threaded}", migrate=False)
        try:
            start.wait()
            applied.append(store.migrate())
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=migrate) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    check(threaded, applied)

    spawned = tmp_path / "processes.db"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATE_IN_A_PROCESS, f"sqlite:///{spawned}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    answers = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0] * 4, answers
    check(spawned, [json.loads(out) for out, _ in answers])
