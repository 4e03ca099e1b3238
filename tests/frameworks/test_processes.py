"""Saved framework states resumed by fresh processes, on both backends.

A resume in a new process (new ledger, adapter and agent objects on the same files) replays
what this process performed; two processes resuming the same saved state at once make one
effect between them.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, fresh_world
from tests.conftest import count_rows
from tests.frameworks.child import saver_contents
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS, LangGraphDriver, Paused

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize("framework", FRAMEWORKS),
]


def _children(
    framework: str, store_url: str, folder: Path, pause_file: Path, count: int
) -> list[dict[str, object]]:
    start = folder / "start"
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.frameworks.child",
                framework,
                store_url,
                str(folder),
                str(pause_file),
                str(start),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    start.touch()
    answers = []
    for child in children:
        out, err = child.communicate(timeout=180)
        assert child.returncode == 0, err
        answers.append(json.loads(out.strip().splitlines()[-1]))
    return answers


def _pause(framework: str, world: object, folder: Path) -> tuple[object, Path, Grant]:
    driver = DRIVERS[framework](world.app)  # type: ignore[attr-defined]
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)  # type: ignore[attr-defined]
    grant = Grant.of(proposal)
    checkpoints = saver_contents(driver) if isinstance(driver, LangGraphDriver) else None
    pause_file = folder / "paused.pickle"
    if framework == "openai_agents":  # its resume needs only the saved string
        paused = Paused(paused.saved, paused.call_id, scope=paused.scope)
    pause_file.write_bytes(pickle.dumps((paused, grant, checkpoints)))
    return driver, pause_file, grant


def test_fresh_process_replays(framework: str, store_url: str, tmp_path: Path) -> None:
    """Resumed here and then by a fresh process, the saved state performs once, then replays."""
    with fresh_world(store_url, tmp_path / "world") as world:
        driver, pause_file, grant = _pause(framework, world, tmp_path / "world")
        paused = pickle.loads(pause_file.read_bytes())[0]  # what the child gets
        assert driver.resume(paused, AGENT, grant)["outcome"] == "performed"
        (answer,) = _children(framework, store_url, tmp_path / "world", pause_file, 1)
        assert answer["outcome"] == "replayed"
        assert world.receiver.counts().effects == 1


def test_two_processes_resume_at_once(framework: str, store_url: str, tmp_path: Path) -> None:
    """Two processes resuming the same approved saved state at once make exactly one effect."""
    with fresh_world(store_url, tmp_path / "world") as world:
        _pause(framework, world, tmp_path / "world")
        answers = _children(
            framework, store_url, tmp_path / "world", tmp_path / "world" / "paused.pickle", 2
        )
        assert sorted(str(a["outcome"]) for a in answers) == ["performed", "replayed"]
        assert world.receiver.counts().effects == 1
        assert count_rows(store_url, "attempts") == 1
