"""The command line a person and a script can trust: coded one-line errors, never a traceback,
reads that create nothing, short ids in tables, JSON for scripts, no terminal control bytes."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from effectledger import Context, LedgerSettings, OperationState, SimulatedReceiver, SubmitMode
from effectledger.app.protection import find_keys
from effectledger.audit.keys.files import new_key_pair, write_signer_key
from effectledger.cli import main
from effectledger.cli.output import printable
from effectledger.keyfiles import KEY_DIR_ENV
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor
from tests.conftest import admit, count_rows, require_postgres, sqlite_path, with_options

_BINARY = bytes(range(256)) * 4


def run_cli(*args: str, cwd: Path, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a child process; ``COLUMNS`` unset unless given, like a pipe."""
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "EFFECTLEDGER_DB"}}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _one_error_line(stderr: str, code: str) -> None:
    lines = stderr.splitlines()
    assert lines, stderr
    assert lines[-1].startswith(f"error [{code}]: "), stderr
    assert "Traceback" not in stderr


def _key_file(folder: Path, name: str = "signer") -> Path:
    path = folder / f"{name}.key"
    write_signer_key(path, new_key_pair("log.example")[0])
    return path


def _uncertain_operation(url: str, receiver_path: Path) -> None:
    store = open_store(url)
    # The application tags its events with the trail key ``migrate`` made, as ``recover`` does.
    keys = find_keys(store, url, key_dir=os.environ.get(KEY_DIR_ENV))
    settings = LedgerSettings(recover_after=timedelta(0), trail_keys=keys.trail_keys)
    ledger = Ledger(store, settings=settings)
    receiver = SimulatedReceiver(receiver_path, submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY)
    context = Context(tenant_id="acme", actor_id="alice")
    admit(ledger, context, receiver)
    Executor(ledger, receiver).execute(context, "op-1")
    store.close()
    receiver.close()


def _store_exists(url: str) -> bool:
    if url.startswith("sqlite:"):
        path = sqlite_path(url)
        return any(Path(f"{path}{suffix}").exists() for suffix in ("", "-wal", "-shm"))
    schema = dict(pair.split("=", 1) for pair in url.split("?", 1)[1].split("&") if "=" in pair)[
        "schema"
    ]
    with psycopg.connect(require_postgres()) as connection:
        row = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    return bool(row and row[0])


def _reading_commands(url: str, folder: Path) -> list[list[str]]:
    key = str(_key_file(folder))
    receiver = folder / "receiver.db"
    SimulatedReceiver(receiver).close()
    return [
        ["status", "--db", url, "--tenant", "acme", "--fail-on-uncertain"],
        ["status", "--db", url, "--tenant", "acme", "op-1"],
        ["audit", "trail", "--db", url, "--tenant", "acme", "op-1"],
        ["audit", "explain", "--db", url, "--tenant", "acme", "op-1"],
        ["audit", "checkpoint", "--db", url, "--tenant", "acme"],
        ["audit", "export", "--db", url, "--tenant", "acme", "--out", str(folder / "b.jsonl")],
        ["audit", "prove", "--db", url, "--tenant", "acme", "--out", str(folder / "r"), "e1"],
        ["audit", "seal", "--db", url, "--key-file", key],
        ["audit", "rotate-key", "--db", url, "--key-file", key, "--new-key-file", key],
        ["recover", "--db", url, "--receiver", str(receiver), "--once"],
    ]


