"""The metrics' names, units and labels: OpenTelemetry's conventions, and the docs say them
exactly as the code makes them."""

from __future__ import annotations

import re
from pathlib import Path

from effectledger.telemetry import COUNTERS, GAUGES, SCOPE

ROOT = Path(__file__).resolve().parents[2]
OPERATING = (ROOT / "docs" / "operating.md").read_text("utf-8")
ATTRIBUTES = {"effectledger.tenant_id", "effectledger.state"}
"""The gauges' attributes (the docs name them beside the gauges)."""


def _counted() -> set[str]:
    source = ROOT / "src" / "effectledger"
    found: set[str] = set()
    for path in source.rglob("*.py"):
        found |= set(re.findall(r'telemetry\.count\(\s*"(\w+)"', path.read_text("utf-8")))
    return found


def test_every_counter_the_code_adds_to_is_declared_with_a_unit() -> None:
    """The counters added to are exactly the declared ones, each with a unit and a description."""
    assert _counted() == set(COUNTERS)
    for name, (unit, description) in {**COUNTERS, **GAUGES}.items():
        assert description.endswith("."), name
        assert unit, name


def test_names_and_units_follow_the_opentelemetry_conventions() -> None:
    """Names are lower-case words in the ``effectledger`` namespace, never ``total`` nor a unit;
    units are UCUM: ``s`` for durations, a count of things an annotation in braces, whose
    instrument's name is that thing in the plural."""
    for name, (unit, _) in {**COUNTERS, **GAUGES}.items():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", name), name
        assert not name.endswith(("total", "seconds", "_s", "count")), name
        assert re.fullmatch(r"s|\{[a-z]+\}", unit), (name, unit)
        if unit.startswith("{"):
            assert name.endswith("s"), name  # a count of discrete things is pluralized
    assert SCOPE == "effectledger"


def _named(section: str) -> set[str]:
    return set(re.findall(r"`(effectledger\.[a-z_]+)`", section))


def test_the_docs_name_every_counter_and_gauge_as_the_code_makes_them() -> None:
    """docs/operating.md's counters and gauges are exactly the code's, with their attributes."""
    counters = OPERATING[OPERATING.index("Counters:") : OPERATING.index("Nothing is exported")]
    assert _named(counters) == {f"{SCOPE}.{name}" for name in COUNTERS}
    gauges = OPERATING[OPERATING.index("- **Gauges**") : OPERATING.index("- **Capacity totals**")]
    assert _named(gauges) - ATTRIBUTES == {f"{SCOPE}.{name}" for name in GAUGES}
    assert _named(gauges) & ATTRIBUTES == ATTRIBUTES
