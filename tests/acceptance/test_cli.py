"""The command line, run as a user runs it: a real process, real files, exit codes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from effectledger import Context, SimulatedReceiver, SubmitMode
from effectledger.cli import build_parser
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor
from tests.conftest import admit


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_demo_tells_the_lost_reply_story(tmp_path: Path) -> None:
    """The refund demo refuses the edit, reconciles the lost reply, shows one effect, and ends
    with a status command (full ids, its tenant) that works as printed."""
    done = run_cli("demo", "--dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "OUTCOME_UNKNOWN" in out
    assert "denied (digest_mismatch)" in out
    assert "held 30, committed 0" in out
    assert "held 0, committed 30" in out
    assert "no new attempt" in out
    assert "tool_arguments_rejected" in out
    assert "ProviderAcceptanceReconciled" in out
    assert "1 submission, 1 lookup, 1 effect" in out
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    assert receiver.counts().effects == 1
    assert "in tenant acme" in out
    status = next(line for line in out.splitlines() if line.startswith("  effectledger status"))
    operation_id = status.split()[-1]
    assert operation_id.startswith("op-")
    assert f"/desk/operations/{operation_id}" in out
    shown = run_cli(*status.split()[1:], "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert operation_id in shown.stdout
    assert "SUCCEEDED" in shown.stdout


@pytest.mark.slow
def test_status_audit_and_recover_on_a_real_store(tmp_path: Path) -> None:
    """status shows uncertainty, recover --once resolves it, audit trail verifies the chain."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = open_store(url)
    ledger = Ledger(store)
    receiver = SimulatedReceiver(
        tmp_path / "receiver.db", submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY
    )
    context = Context(tenant_id="acme", actor_id="alice")
    from datetime import timedelta

    from effectledger import LedgerSettings

    ledger = Ledger(store, settings=LedgerSettings(recover_after=timedelta(0)))
    admit(ledger, context, receiver)
    Executor(ledger, receiver).execute(context, "op-1")
    store.close()

    status = run_cli("status", "--db", url, "--tenant", "acme", "--fail-on-uncertain", cwd=tmp_path)
    assert status.returncode == 3
    assert "OUTCOME_UNKNOWN (uncertain)" in status.stdout

    recover = run_cli(
        "recover", "--db", url, "--receiver", str(receiver.path), "--once", cwd=tmp_path
    )
    assert recover.returncode == 0, recover.stderr
    assert "resolved 1" in recover.stdout

    trail = run_cli("audit", "trail", "--db", url, "--tenant", "acme", "op-1", cwd=tmp_path)
    assert trail.returncode == 0, trail.stderr
    assert "ProviderAcceptanceReconciled" in trail.stdout
    assert "Hash chain verified over 5 events" in trail.stdout
    assert receiver.counts().effects == 1


@pytest.mark.slow
def test_errors_print_their_code_and_exit_1(tmp_path: Path) -> None:
    """An unknown operation or a bad store URL prints the stable code and exits 1."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    missing = run_cli("status", "--db", url, "--tenant", "acme", "nope", cwd=tmp_path)
    assert missing.returncode == 1
    assert "[not_found]" in missing.stderr
    bad = run_cli("status", "--db", "mysql://x", "--tenant", "acme", cwd=tmp_path)
    assert bad.returncode == 1
    assert "[invalid_input]" in bad.stderr
    usage = run_cli("recover", "--db", url, cwd=tmp_path)
    assert usage.returncode == 2


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"{name} has no one-line help in its group's listing"
                found.append((name, sub))
                found.extend((f"{name} {n}", s) for n, s in _subcommands(sub))
    return found


def _leaves() -> list[tuple[str, argparse.ArgumentParser]]:
    every = _subcommands(build_parser())
    groups = {name.rsplit(" ", 1)[0] for name, _ in every if " " in name}
    return [(name, sub) for name, sub in every if name not in groups]


_README = Path(__file__).parents[2] / "README.md"


@pytest.mark.parametrize("name", [name for name, _ in _subcommands(build_parser())])
def test_every_command_has_help_and_a_row_in_the_readme(name: str) -> None:
    """Every command and sub-command has help text, documents each option, and has a row of
    its own in the README's command table."""
    parser = dict(_subcommands(build_parser()))[name]
    assert parser.description or parser.format_help()
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, f"{name} {action.option_strings} has no help"
    if name in dict(_leaves()):
        text = _README.read_text("utf-8")
        table = text[text.index("## Command line") :].split("\n## ", 1)[0]
        assert f"| `effectledger {name} " in table or f"| `effectledger {name}`" in table


_NOT_FOR_SCRIPTS = {"demo", "receiver", "serve", "mcp"}  # a story told to a person, or servers


@pytest.mark.parametrize("name", [name for name, _ in _leaves() if name not in _NOT_FOR_SCRIPTS])
def test_every_command_but_the_demo_takes_json(name: str) -> None:
    """Each command a script may call offers --json (not the demo, a story, nor the servers)."""
    parser = dict(_leaves())[name]
    assert any("--json" in action.option_strings for action in parser._actions)


def test_importing_the_library_does_not_import_the_command_line() -> None:
    """`import effectledger` loads neither the CLI package, argparse nor rich."""
    code = (
        "import sys, effectledger; "
        "print(sorted(m for m in sys.modules if m.startswith(('effectledger.cli', 'argparse', "
        "'rich'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_package_runs_as_a_module_and_says_its_version(tmp_path: Path) -> None:
    """``python -m effectledger --version`` prints the installed version, as the script does."""
    import effectledger

    for command in (
        [sys.executable, "-m", "effectledger"],
        [str(Path(sys.executable).parent / "effectledger")],
    ):
        done = subprocess.run(
            [*command, "--version"], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"effectledger {effectledger.__version__}"
    assert effectledger.__version__[0].isdigit()