def test_reading_commands_never_create_a_store(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """status, every audit command with --db, and recover refuse a missing store with
    not_found and exit 1, and afterwards no database file or schema exists."""
    for command in _reading_commands(store_url, tmp_path):
        assert main(command) == 1, command
        _one_error_line(capsys.readouterr().err, "not_found")
        assert not _store_exists(store_url), command


def test_reading_commands_refuse_a_file_that_is_not_a_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A binary file, an empty SQLite file, a folder, and a ledger behind its schema are each
    refused with invalid_input; the files are left exactly as they were."""
    binary = tmp_path / "binary.db"
    binary.write_bytes(_BINARY)
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (binary, empty, tmp_path):
        before = path.read_bytes() if path.is_file() else None
        assert main(["status", "--db", f"sqlite:///{path}", "--tenant", "acme"]) == 1
        _one_error_line(capsys.readouterr().err, "invalid_input")
        assert (path.read_bytes() if path.is_file() else None) == before
    behind = f"sqlite:///{tmp_path / 'behind.db'}"
    open_store(behind).close()
    import sqlite3

    with sqlite3.connect(tmp_path / "behind.db") as connection:
        newest = connection.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        connection.execute("DELETE FROM schema_migrations WHERE version = ?", (newest,))
    assert main(["status", "--db", behind, "--tenant", "acme"]) == 1
    err = capsys.readouterr().err
    _one_error_line(err, "invalid_input")
    assert "migrate" in err


def test_migrate_and_demo_are_the_commands_that_create(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """migrate creates the store that status then reads (exit 0); demo creates its folder."""
    assert main(["migrate", "--db", store_url]) == 0
    assert _store_exists(store_url)
    assert main(["status", "--db", store_url, "--tenant", "acme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"operations": []}
    assert main(["demo", "--dir", str(tmp_path / "new" / "demo")]) == 0
    assert (tmp_path / "new" / "demo" / "ledger.db").is_file()


@pytest.mark.parametrize("kind", ["missing", "folder", "binary", "other sqlite"])
def test_recover_refuses_a_receiver_that_is_not_one_and_changes_nothing(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """recover --receiver with a missing path, a folder, a binary file or another SQLite file
    exits 1 with a code, creates no file, and leaves the uncertain operation untouched."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _uncertain_operation(url, tmp_path / "receiver.db")
    events = count_rows(url, "audit_events")
    target = tmp_path / "typo.db"
    if kind == "folder":
        target.mkdir()
    elif kind == "binary":
        target.write_bytes(_BINARY)
    elif kind == "other sqlite":
        open_store(f"sqlite:///{target}").close()  # a ledger, not a receiver
    before = sorted(p.name for p in tmp_path.iterdir())

    code = main(["recover", "--db", url, "--receiver", str(target), "--once"])

    assert code == 1
    _one_error_line(capsys.readouterr().err, "not_found" if kind == "missing" else "invalid_input")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert count_rows(url, "audit_events") == events
    rows = count_rows(url, "operations", "state = 'OUTCOME_UNKNOWN' AND inconclusive_lookups = 0")
    assert rows == 1
    assert SimulatedReceiver(tmp_path / "receiver.db").counts().lookups == 0


@pytest.mark.slow
def test_bad_input_prints_a_coded_line_and_never_a_traceback(tmp_path: Path) -> None:
    """A bad busy_timeout_ms, binary --checkpoint and --key-file, demo --dir on a file and a
    negative --interval each exit 1 with one unwrapped `error [code]:` line and create nothing."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    binary = tmp_path / "binary"
    binary.write_bytes(_BINARY)
    binary.chmod(0o600)
    cases = [
        (["status", "--db", f"{url}?busy_timeout_ms=soon", "--tenant", "acme"], "invalid_input"),
        (["audit", "seal", "--db", url, "--key-file", str(binary)], "log_key_invalid"),
        (
            ["audit", "verify", "--bundle", str(binary), "--key", "k", "--checkpoint", str(binary)],
            "invalid_input",
        ),
        (["demo", "--dir", str(binary)], "invalid_input"),
        (
            ["recover", "--db", url, "--receiver", "r.db", "--loop", "--interval", "-1"],
            "invalid_input",
        ),
    ]
    for args, code in cases:
        done = run_cli(*args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stderr)
        _one_error_line(done.stderr, code)
        assert len(done.stderr.splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary"]


def test_the_error_line_is_not_wrapped_without_a_terminal(tmp_path: Path) -> None:
    """A long error message stays on one line when stderr is a pipe and COLUMNS is unset."""
    missing = tmp_path / ("a-rather-long-folder-name-" * 4) / "ledger.db"
    done = run_cli("status", "--db", f"sqlite:///{missing}", "--tenant", "acme", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("error [not_found]: ")
    assert str(missing) in line
    assert len(line) > 120


def test_stored_control_characters_never_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A provider reference holding ESC and CSI bytes is printed escaped in tables and JSON.

    The ledger never stores such text from a destination (it records that reply as Unknown), so
    the bytes are put in the row out of band, as someone with database access could.
    """
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _uncertain_operation(url, tmp_path / "receiver.db")
    store = open_store(url)
    ledger = Ledger(store, settings=LedgerSettings(recover_after=timedelta(0)))
    context = Context(tenant_id="acme", actor_id="alice")
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    from effectledger.workers import RecoveryWorker

    RecoveryWorker(ledger, receiver).run_once()
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
    store.close()
    receiver.close()
    forged = "rcpt-\x1b[2J\x9b31m"
    with sqlite3.connect(tmp_path / "ledger.db") as raw:
        raw.execute(
            "UPDATE operations SET provider_reference = ? WHERE operation_id = 'op-1'", (forged,)
        )
    raw.close()
    for args in (
        ["status", "--db", url, "--tenant", "acme", "--wide"],
        ["status", "--db", url, "--tenant", "acme", "op-1", "--json"],
    ):
        assert main(args) == 0, args
        out = capsys.readouterr().out
        assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in out), args
        assert "\u27e8U+001B\u27e9" in out or "\\u001b" in out, args
    shown = json.loads(out)["operations"][0]["provider_reference"]
    assert shown.startswith("rcpt-\x1b[2J")  # JSON keeps the value, escaped on the wire


