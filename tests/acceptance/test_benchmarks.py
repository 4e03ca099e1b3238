"""Every benchmark script still starts: its imports resolve and it prints its usage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks"
BENCHMARKS = sorted(path for path in FOLDER.glob("*.py") if path.name != "allocation.py")
"""Every script; ``allocation.py`` is the helper they import, not a benchmark."""


def test_the_benchmarks_were_found() -> None:
    """The folder holds the benchmarks the README names (else the test below checks nothing)."""
    assert {"ledger_sqlite.py", "api_replay.py"} <= {path.name for path in BENCHMARKS}


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.stem)
def test_a_benchmark_starts(script: Path, tmp_path: Path) -> None:
    """``python benchmarks/<name>.py --help`` exits 0 from outside the repository."""
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout
