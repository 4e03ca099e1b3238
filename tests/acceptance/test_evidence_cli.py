"""The evidence commands, run as a reviewer and an operator would: real processes and files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from effectledger import Context, SimulatedReceiver
from effectledger.ledger import Ledger
from effectledger.store import open_store
from tests.conftest import admit
from tests.support.evidence import canonical_line, event_index, make_history, parsed, read_lines

pytestmark = pytest.mark.slow


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "EFFECTLEDGER_LOG_KEY"}
    environment.update({"COLUMNS": "250", "NO_COLOR": "1", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def history(tmp_path: Path) -> str:
    """A ledger file holding the mixed history of four operations; returns its URL."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = open_store(url)
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    make_history(Ledger(store), receiver, Context(tenant_id="acme", actor_id="alice"))
    store.close()
    receiver.close()
    return url


def _keygen(tmp_path: Path, name: str) -> tuple[Path, str]:
    key_file = tmp_path / f"{name}.key"
    done = run_cli("audit", "keygen", "--name", name, "--out", str(key_file), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert key_file.read_text().startswith(f"PRIVATE+KEY+{name}+")
    return key_file, done.stdout.strip()


def test_seal_export_verify_explain_and_prove_from_the_command_line(
    history: str, tmp_path: Path
) -> None:
    """An operator seals and exports; a reviewer verifies, explains and checks a receipt offline."""
    key_file, verifier = _keygen(tmp_path, "log.example")
    sealed = run_cli("audit", "seal", "--db", history, "--key-file", str(key_file), cwd=tmp_path)
    assert sealed.returncode == 0, sealed.stderr
    assert "acme: sealed 12 event(s) in 1 checkpoint(s)" in sealed.stdout
    assert "pending 0" in sealed.stdout
    bundle = tmp_path / "acme.jsonl"
    exported = run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    assert "exported 12 event(s) and 1 checkpoint(s)" in exported.stdout
    history_path = Path(history.removeprefix("sqlite:///"))
    history_path.rename(tmp_path / "elsewhere.db")  # the reviewer has no database
    verified = run_cli("audit", "verify", "--bundle", str(bundle), "--key", verifier, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert "verified log of tenant acme: 12 event(s) of 4 operation(s)" in verified.stdout
    explained = run_cli(
        "audit", "explain", "--bundle", str(bundle), "--key", verifier, "op-lost", cwd=tmp_path
    )
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    sentences = [line for line in lines if line.endswith("]")]
    assert all("[event " in sentence for sentence in sentences)
    assert "The outcome is unresolved" in sentences[-1]
    (tmp_path / "elsewhere.db").rename(history_path)
    event_id = parsed(read_lines(bundle)[1])["entry"]["event_id"]
    receipt = tmp_path / "receipt.jsonl"
    proved = run_cli(
        "audit",
        "prove",
        "--db",
        history,
        "--tenant",
        "acme",
        "--out",
        str(receipt),
        event_id,
        cwd=tmp_path,
    )
    assert proved.returncode == 0, proved.stderr
    checked = run_cli("audit", "verify", "--bundle", str(receipt), "--key", verifier, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "verified receipt of tenant acme: 1 event(s)" in checked.stdout


def test_verify_names_a_tampered_bundle_and_exits_1(history: str, tmp_path: Path) -> None:
    """An edited event makes verify print the finding's code and exit 1."""
    key_file, verifier = _keygen(tmp_path, "log.example")
    assert (
        run_cli(
            "audit", "seal", "--db", history, "--key-file", str(key_file), cwd=tmp_path
        ).returncode
        == 0
    )
    bundle = tmp_path / "acme.jsonl"
    run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    lines = read_lines(bundle)
    index = event_index(lines, "op-rejected", "PermanentRejection")
    value = parsed(lines[index])
    value["entry"]["event_type"] = "ProviderAcceptanceConfirmed"
    lines[index] = canonical_line(value)
    bundle.write_bytes(b"".join(lines))
    failed = run_cli("audit", "verify", "--bundle", str(bundle), "--key", verifier, cwd=tmp_path)
    assert failed.returncode == 1
    assert "finding [event_edited]" in failed.stderr
    assert "error [audit_verification_failed]: event_edited:" in failed.stderr
    other_key = run_cli("audit", "keygen", cwd=tmp_path).stdout.splitlines()[1].split(": ")[1]
    untrusted = run_cli(
        "audit", "verify", "--bundle", str(bundle), "--key", other_key, cwd=tmp_path
    )
    assert untrusted.returncode == 1
    assert "error [audit_verification_failed]: unknown_key:" in untrusted.stderr


def test_keys_come_from_outside_the_database_and_rotate(history: str, tmp_path: Path) -> None:
    """The key is read from a file or EFFECTLEDGER_LOG_KEY; a rotation hands the log over."""
    key_file, old_verifier = _keygen(tmp_path, "log.example")
    new_file, _ = _keygen(tmp_path, "log.example-2026")
    missing = run_cli("audit", "seal", "--db", history, cwd=tmp_path)
    assert missing.returncode == 1
    assert "error [log_key_invalid]" in missing.stderr
    key_file.chmod(0o644)
    exposed = run_cli("audit", "seal", "--db", history, "--key-file", str(key_file), cwd=tmp_path)
    assert exposed.returncode == 1
    assert "chmod 600" in exposed.stderr
    key_file.chmod(0o600)
    env = {"EFFECTLEDGER_LOG_KEY": key_file.read_text().strip()}
    assert run_cli("audit", "seal", "--db", history, cwd=tmp_path, env=env).returncode == 0
    rotated = run_cli(
        "audit",
        "rotate-key",
        "--db",
        history,
        "--key-file",
        str(key_file),
        "--new-key-file",
        str(new_file),
        cwd=tmp_path,
    )
    assert rotated.returncode == 0, rotated.stderr
    assert "acme: rotation checkpoint #2 at size 12" in rotated.stdout
    store = open_store(history)
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    admit(Ledger(store), Context(tenant_id="acme", actor_id="alice"), receiver, "op-after")
    store.close()
    receiver.close()
    retired = run_cli("audit", "seal", "--db", history, cwd=tmp_path, env=env)
    assert retired.returncode == 1
    assert "error [log_key_invalid]" in retired.stderr
    assert (
        run_cli(
            "audit", "seal", "--db", history, "--key-file", str(new_file), cwd=tmp_path
        ).returncode
        == 0
    )
    kept = tmp_path / "kept.checkpoint"
    shown = run_cli(
        "audit", "checkpoint", "--db", history, "--tenant", "acme", "--out", str(kept), cwd=tmp_path
    )
    assert shown.returncode == 0
    assert kept.read_text().startswith("effectledger/acme\n13\n")
    bundle = tmp_path / "acme.jsonl"
    run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    verified = run_cli(
        "audit",
        "verify",
        "--bundle",
        str(bundle),
        "--key",
        old_verifier,
        "--checkpoint",
        str(kept),
        cwd=tmp_path,
    )
    assert verified.returncode == 0, verified.stderr
    assert "13 event(s)" in verified.stdout
    assert "3 checkpoint(s)" in verified.stdout


def test_export_failures_are_visible(history: str, tmp_path: Path) -> None:
    """A bundle truncated behind its cursor makes export exit 1 with the stable code."""
    key_file, _ = _keygen(tmp_path, "log.example")
    run_cli("audit", "seal", "--db", history, "--key-file", str(key_file), cwd=tmp_path)
    bundle = tmp_path / "acme.jsonl"
    run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    bundle.write_bytes(b"".join(read_lines(bundle)[:3]))
    failed = run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    assert failed.returncode == 1
    assert "error [export_cursor_mismatch]" in failed.stderr


def test_explain_from_the_database_cites_every_sentence(history: str, tmp_path: Path) -> None:
    """explain --db cites every sentence, calls the lost reply unresolved and checks the chain."""
    done = run_cli("audit", "explain", "--db", history, "--tenant", "acme", "op-lost", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    *sentences, chain = done.stdout.splitlines()
    assert len(sentences) == 4
    assert [s.rsplit("[event ", 1)[1].split(",")[0] for s in sentences] == ["1", "2", "3", "3"]
    assert "could not establish whether the destination performed" in sentences[2]
    assert "unresolved" in sentences[3]
    assert chain == (
        "hash chain verified over 3 event(s); trail tags not checked (no trail key found)"
    )
    unknown = run_cli(
        "audit", "explain", "--db", history, "--tenant", "globex", "op-lost", cwd=tmp_path
    )
    assert unknown.returncode == 1
    assert "error [not_found]" in unknown.stderr


def test_an_empty_bundle_and_an_existing_receipt_are_refused(history: str, tmp_path: Path) -> None:
    """``verify`` of an empty file exits 1 (inconsistent with a kept checkpoint, else malformed);
    ``prove`` keeps an existing file unless ``--force``; ``explain --db`` prints nothing of a cut
    chain."""
    key_file, verifier = _keygen(tmp_path, "log.example")
    sealed = run_cli("audit", "seal", "--db", history, "--key-file", str(key_file), cwd=tmp_path)
    assert sealed.returncode == 0, sealed.stderr
    kept = tmp_path / "kept.txt"
    run_cli(
        "audit", "checkpoint", "--db", history, "--tenant", "acme", "--out", str(kept), cwd=tmp_path
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with_kept = run_cli(
        "audit",
        "verify",
        "--bundle",
        str(empty),
        "--key",
        verifier,
        "--checkpoint",
        str(kept),
        cwd=tmp_path,
    )
    assert with_kept.returncode == 1
    assert "error [audit_verification_failed]: checkpoint_inconsistent:" in with_kept.stderr
    alone = run_cli("audit", "verify", "--bundle", str(empty), "--key", verifier, cwd=tmp_path)
    assert alone.returncode == 1
    assert "error [audit_verification_failed]: bundle_malformed:" in alone.stderr

    receipt = tmp_path / "receipt.jsonl"
    receipt.write_bytes(b"keep me\n")
    store = open_store(history)
    event_id = store.one("log_entries_from", {"tenant_id": "acme", "position": 0, "limit": 1})[
        "event_id"
    ]
    store.close()
    prove = ["audit", "prove", "--db", history, "--tenant", "acme", "--out", str(receipt)]
    refused = run_cli(*prove, event_id, cwd=tmp_path)
    assert refused.returncode == 1
    assert "error [export_failed]:" in refused.stderr
    assert receipt.read_bytes() == b"keep me\n"
    forced = run_cli(*prove, "--force", event_id, cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    checked = run_cli("audit", "verify", "--bundle", str(receipt), "--key", verifier, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr

    path = history.removeprefix("sqlite:///")
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("DROP TRIGGER audit_events_no_delete")
        connection.execute(
            "DELETE FROM audit_events WHERE operation_id = 'op-ok' AND sequence = "
            "(SELECT max(sequence) FROM audit_events WHERE operation_id = 'op-ok')"
        )
    cut = run_cli("audit", "explain", "--db", history, "--tenant", "acme", "op-ok", cwd=tmp_path)
    assert cut.returncode == 1
    assert cut.stdout == ""
    assert "error [audit_chain_broken]:" in cut.stderr


def test_verify_pinned_to_a_tenant_refuses_another_tenants_genuine_bundle(
    history: str, tmp_path: Path
) -> None:
    """``verify --tenant`` of a genuine bundle of another tenant's log exits 1 (origin mismatch)."""
    key_file, verifier = _keygen(tmp_path, "log.example")
    sealed = run_cli("audit", "seal", "--db", history, "--key-file", str(key_file), cwd=tmp_path)
    assert sealed.returncode == 0, sealed.stderr
    bundle = tmp_path / "acme.jsonl"
    exported = run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    verify = ("audit", "verify", "--bundle", str(bundle), "--key", verifier)
    assert run_cli(*verify, "--tenant", "acme", cwd=tmp_path).returncode == 0
    assert run_cli(*verify, "--origin", "effectledger/acme", cwd=tmp_path).returncode == 0
    for pin in (("--tenant", "globex"), ("--origin", "effectledger/globex")):
        refused = run_cli(*verify, *pin, cwd=tmp_path)
        assert refused.returncode == 1
        assert "checkpoint_origin_mismatch" in refused.stdout + refused.stderr
        assert "not effectledger/globex" in refused.stdout + refused.stderr


def test_a_restore_from_a_backup_from_the_command_line(history: str, tmp_path: Path) -> None:
    """Seal, back up, go on, restore the backup: seal refuses, `audit restore` states the loss,
    sealing goes on in the new segment, and the reviewer's verify prints the restore."""
    key_file, verifier = _keygen(tmp_path, "log.example")
    memory = tmp_path / "sealer" / "memory.json"
    seal = ("audit", "seal", "--db", history, "--key-file", str(key_file), "--memory", str(memory))
    assert run_cli(*seal, cwd=tmp_path).returncode == 0
    database = Path(history.removeprefix("sqlite:///"))
    backup = tmp_path / "backup.db"
    with sqlite3.connect(database) as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    store = open_store(history)
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    admit(Ledger(store), Context(tenant_id="acme", actor_id="alice"), receiver, "op-after")
    store.close()
    receiver.close()
    assert "log size 13" in run_cli(*seal, cwd=tmp_path).stdout
    for leftover in ("-wal", "-shm"):  # the restore, as the database's own tools do it
        database.with_name(database.name + leftover).unlink(missing_ok=True)
    shutil.copyfile(backup, database)

    refused = run_cli(*seal, cwd=tmp_path)
    assert refused.returncode != 0
    assert "rolled back" in refused.stderr
    assert "effectledger audit restore" in refused.stderr
    restore = ("audit", "restore", "--db", history, "--key-file", str(key_file))
    missing = run_cli(*restore, "--tenant", "acme", "--memory", str(memory), cwd=tmp_path)
    assert missing.returncode == 2
    assert "--reason" in missing.stderr
    restored = run_cli(
        *restore,
        "--tenant",
        "acme",
        "--memory",
        str(memory),
        "--reason",
        "disk lost; restored the 02:00 backup",
        cwd=tmp_path,
    )
    assert restored.returncode == 0, restored.stderr
    assert "starts effectledger/acme#2 at size 12, continuing effectledger/acme" in restored.stdout
    assert "had signed 13 entries; 1 are not in the restored log" in restored.stdout
    assert run_cli(*seal, cwd=tmp_path).returncode == 0
    bundle = tmp_path / "acme.jsonl"
    exported = run_cli(
        "audit", "export", "--db", history, "--tenant", "acme", "--out", str(bundle), cwd=tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    verified = run_cli("audit", "verify", "--bundle", str(bundle), "--key", verifier, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert (
        "restored from a backup: effectledger/acme#2 goes on from 12 leaves of effectledger/acme, "
        "which had signed 13; 1 entries it had signed are not in this log (reason: disk lost; "
        "restored the 02:00 backup)"
    ) in verified.stderr
    assert "verified log of tenant acme" in verified.stdout
