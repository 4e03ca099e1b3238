"""The house reads top-down, and no module imports itself back.

The layers, from the top: the command line and the callers (function tools, MCP, HTTP), the
one-object API (``app``), the service with its executor and recovery worker, the authority, the
ledger, the store; the model, errors, canonical encoding and event format sit beneath them all.
An import may point down, never up: a lower module that needed a higher one, even inside a
function, would tie the layers together again. Module-level imports (``TYPE_CHECKING`` blocks
included, as the issue about ``policy.py`` showed) must also form no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import effectledger

PACKAGE = Path(effectledger.__file__).parent

# Each group of modules, and the modules it must never import (prefixes: a package covers its
# modules). Read top-down: everything above a layer is forbidden to it.
_CALLERS = ("effectledger.callers", "effectledger.cli", "effectledger.worker")
_API = ("effectledger.app", "effectledger.app_async", *_CALLERS)
_SERVICE = ("effectledger.service", "effectledger.executor", "effectledger.recovery", *_API)
_AUTHORITY = ("effectledger.authority", *_SERVICE)
_LEDGER = ("effectledger.ledger", *_AUTHORITY)
_STORE = ("effectledger.store", *_LEDGER)
FORBIDDEN: dict[tuple[str, ...], tuple[str, ...]] = {
    ("effectledger.callers",): (
        "effectledger.cli",
        "effectledger.service",
        "effectledger.authority",
    ),
    ("effectledger.app", "effectledger.app_async"): _CALLERS,
    ("effectledger.service", "effectledger.executor", "effectledger.recovery"): _API,
    ("effectledger.authority",): _SERVICE,
    ("effectledger.ledger",): _AUTHORITY,
    ("effectledger.store",): _LEDGER,
    (
        "effectledger.model",
        "effectledger.errors",
        "effectledger.canonical",
        "effectledger.events",
    ): (*_STORE, "effectledger.audit"),
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(path): path for path in PACKAGE.rglob("*.py")}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def _imported(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        if node.module.startswith("effectledger"):
            for alias in node.names:  # ``from package import module`` names the module
                full = f"{node.module}.{alias.name}"
                yield full if full in MODULES else node.module
    elif isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name.startswith("effectledger"))


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements run at import time: the module's own, and those of its top-level ``if``s
    (``if TYPE_CHECKING:`` included, so type-only cycles count too)."""
    for statement in tree.body:
        yield statement
        if isinstance(statement, ast.If):
            yield from (*statement.body, *statement.orelse)


def _owner(name: str) -> str | None:
    """The module ``name`` is, or the package it is in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    every: dict[str, set[str]] = {}
    loading: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text("utf-8"))
        every[name] = {found for node in ast.walk(tree) for found in _imported(node)}
        loading[name] = {
            owner
            for statement in _top_level(tree)
            for found in _imported(statement)
            if (owner := _owner(found)) is not None and owner != name
        }
    return every, loading


EVERY, LOADING = _graphs()


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: list[str] = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_was_read() -> None:
    """The walk found the package and its imports (else the checks below check nothing)."""
    assert {"effectledger.ledger.facade", "effectledger.store.sqlite"} <= MODULES.keys()
    assert "effectledger.store" in LOADING["effectledger.ledger.facade"]


def test_no_module_imports_itself_back() -> None:
    """Import-time imports, type-only ones included, form no cycle."""
    assert cycles(LOADING) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """An import back from the store to the ledger facade (which loads the store) is caught."""
    looped = {name: set(targets) for name, targets in LOADING.items()}
    looped["effectledger.store"].add("effectledger.ledger.facade")
    assert any("effectledger.store" in group for group in cycles(looped))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN), ids=lambda layer: layer[0])
def test_imports_point_down(layer: tuple[str, ...]) -> None:
    """No module of ``layer`` imports a layer above it, not even inside a function."""
    upward = {
        module: sorted(target for target in targets if _within(target, FORBIDDEN[layer]))
        for module, targets in EVERY.items()
        if _within(module, layer)
    }
    assert {module: targets for module, targets in upward.items() if targets} == {}
