"""``--app`` as users expect it: modules in the current folder, a factory or an instance, and
one clear line naming the module and the error when loading fails, for every command."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from effectledger.cli import main as cli_main
from tests.conftest import count_rows

SCRIPT = Path(sys.executable).parent / "effectledger"

APPLICATION = """
    import os
    from effectledger import SimulatedReceiver, connect
    from effectledger.examples.refunds import OrderBook, refund_action
    from effectledger.model import DestinationRef

    NUMBER = 7

    def build(store_url):
        receiver = SimulatedReceiver("receiver.db", synchronous="NORMAL")
        ref = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
        ledger = connect(store_url)
        ledger.register(refund_action(orders=OrderBook(), destination=ref), receiver)
        return ledger

    def make():
        return build(os.environ["APP_STORE"])

    def broken(store_url):
        raise RuntimeError("the payment key is not configured")
"""

INSTANCE = """
    from myapp import make
    ledger = make()
"""

MODULES = {
    "myapp.py": APPLICATION,
    "instance.py": INSTANCE,
    "needs_dependency.py": "import a_package_nobody_installed\n",
    "raises.py": "raise RuntimeError('configuration file missing')\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A project folder holding the application modules, as a user's would."""
    for name, text in MODULES.items():
        (tmp_path / name).write_text(textwrap.dedent(text), "utf-8")
    return tmp_path


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``effectledger`` script run from ``folder`` (its own folder is not on the
    import path, unlike ``python -m``), with no path of the tests on it either."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=folder,
        env={**env, "APP_STORE": f"sqlite:///{folder / 'ledger.db'}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["myapp:build", "myapp:make", "instance:ledger"])
def test_a_module_in_the_current_folder_loads_as_a_factory_or_an_instance(
    folder: Path, spec: str
) -> None:
    """A factory taking the store URL, one taking nothing, and an instance all load from ./."""
    done = run(folder, "worker", "--db", f"sqlite:///{folder / 'ledger.db'}", "--app", spec,
               "--once", "--seal-interval", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "worker pass: dispatched 0" in done.stdout
    assert count_rows(f"sqlite:///{folder / 'ledger.db'}", "operations") == 0


FAILURES = [
    ("nothing_here:build", "no module 'nothing_here' in"),
    ("needs_dependency:build", "needs 'a_package_nobody_installed', which is not installed"),
    ("raises:build", "importing raises raised RuntimeError: configuration file missing"),
    ("myapp:absent", "module myapp has no attribute 'absent'"),
    ("myapp:NUMBER", "is neither an EffectLedger nor a factory of one"),
    ("myapp:broken", "myapp:broken raised RuntimeError: the payment key is not configured"),
    ("myapp", "must look like module:attribute"),
]

COMMANDS = {
    "worker": ("worker", "--once"),
    "serve": ("serve",),
    "recover": ("recover", "--once"),
    "mcp": ("mcp", "--tenant", "acme", "--actor", "agent-7"),
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project folder with the application modules and a migrated ledger, for every
    command and failure below (none of them writes to it)."""
    folder = tmp_path_factory.mktemp("project")
    for name, text in MODULES.items():
        (folder / name).write_text(textwrap.dedent(text), "utf-8")
    assert run(folder, "migrate", "--db", f"sqlite:///{folder / 'ledger.db'}").returncode == 0
    return folder


def _one_line(stderr: str, spec: str, message: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error [invalid_input]: ")
    assert spec.split(":")[0] in lines[0]
    assert message in lines[0]
    assert "Traceback" not in stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("spec", "message"), FAILURES, ids=[spec for spec, _ in FAILURES])
def test_an_application_that_cannot_load_fails_with_one_line(
    project: Path,
    command: str,
    spec: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every command taking --app returns 1 with one line naming the module and the error
    (the command line's own code, run in this process from the project's folder).

    The ledger exists (``serve`` refuses a missing one first), so the failure is the app's.
    """
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder the loader adds goes again
    for name in MODULES:  # a module another case imported is imported afresh
        monkeypatch.delitem(sys.modules, name.removesuffix(".py"), raising=False)
    db = f"sqlite:///{project / 'ledger.db'}"
    assert cli_main([*COMMANDS[command], "--db", db, "--app", spec]) == 1
    captured = capsys.readouterr()
    _one_line(captured.err, spec, message)
    for name in MODULES:
        sys.modules.pop(name.removesuffix(".py"), None)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "spec"),
    [
        ("mcp", "nothing_here:build"),
        ("recover", "needs_dependency:build"),
        ("serve", "raises:build"),
        ("worker", "myapp:broken"),
    ],
)
def test_the_installed_command_prints_the_one_line_and_exits_1(
    project: Path, command: str, spec: str
) -> None:
    """The installed script, run from the folder as a user runs it, exits 1 with that one line
    for each command (each with another kind of failure), never a traceback."""
    message = dict(FAILURES)[spec]
    done = run(project, *COMMANDS[command], "--db", f"sqlite:///{project / 'ledger.db'}",
               "--app", spec)  # fmt: skip
    assert done.returncode == 1, done.stderr
    _one_line(done.stderr, spec, message)
