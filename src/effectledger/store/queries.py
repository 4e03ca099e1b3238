"""Named queries: SQL kept as data in ``sql/<dialect>/queries.sql``.

A file holds blocks that start with ``-- name: <name>``; everything up to the next such line is
the statement. Python code runs statements by name and never assembles SQL text.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["DIALECTS", "load_queries", "migrations", "schema"]

DIALECTS = ("sqlite", "postgres")
_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def _read(dialect: str, filename: str) -> str:
    return resources.files("effectledger").joinpath("sql", dialect, filename).read_text("utf-8")


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """Every named statement of ``dialect``, by name, comments and trailing ``;`` removed."""
    text = _read(dialect, "queries.sql")
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statement = "\n".join(lines).strip().rstrip(";").strip()
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice for {dialect}")
        queries[name] = statement
    return queries


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for every migration of ``dialect``, in order."""
    folder = resources.files("effectledger").joinpath("sql", dialect, "migrations")
    found: list[tuple[int, str, str]] = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort()
    expected = list(range(1, len(found) + 1))
    if [version for version, _, _ in found] != expected:
        raise ValueError(f"{dialect} migrations are not numbered 1..n without gaps")
    return found


def schema(dialect: str) -> str:
    """The current complete schema of ``dialect`` (``schema.sql``)."""
    return _read(dialect, "schema.sql")
