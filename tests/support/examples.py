"""Running a script of examples/ as a user would: its own process, warnings as errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(script: str, folder: Path, *, timeout: float = 60) -> str:
    """Run ``examples/<script>`` in ``folder``; its standard output (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
