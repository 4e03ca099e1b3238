"""What ``import effectledger`` loads: the ledger without the evidence tooling, and no fcntl.

Each check runs a fresh interpreter, so modules imported by other tests cannot hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PERFORM = """
import json, sys
sys.modules["fcntl"] = None  # importing it fails, as on a platform without POSIX file locks
import effectledger
after_import = sorted(name for name in sys.modules if name.startswith("effectledger.audit"))
from effectledger import SimulatedReceiver, connect
from tests.acceptance.app_support import AGENT, REFUND, RITA, declare_refund

folder = sys.argv[1]
receiver = SimulatedReceiver(folder + "/receiver.db")
with connect("sqlite:///" + folder + "/ledger.db") as app:
    refund = declare_refund(app, receiver)
    proposal = app.propose(AGENT, refund, **REFUND)
    app.approve(RITA, proposal)
    result = app.perform(AGENT, proposal)
    trail = [event.event_type for event in app.events(RITA, proposal)]
after_perform = sorted(name for name in sys.modules if name.startswith("effectledger.audit"))
print(json.dumps({
    "after_import": after_import,
    "after_perform": after_perform,
    "outcome": result.outcome.value,
    "effects": receiver.counts().effects,
    "trail": trail,
}))
"""


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_loads_no_evidence_tooling_and_needs_no_fcntl() -> None:
    """``import effectledger`` works without fcntl and loads nothing of ``effectledger.audit``."""
    script = (
        "import sys\n"
        "sys.modules['fcntl'] = None\n"
        "import effectledger\n"
        "print(sorted(n for n in sys.modules if n.startswith('effectledger.audit')))\n"
    )
    assert _run(script).strip() == "[]"


_CREATE = """
import sys
from effectledger import connect
connect("sqlite:///" + sys.argv[1] + "/ledger.db").close()
"""


def test_propose_approve_perform_run_without_the_evidence_tooling(tmp_path: Path) -> None:
    """connect, propose, approve and perform on an existing SQLite ledger (its keys made when
    it was created, which generates a log key) send one effect and load no audit module."""
    _run(_CREATE, str(tmp_path))
    report = json.loads(_run(_PERFORM, str(tmp_path)))
    assert report["after_import"] == []
    assert report["after_perform"] == []
    assert report["outcome"] == "performed"
    assert report["effects"] == 1
    assert report["trail"][-1] == "ProviderAcceptanceConfirmed"


def test_the_evidence_tooling_imports_without_fcntl() -> None:
    """Verifying and explaining need no POSIX file locks: only exporting takes one."""
    script = (
        "import sys\n"
        "sys.modules['fcntl'] = None\n"
        "import effectledger.audit, effectledger.cli.audit\n"
        "print('ok')\n"
    )
    assert _run(script).strip() == "ok"
