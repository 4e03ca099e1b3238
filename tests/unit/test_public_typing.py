"""The public API's types, as a user's type checker sees them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "typing"


def _mypy(target: Path, cache: Path) -> list[str]:
    """mypy --strict on ``target`` with a cache of its own: two runs at once (two test
    processes) writing one ``.mypy_cache`` can crash mypy itself."""
    return [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--no-incremental",
        "--show-traceback",
        f"--cache-dir={cache}",
        str(target),
    ]


@pytest.mark.slow
def test_the_public_api_type_checks_strictly(tmp_path: Path) -> None:
    """mypy --strict accepts tests/typing/public_api.py: every assert_type in it holds."""
    done = subprocess.run(
        _mypy(HERE / "public_api.py", tmp_path / "mypy-cache"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_type_check_can_fail(tmp_path: Path) -> None:
    """A wrong expectation is reported, so the check above checks something."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from typing import assert_type\nimport effectledger\n"
        "assert_type(effectledger.connect('sqlite:///x.db'), int)\n"
    )
    done = subprocess.run(
        _mypy(wrong, tmp_path / "mypy-cache"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "[assert-type]" in done.stdout
