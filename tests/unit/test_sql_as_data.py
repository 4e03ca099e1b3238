"""SQL lives in ``.sql`` files: no Python module under ``src`` spells a statement."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import effectledger.sql
from effectledger.sql import fill, load_statements, migrations

SOURCE = Path(__file__).resolve().parents[2] / "src" / "effectledger"
_STATEMENT = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK|WITH|SET)\s"
)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


@pytest.mark.slow
def test_no_python_module_spells_a_sql_statement() -> None:
    """Every string constant that starts like a statement would be SQL built in Python."""
    offenders: list[str] = []
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and _STATEMENT.match(node.value)
            ):
                offenders.append(f"{path.relative_to(SOURCE)}:{node.lineno}: {node.value[:40]!r}")
    assert offenders == []


def test_the_store_statements_of_each_dialect_are_loaded() -> None:
    """Each dialect's own statements include its transaction verbs."""
    for folder in ("sqlite", "postgres", "simulated", "receiver"):
        file = "store.sql" if folder in {"sqlite", "postgres"} else "queries.sql"
        statements = load_statements(folder, file)
        assert {"begin_write", "commit", "rollback"} <= set(statements), folder


def test_a_template_takes_only_a_number_or_a_bare_word() -> None:
    """``fill`` refuses anything that could carry SQL text into a PRAGMA."""
    assert fill("PRAGMA busy_timeout = {ms}", ms=250) == "PRAGMA busy_timeout = 250"
    assert fill("PRAGMA synchronous = {level}", level="FULL") == "PRAGMA synchronous = FULL"
    for bad in ("FULL; DROP TABLE operations", "full", "1 OR 1", True, ""):
        with pytest.raises(ValueError):
            fill("PRAGMA synchronous = {level}", level=bad)  # type: ignore[arg-type]


def _fake_package(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "sql" / "sqlite" / "migrations"
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text(f"-- {name}\n", "utf-8")
    return tmp_path


def test_migrations_may_skip_a_number_but_not_repeat_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing migration number is allowed (the store applies a late one when it comes); two
    migrations with one number are refused."""
    gap = _fake_package(tmp_path / "gap", ["0001_a.sql", "0003_c.sql", "notes.txt"])
    monkeypatch.setattr(effectledger.sql.resources, "files", lambda _: gap)
    assert [(v, n) for v, n, _ in migrations("sqlite")] == [(1, "a"), (3, "c")]
    twice = _fake_package(tmp_path / "twice", ["0001_a.sql", "0001_b.sql"])
    monkeypatch.setattr(effectledger.sql.resources, "files", lambda _: twice)
    with pytest.raises(ValueError, match="distinct numbers"):
        migrations("sqlite")
