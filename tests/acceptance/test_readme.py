"""The front door stays true: the README's example runs and CI runs its test command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_python_example_runs(tmp_path: Path) -> None:
    """Every Python block of the README runs as written and prints what it promises."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONWARNINGS": "error"},
        )
        assert done.returncode == 0, done.stderr
    assert "performed SUCCEEDED False" in done.stdout


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run takes its test command from the README's marked block, so they cannot drift."""
    marked = re.search(r"<!-- test-command -->\n```sh\n(python3 [^\n]+)\n```", README)
    assert marked is not None
    assert "pytest" in marked.group(1)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "<!-- test-command -->" in ci
    assert 'bash -c "$test_command"' in ci
