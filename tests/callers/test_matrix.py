"""The acceptance matrix through every caller: the same outcomes, effects, units and trails.

Each (scenario, caller) pair runs from fresh databases on each backend and must leave behind
exactly the scenario's expected record, which the direct Python path is held to as well.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.callers.paths import caller_for
from tests.callers.scenarios import SCENARIOS, Scenario, fresh_world, play


@pytest.mark.parametrize("caller", ["direct", "tools", "mcp"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_through_caller(
    scenario: Scenario, caller: str, store_url: str, tmp_path: Path
) -> None:
    """The scenario leaves the expected results, receiver effects, units and trail."""
    with (
        fresh_world(store_url, tmp_path / caller) as world,
        caller_for(caller, world.app) as path,
    ):
        observed = play(scenario, world, path)
    assert observed == scenario.expected
