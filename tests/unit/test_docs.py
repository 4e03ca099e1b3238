"""The docs: every code block marked runnable runs, and the site builds in strict mode."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_MARKED = re.compile(r"^<!-- runnable -->\n```(\w+)\n(.*?)^```$", re.M | re.S)


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(page, language, code) of every block marked ``<!-- runnable -->`` in docs/."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for language, code in _MARKED.findall(page.read_text("utf-8")):
            found.append((page.name, language, code))
    return found


def test_the_docs_mark_runnable_blocks() -> None:
    """Some blocks are marked runnable, each in a language the test can run."""
    blocks = runnable_blocks()
    assert len(blocks) >= 2
    assert {language for _, language, _ in blocks} <= {"python", "sh"}


@pytest.mark.slow
@pytest.mark.parametrize(("page", "language", "code"), runnable_blocks())
def test_a_runnable_block_runs(page: str, language: str, code: str, tmp_path: Path) -> None:
    """A block marked runnable exits 0 in an empty folder, with this environment's Python."""
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-ec", code]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("EFFECTLEDGER_KEY_DIR", None)
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, f"{page}: {done.stderr}"


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    """``mkdocs build --strict`` builds docs/ with every link and anchor resolved."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs is in the test extra: pip install -e '.[test]'"
    site = str(tmp_path / "site")
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", site], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
