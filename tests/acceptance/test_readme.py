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
    """The README's Python blocks run as written, each after the ones before it, as promised."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for count in range(1, len(blocks) + 1):
        folder = tmp_path / f"through-{count}"
        folder.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", "\n".join(blocks[:count])],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONWARNINGS": "error"},
        )
        assert done.returncode == 0, done.stderr
    assert "performed SUCCEEDED False" in done.stdout
    assert "performed ['re_1']" in done.stdout


def test_readme_python_examples_stay_short() -> None:
    """The simulated refund takes at most 15 lines and a user-written destination at most 10."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    lines = [[line for line in block.splitlines() if line.strip()] for block in blocks]
    assert len(lines[0]) <= 15
    in_use = next(n for n, line in enumerate(lines[1]) if "ledger.propose(" in line)
    assert in_use <= 10  # the destination's lines, before those that put it to use


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run takes its test command from the README's marked block, so they cannot drift."""
    marked = re.search(r"<!-- test-command -->\n```sh\n(python3 [^\n]+)\n```", README)
    assert marked is not None
    assert "pytest" in marked.group(1)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "<!-- test-command -->" in ci
    assert 'bash -c "$test_command"' in ci
