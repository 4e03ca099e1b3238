"""The public API's types, as a user's type checker sees them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "typing"


@pytest.mark.slow
def test_the_public_api_type_checks_strictly() -> None:
    """mypy --strict accepts tests/typing/public_api.py: every assert_type in it holds."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(HERE / "public_api.py")],
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
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(wrong)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "[assert-type]" in done.stdout
