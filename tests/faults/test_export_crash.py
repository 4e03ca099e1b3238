"""An exporter killed by SIGKILL between its durable write and its cursor update resumes cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, SimulatedReceiver
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.ledger import Ledger
from effectledger.store import open_store
from tests.support.evidence import SIGNER, VERIFIER_KEY, make_history, parsed, read_lines
from tests.support.evidence import verify_both_ways as verify_bundle

pytestmark = pytest.mark.slow


def _export(url: str, bundle: Path, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "EFFECTLEDGER_CRASH_AT"}
    if crash_at is not None:
        env["EFFECTLEDGER_CRASH_AT"] = crash_at
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "effectledger.cli",
            "audit",
            "export",
            "--db",
            url,
            "--tenant",
            "acme",
            "--out",
            str(bundle),
            "--batch-size",
            "5",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_killed_exporter_resumes_without_gaps_or_duplicates(tmp_path: Path) -> None:
    """SIGKILL after a batch reached the file but not the cursor: the rerun skips that batch's
    lines and completes the bundle, every event exactly once."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = open_store(url)
    clock = ManualClock()
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    make_history(Ledger(store, clock=clock), receiver, Context(tenant_id="acme", actor_id="alice"))
    LogSealer(store, SIGNER, clock=clock, batch_size=4).seal("acme")
    bundle = tmp_path / "acme.jsonl"

    killed = _export(url, bundle, "export_after_write")
    assert killed.returncode == -signal.SIGKILL
    written = [parsed(line) for line in read_lines(bundle)]
    assert [line["position"] for line in written if line["type"] == "event"] == [0, 1, 2, 3, 4]
    cursor = store.one(
        "export_cursor_get", {"exporter_id": f"file:{bundle.resolve()}", "tenant_id": "acme"}
    )
    assert cursor is not None
    assert int(cursor["position"]) == 0

    resumed = _export(url, bundle, None)
    assert resumed.returncode == 0, resumed.stderr
    assert "skipped 6 line(s) already written" in resumed.stdout  # 5 events and 1 checkpoint
    lines = [parsed(line) for line in read_lines(bundle)]
    ids = [line["entry"]["event_id"] for line in lines if line["type"] == "event"]
    assert len(ids) == len(set(ids)) == 12
    assert [line["seq"] for line in lines if line["type"] == "checkpoint"] == [1, 2, 3]
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok, report.findings
    store.close()
    receiver.close()
