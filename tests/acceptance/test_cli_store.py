"""The real ``effectledger`` command against every backend: migrate, and --db on every command."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from effectledger import Context, SimulatedReceiver
from effectledger.cli import main as cli_main
from effectledger.ledger import Ledger
from effectledger.sql import migrations
from tests.conftest import admit, run_sql
from tests.contract.test_bad_input import SECRET, with_password


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    # Read when called: a PostgreSQL fixture names the test's key directory in the environment.
    env = {name: value for name, value in os.environ.items() if name != "EFFECTLEDGER_DB"}
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "COLUMNS": "200"},
    )


@pytest.mark.slow
def test_migrate_command_applies_each_migration_once(store_url: str) -> None:
    """`effectledger migrate` creates the schema, and a second run finds nothing to apply."""
    first = _cli("migrate", "--db", store_url)
    second = _cli("migrate", "--db", store_url)

    assert first.returncode == 0, first.stderr
    versions = [version for version, _, _ in migrations("sqlite")]
    assert "applied migration(s) " + ", ".join(f"{v:04d}" for v in versions) in first.stdout
    assert second.returncode == 0, second.stderr
    assert "nothing to apply" in second.stdout
    assert run_sql(store_url, "SELECT version FROM schema_migrations ORDER BY version") == [
        (version,) for version in versions
    ]


@pytest.mark.slow
def test_status_command_reads_the_store_named_by_db(
    store_url: str, ledger: Ledger, receiver: SimulatedReceiver, context: Context
) -> None:
    """`effectledger status --db URL` shows an operation stored in that backend."""
    admit(ledger, context, receiver, "op-1")

    shown = _cli("status", "--db", store_url, "--tenant", "acme", "op-1")

    assert shown.returncode == 0, shown.stderr
    assert "op-1" in shown.stdout
    assert "READY" in shown.stdout


@pytest.mark.parametrize(
    "command",
    [["migrate"], ["status"], ["audit", "trail"], ["recover"]],
)
def test_every_command_that_touches_a_store_takes_db(command: list[str]) -> None:
    """Each store command accepts --db with a store URL, documented in its help."""
    shown = _cli(*command, "--help")

    assert shown.returncode == 0, shown.stderr
    assert "--db" in shown.stdout
    assert "postgresql://" in shown.stdout


@pytest.mark.postgres
def test_unreachable_database_is_reported_with_its_code(postgres_url: str) -> None:
    """A PostgreSQL URL nobody answers ends the command with exit 1 and a coded error."""
    failed = _cli(
        "migrate",
        "--db",
        "postgresql://postgres@127.0.0.1:1/test?connect_timeout=2",
        "--key-dir",
        os.environ["EFFECTLEDGER_KEY_DIR"],
    )

    assert failed.returncode == 1
    assert "error [storage]" in failed.stderr


def test_status_of_a_tenant_with_nothing_says_so(store_url: str) -> None:
    """`status` for a tenant without operations prints that it has none, not an empty table."""
    assert _cli("migrate", "--db", store_url).returncode == 0
    shown = _cli("status", "--db", store_url, "--tenant", "nobody")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "tenant nobody has no operations in this ledger"


@pytest.mark.postgres
def test_a_store_password_is_masked_in_every_output(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store URL with a password (trust authentication accepts any) never shows it: not in
    migrate's, status's (text, JSON, summary), keys' or the worker's output and log lines, not
    in config show, not in the errors of a missing schema or an unreachable server; where the
    URL is shown, its password reads ``***``."""
    url = with_password(postgres_url)
    missing = with_password(postgres_url.replace("schema=", "schema=nothing_here_"))
    unreachable = with_password(postgres_url, port=1) + "&connect_timeout=2"
    monkeypatch.setenv("EFFECTLEDGER_TEST_RECEIVER", str(tmp_path / "receiver.db"))
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    runs = [
        (["migrate", "--db", url], 0),
        (["status", "--db", url, "--tenant", "acme"], 0),
        (["status", "--db", url, "--tenant", "acme", "--json"], 0),
        (["status", "--db", url, "--tenant", "acme", "--summary", "--json"], 0),
        (["keys", "create", "--db", url, "--tenant", "acme", "--actor", "r"], 0),
        (["worker", "--db", url, "--app", "tests.worker.apps:refunds", "--once"], 0),
        (["worker", "--db", url, "--app", "tests.worker.apps:refunds", "--once",
          "--log-format", "json"], 0),
        (["status", "--db", missing, "--tenant", "acme"], 1),
        (["status", "--db", unreachable, "--tenant", "acme"], 1),
        (["migrate", "--from", unreachable, "--to", url], 1),
    ]  # fmt: skip
    shown = []
    for argv, code in runs:
        assert cli_main(argv) == code, (argv, capsys.readouterr())
        captured = capsys.readouterr()
        shown.append(captured.out + captured.err)
    monkeypatch.setenv("EFFECTLEDGER_DB", url)
    for argv in (["config", "show"], ["config", "show", "--json"]):
        assert cli_main(argv) == 0
        captured = capsys.readouterr()
        shown.append(captured.out + captured.err)
        assert ":***@" in captured.out
    shown.extend(record.getMessage() for record in caplog.records)
    for text in shown:
        assert SECRET not in text, text
