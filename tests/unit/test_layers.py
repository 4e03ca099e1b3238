"""The house reads top-down: every package has a floor, imports point down, and none loops back.

The floors are those of docs/design.md ("Layers"). A room is a top-level module or package of
``effectledger``; an import from a room may name only rooms on lower floors, even inside a
function (a lower module that needed a higher one would tie the layers together again).
Module-level imports (``TYPE_CHECKING`` blocks included) must also form no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import effectledger

PACKAGE = Path(effectledger.__file__).parent

FLOORS: dict[str, int] = {
    "errors": 1,
    "sql": 1,
    "clock": 1,
    "display": 1,
    "_failpoints": 1,
    "telemetry": 1,
    "model": 2,
    "extras": 2,
    "keyfiles": 2,
    "store": 3,
    "events": 3,
    "destinations": 3,
    "ledger": 4,
    "audit": 4,
    "actions": 4,
    "receiver": 4,
    "authority": 5,
    "workers": 5,
    "app": 6,
    "callers": 7,
    "examples": 7,
    "cli": 8,
    "__main__": 9,
}
"""Each room's floor, from the ground up (docs/design.md, "Layers")."""


AUDIT_FLOORS: dict[str, int] = {
    "keys": 1,
    "findings": 1,
    "log": 2,
    "witnessing": 3,
    "sealing": 4,
    "bundles": 4,
    "explain": 5,
    "moving": 5,
}
"""Each room of ``audit``'s own floors (docs/design.md, "The evidence rooms")."""


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


def room(module: str) -> str | None:
    """The room ``module`` lives in (``None`` for the package's own ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def upward(graph: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Every import that points to a room on the same floor or above, by importing module."""
    found: dict[str, list[str]] = {}
    for module, targets in graph.items():
        here = room(module)
        if here is None:
            continue
        wrong = sorted(
            target
            for target in targets
            if (there := room(target)) is not None
            and there != here
            and FLOORS.get(there, 0) >= FLOORS.get(here, 0)
        )
        if wrong:
            found[module] = wrong
    return found


def test_the_graph_was_read() -> None:
    """The walk found the package and its imports (else the checks below check nothing)."""
    assert {"effectledger.ledger.transactions", "effectledger.store.sqlite"} <= MODULES.keys()
    assert "effectledger.store" in LOADING["effectledger.ledger.transactions"]


def test_every_room_has_a_floor() -> None:
    """A new top-level module or package is given a floor before it lands."""
    rooms = {room(module) for module in MODULES} - {None}
    assert rooms - FLOORS.keys() == set()
    assert FLOORS.keys() - rooms == set()


def test_imports_point_down() -> None:
    """No module imports a room on its own floor or above, not even inside a function."""
    assert upward(EVERY) == {}


def test_the_floor_check_finds_an_upward_import() -> None:
    """An import from the ledger up into the one-object API is caught."""
    broken = {name: set(targets) for name, targets in EVERY.items()}
    broken["effectledger.ledger.reads"].add("effectledger.app.ledger")
    assert upward(broken) == {"effectledger.ledger.reads": ["effectledger.app.ledger"]}


def test_no_module_imports_itself_back() -> None:
    """Import-time imports, type-only ones included, form no cycle."""
    assert cycles(LOADING) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """An import back from the store to the ledger (which loads the store) is caught."""
    looped = {name: set(targets) for name, targets in LOADING.items()}
    looped["effectledger.store"].add("effectledger.ledger.transactions")
    assert any("effectledger.store" in group for group in cycles(looped))


def test_callers_reach_only_the_one_object() -> None:
    """Callers never open stores, ledgers, authorities or workers themselves."""
    beneath = (
        "effectledger.store",
        "effectledger.ledger",
        "effectledger.authority",
        "effectledger.workers",
    )
    reached = {
        module: sorted(t for t in targets if any(t == b or t.startswith(b + ".") for b in beneath))
        for module, targets in EVERY.items()
        if module.startswith("effectledger.callers")
    }
    assert {module: found for module, found in reached.items() if found} == {}


def audit_room(module: str) -> str | None:
    """The room of ``audit`` that ``module`` lives in (``None`` outside it, or for its own
    ``__init__``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "audit" else None


def upward_in_audit(graph: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Every import inside ``audit`` that points to one of its rooms on the same floor or above."""
    found: dict[str, list[str]] = {}
    for module, targets in graph.items():
        here = audit_room(module)
        if here is None:
            continue
        wrong = sorted(
            target
            for target in targets
            if (there := audit_room(target)) is not None
            and there != here
            and AUDIT_FLOORS.get(there, 0) >= AUDIT_FLOORS.get(here, 0)
        )
        if wrong:
            found[module] = wrong
    return found


def test_every_evidence_room_has_a_floor() -> None:
    """A new module or package of ``audit`` is given a floor before it lands."""
    rooms = {audit_room(module) for module in MODULES} - {None}
    assert rooms == AUDIT_FLOORS.keys()


def test_evidence_imports_point_down() -> None:
    """Inside ``audit`` no module imports a room on its own floor or above."""
    assert upward_in_audit(EVERY) == {}


def test_the_evidence_floor_check_finds_an_upward_import() -> None:
    """The log importing the sealer's memory (a floor up) is caught."""
    broken = {name: set(targets) for name, targets in EVERY.items()}
    broken["effectledger.audit.log.tlog"].add("effectledger.audit.sealing.memory")
    assert upward_in_audit(broken) == {
        "effectledger.audit.log.tlog": ["effectledger.audit.sealing.memory"]
    }