def test_printable_escapes_controls_and_lone_surrogates() -> None:
    """C0, DEL, C1 and lone surrogates become visible marks; other text is unchanged."""
    escaped = printable("ok é ✓ \x1b[31m\x07\x7f\x85\udc80")
    assert escaped == "ok é ✓ ⟨U+001B⟩[31m⟨U+0007⟩⟨U+007F⟩⟨U+0085⟩⟨U+DC80⟩"


@pytest.mark.slow
def test_tables_fit_80_columns_with_short_ids_and_full_values_on_request(
    tmp_path: Path,
) -> None:
    """Piped at 80 columns, status and the trail keep every line within 80 characters and show
    ids shortened; --wide shows the full ids and --json the full values."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = open_store(url)
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    op_id = "op-" + "7" * 60
    admit(Ledger(store), Context(tenant_id="acme", actor_id="alice"), receiver, op_id)
    store.close()
    receiver.close()
    for args in (
        ("status", "--db", url, "--tenant", "acme"),
        ("audit", "trail", "--db", url, "--tenant", "acme", op_id),
    ):
        narrow = run_cli(*args, cwd=tmp_path, columns="80")
        assert narrow.returncode == 0, narrow.stderr
        assert max(len(line) for line in narrow.stdout.splitlines()) <= 80
        assert "op-7777777…" in narrow.stdout
        assert op_id not in narrow.stdout.replace("\n", "")
    wide = run_cli("status", "--db", url, "--tenant", "acme", "--wide", cwd=tmp_path)
    assert op_id in wide.stdout
    scripted = run_cli("status", "--db", url, "--tenant", "acme", "--json", cwd=tmp_path)
    (operation,) = json.loads(scripted.stdout)["operations"]
    assert (operation["operation_id"], operation["state"], operation["uncertain"]) == (
        op_id,
        "READY",
        False,
    )


@pytest.mark.slow
def test_seal_after_the_demo_reports_the_real_wait(tmp_path: Path) -> None:
    """The demo's events are stamped in the recent past, so the demo's own seal reports a wait
    of about a recovery interval, not months, and leaves nothing for a later seal."""
    demo = run_cli("demo", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    waited = re.search(
        r"Sealed 9 events under the log key \(the longest waited (\d+) s\)", demo.stdout
    )
    assert waited is not None, demo.stdout
    assert 0 < int(waited.group(1)) < 600
    url = f"sqlite:///{tmp_path / 'demo' / 'ledger.db'}"
    sealed = run_cli("audit", "seal", "--db", url, "--json", cwd=tmp_path)  # the demo's key
    assert sealed.returncode == 0, sealed.stderr
    (report,) = json.loads(sealed.stdout)["reports"]
    assert report["sealed"] == 0
    assert report["size"] == 9


@pytest.mark.postgres
def test_a_missing_postgres_schema_is_not_created_by_reading(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """status on a PostgreSQL schema that does not exist says not_found and creates nothing."""
    assert main(["status", "--db", postgres_url, "--tenant", "acme"]) == 1
    _one_error_line(capsys.readouterr().err, "not_found")
    assert not _store_exists(postgres_url)
    assert with_options(postgres_url)  # the URL itself is well formed


def test_an_unexpected_failure_is_one_coded_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception outside the error tree ends the command with exit 1 and one
    `error [effectledger_error]:` line; an interrupt exits 130 with `stopped`."""
    from effectledger.cli import ledger as ledger_commands

    def broken(args: object, out: object) -> int:
        raise ValueError("a bug\nwith two lines")

    def interrupted(args: object, out: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.delenv("EFFECTLEDGER_DEBUG", raising=False)
    monkeypatch.setattr(ledger_commands, "_status", broken)
    assert main(["status", "--tenant", "acme"]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == "error [effectledger_error]: unexpected ValueError: a bug⟨U+000A⟩with two lines "
        + ("(set EFFECTLEDGER_DEBUG=1 for details)\n")
    )
    monkeypatch.setattr(ledger_commands, "_status", interrupted)
    assert main(["status", "--tenant", "acme"]) == 130
    assert capsys.readouterr().err == "stopped\n"


def test_scripts_get_json_from_migrate_recover_and_the_trail(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """migrate, recover and audit trail print JSON a script can read, and the recovery it
    reports is the one the ledger and the receiver hold."""
    assert main(["migrate", "--db", store_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["applied"]
    _uncertain_operation(store_url, tmp_path / "receiver.db")
    receiver = str(tmp_path / "receiver.db")

    assert main(["recover", "--db", store_url, "--receiver", receiver, "--once", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["resolved"] == [
        {"tenant_id": "acme", "operation_id": "op-1", "state": "SUCCEEDED"}
    ]
    assert "skipped" not in report
    assert main(["audit", "trail", "--db", store_url, "--tenant", "acme", "op-1", "--json"]) == 0
    trail = json.loads(capsys.readouterr().out)
    assert trail["operation"]["state"] == "SUCCEEDED"
    assert [event["sequence"] for event in trail["events"]] == [1, 2, 3, 4, 5]
    assert trail["events"][-1]["event_type"] == "ProviderAcceptanceReconciled"
    assert count_rows(store_url, "operations", "state = 'SUCCEEDED'") == 1
    assert SimulatedReceiver(receiver).counts().effects == 1


def test_seal_with_a_memory_refuses_a_log_emptied_behind_its_back(tmp_path: Path) -> None:
    """``audit seal --memory`` refuses to re-seal a log whose tables were emptied and re-queued."""
    demo = run_cli("demo", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    memory = tmp_path / "sealer-memory.json"
    database = tmp_path / "demo" / "ledger.db"
    url = f"sqlite:///{database}"
    seal = ("audit", "seal", "--db", url, "--memory", str(memory))  # the demo's own log key

    def empty_the_log() -> None:
        with sqlite3.connect(database) as connection:
            for statement in (
                "DROP TRIGGER IF EXISTS log_entries_no_delete",
                "DROP TRIGGER IF EXISTS log_checkpoints_no_delete",
                "DELETE FROM log_entries",
                "DELETE FROM log_checkpoints",
                "DELETE FROM log_heads",
                "INSERT INTO log_pending (tenant_id, event_id, recorded_us) "
                "SELECT tenant_id, event_id, recorded_us FROM audit_events",
            ):
                connection.execute(statement)
        connection.close()

    # The demo sealed its log before this memory existed: emptied once, it is sealed again
    # under the memory, which from then on remembers the tree it signed.
    empty_the_log()
    assert run_cli(*seal, cwd=tmp_path).returncode == 0
    empty_the_log()
    refused = run_cli(*seal, cwd=tmp_path)
    assert refused.returncode == 1
    assert "[audit_verification_failed]" in refused.stderr
    assert "emptied" in refused.stderr
    assert count_rows(url, "log_checkpoints") == 0
