"""SQL kept as data, and its loader: shared by both ledger stores, the simulated receiver and the
reference receiver (this package imports nothing of effectledger).

Named queries live in ``sql/<dialect>/queries.sql``.

A file holds blocks that start with ``-- name: <name>``; everything up to the next such line is
the statement. Python code runs statements by name and never assembles SQL text. Besides the
ledger's ``queries.sql`` (the same names in every dialect), each dialect has ``store.sql``: the
store's own bookkeeping (transactions, connection settings, the migrations table). A few of those
are templates (PRAGMA takes no bound parameters): :func:`fill` puts in a whole number or a word
from a fixed list, and nothing else.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = [
    "DIALECTS",
    "SYNCHRONOUS_LEVELS",
    "fill",
    "load_queries",
    "load_statements",
    "migrations",
    "read_sql",
    "schema",
]

DIALECTS = ("sqlite", "postgres")
SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
"""SQLite's ``PRAGMA synchronous`` levels, weakest first (every SQLite file here takes one)."""
_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def read_sql(folder: str, filename: str) -> str:
    """The text of ``sql/<folder>/<filename>`` shipped with the package."""
    return resources.files("effectledger").joinpath("sql", folder, filename).read_text("utf-8")


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """The ledger's named statements in ``dialect``, comments and trailing ``;`` removed."""
    return load_statements(dialect, "queries.sql")


@cache
def load_statements(folder: str, filename: str) -> dict[str, str]:
    """The named statements of ``sql/<folder>/<filename>``, by name."""
    text = read_sql(folder, filename)
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statement = "\n".join(lines).strip().rstrip(";").strip()
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice in {folder}/{filename}")
        queries[name] = statement
    return queries


def fill(template: str, **values: int | str) -> str:
    """``template`` with each ``{name}`` replaced by a whole number or a bare upper-case word.

    For statements that cannot take bound parameters (SQLite's PRAGMA). Anything else is refused,
    so no caller can smuggle text into SQL through here.
    """
    for name, value in values.items():
        word = isinstance(value, str) and value.isalpha() and value.isupper()
        if isinstance(value, bool) or not (isinstance(value, int) or word):
            raise ValueError(f"{name}: a statement template takes a number or a bare word")
    return template.format(**values)


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for every migration of ``dialect``, in increasing order."""
    folder = resources.files("effectledger").joinpath("sql", dialect, "migrations")
    found: list[tuple[int, str, str]] = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    # A number may be missing (migrations written on branches side by side take numbers in
    # advance); the store records each version it applies, so a later-filled gap is applied
    # when it arrives. Two migrations with one number are refused.
    if not versions or versions[0] < 1 or len(set(versions)) != len(versions):
        raise ValueError(f"{dialect} migrations must have distinct numbers from 1")
    return found


def schema(dialect: str) -> str:
    """The current complete schema of ``dialect`` (``schema.sql``)."""
    return read_sql(dialect, "schema.sql")
