"""The ``demo --http`` story and the ``receiver`` command, run for real."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from effectledger.cli.demo_http import run_http_demo
from effectledger.cli.output import Output
from tests.support.served import RECEIVER, served_address

_CLI = "import sys\nfrom effectledger.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def test_http_demo_settles_both_operations_with_one_effect_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The HTTP demo ends with exit code 0: both operations SUCCEEDED, two receiver effects."""
    assert run_http_demo(Output(wide=True), tmp_path) == 0
    text = capsys.readouterr().out
    assert "OUTCOME_UNKNOWN" in text
    assert "2 effects" in text


def test_receiver_command_serves_the_contract_until_stopped(tmp_path: Path) -> None:
    """``receiver --port 0 --db FILE`` serves on a free port of 127.0.0.1 it names: a POST
    performs an effect that the stats endpoint counts and the receiver's own database holds."""
    db = tmp_path / "receiver.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _CLI, "receiver", "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = served_address(child, says=RECEIVER).base
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/_receiver/stats", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the receiver did not start"
                time.sleep(0.1)
        request = urllib.request.Request(
            f"{base}/v1/effects",
            data=b'{"action":"a","arguments":{}}',
            headers={"Idempotency-Key": "k-1", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 201
        with urllib.request.urlopen(f"{base}/_receiver/stats", timeout=5) as answer:
            assert json.load(answer)["effects"] == 1
    finally:
        child.terminate()
        child.wait(timeout=60)
    assert db.exists()


def test_receiver_command_has_help() -> None:
    """The receiver command documents its options."""
    done = subprocess.run(
        [sys.executable, "-c", _CLI, "receiver", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert "--port" in done.stdout
    assert "--db" in done.stdout
