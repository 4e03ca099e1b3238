"""Evidence schema and queries: migrations equal schema.sql, both dialects name the same queries."""

from __future__ import annotations

import re
import sqlite3
from importlib import resources
from pathlib import Path

from effectledger import errors
from effectledger.sql import load_queries, migrations, schema
from effectledger.store.sqlite import SQLiteStore

EVIDENCE_HEADER = "-- Evidence: Merkle log, checkpoints, export"
NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
ROOT = Path(__file__).resolve().parents[2]


def _sql(dialect: str, filename: str) -> str:
    return resources.files("effectledger").joinpath("sql", dialect, filename).read_text("utf-8")


def _objects(connection: sqlite3.Connection) -> dict[tuple[str, str], str]:
    rows = connection.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
        "AND name != 'schema_migrations'"
    ).fetchall()
    return {
        (kind, name): " ".join(re.sub(r"--[^\n]*", "", sql or "").split())
        for kind, name, sql in rows
    }


def test_replayed_sqlite_migrations_equal_schema_sql(tmp_path: Path) -> None:
    """A database built by the migrations has exactly the objects schema.sql creates."""
    store = SQLiteStore(tmp_path / "migrated.db")
    store.close()
    migrated = sqlite3.connect(tmp_path / "migrated.db")
    fresh = sqlite3.connect(":memory:")
    try:
        fresh.executescript(schema("sqlite"))
        assert _objects(migrated) == _objects(fresh)
    finally:
        migrated.close()
        fresh.close()
    assert (3, "evidence") in [(version, name) for version, name, _ in migrations("sqlite")]


def test_both_dialects_name_the_same_evidence_queries() -> None:
    """Every evidence query of SQLite has a PostgreSQL twin, and no twin is left over."""
    sqlite_text = _sql("sqlite", "queries.sql")
    assert EVIDENCE_HEADER in sqlite_text
    sqlite_names = NAME.findall(sqlite_text.split(EVIDENCE_HEADER, 1)[1])
    postgres_text = _sql("postgres", "queries.sql")
    assert EVIDENCE_HEADER in postgres_text
    postgres_names = NAME.findall(postgres_text.split(EVIDENCE_HEADER, 1)[1])
    assert sorted(sqlite_names) == sorted(postgres_names)
    assert set(sqlite_names) <= set(load_queries("sqlite"))


def test_both_dialects_create_the_same_evidence_tables() -> None:
    """The PostgreSQL migration creates the tables and triggers the SQLite one does."""
    tables = re.compile(r"CREATE TABLE (\w+)")
    triggers = re.compile(r"CREATE TRIGGER (\w+)")
    sqlite_sql = _sql("sqlite", "migrations/0003_evidence.sql")
    postgres_sql = _sql("postgres", "migrations/0003_evidence.sql")
    assert tables.findall(sqlite_sql) == tables.findall(postgres_sql)
    assert set(triggers.findall(postgres_sql)) >= {
        "audit_events_log_pending",
        "log_entries_append_only",
        "log_checkpoints_append_only",
    }


def test_every_verification_reason_is_drawn_and_documented() -> None:
    """Each reason code appears in the error tree and in docs/evidence.md."""
    tree = errors.__doc__ or ""
    documented = (ROOT / "docs" / "evidence.md").read_text("utf-8")
    for reason in errors.AuditVerificationFailed.reasons:
        assert reason in tree
        assert f"`{reason}`" in documented
