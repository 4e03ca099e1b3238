"""The framework examples run as written and tell the truth about what they did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "again", "edited"),
    [
        ("framework_pydantic_ai.py", "resume again", "edited history"),
        ("framework_openai_agents.py", "resume again", "edited state"),
        ("framework_langgraph.py", "resume the paused checkpoint again", None),
        ("framework_maf.py", "resume the saved session again", None),
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
