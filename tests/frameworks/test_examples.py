"""The framework examples run as written and tell the truth about what they did."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.examples import run_example


def _run(script: str, folder: Path) -> str:
    return run_example(script, folder, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "again", "edited"),
    [
        ("framework_pydantic_ai.py", "resume again", "edited history"),
        ("framework_openai_agents.py", "resume again", "edited state"),
        ("framework_langgraph.py", "resume the paused checkpoint again", None),
        ("framework_maf.py", "resume the saved session again", None),
        ("framework_adk.py", "resume the saved session again", "edited session"),
    ],
)
def test_framework_example(script: str, again: str, edited: str | None, tmp_path: Path) -> None:
    """Each example performs once, replays the same saved state, refuses an edited one."""
    out = _run(script, tmp_path)
    assert "resume: performed SUCCEEDED" in out
    assert f"{again}: replayed SUCCEEDED" in out
    if edited is not None:
        assert f"{edited}: denied digest_mismatch" in out
    assert "receiver effects: 1" in out
