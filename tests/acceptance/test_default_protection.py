"""A fresh install is protected: the README's commands give a ledger with its keys, whose evidence
verifies with the printed verifier key and whose perform refuses an amount re-hashed by hand.

The administrator of these tests has the database and no key directory: they rewrite an approved
refund of 30 to 500,000 with raw SQL, recomputing every digest and hash (``tests/races/forgery``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from effectledger import (
    Context,
    EffectLedger,
    InvalidInput,
    NotFound,
    OperationState,
    SimulatedReceiver,
    TamperedOperation,
    connect,
)
from effectledger.app.protection import create_keys, load_keys
from effectledger.keyfiles import KEY_DIR_ENV, key_directory_for
from effectledger.store import open_store
from tests.conftest import count_rows, run_sql
from tests.faults._harness import spawn_all
from tests.races.forgery import FORGED_AMOUNT, forge
from tests.races.test_authority_races import PROCESSES, THREADS, race

AGENT = Context(tenant_id="acme", actor_id="agent-7")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
VERIFIER_LINE = re.compile(r"verifier key \(give it to reviewers\): (\S+)")


class Refund(BaseModel):
    """The README's refund."""

    order_id: str
    amount_minor: int
    currency: str


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EFFECTLEDGER_DB"}
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        cwd=cwd,
        env={**env, "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _migrate(store_url: str, tmp_path: Path, *extra: str) -> str:
    """``effectledger migrate`` as the README runs it; the verifier key it printed."""
    done = _cli("migrate", "--db", store_url, *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = VERIFIER_LINE.search(done.stdout)
    assert found is not None, done.stdout
    return found.group(1)


def _approved(ledger: EffectLedger, receiver: SimulatedReceiver) -> tuple[str, str]:
    """The README's refund of 30, proposed and approved: (proposal id, approval id)."""
    refund = ledger.action(
        name="refund", contract="refund-v1", arguments=Refund, destination=receiver
    )
    proposal = ledger.propose(AGENT, refund, order_id="ord-1001", amount_minor=30, currency="EUR")
    approval = ledger.approve(RITA, proposal)
    return proposal.proposal_id, approval.approval_id


def _unprotected_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "effectledger" and "UNPROTECTED" in record.getMessage()
    ]


def test_a_fresh_ledger_refuses_an_amount_rehashed_by_hand(
    store_url: str, tmp_path: Path, receiver: SimulatedReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """On a ledger made by ``effectledger migrate`` and opened by ``connect()`` as the README
    shows, the first perform of a refund re-hashed from 30 to 500,000 in the database is
    ``tampered_operation``: no attempt row, and the receiver counts no submission and no effect."""
    _migrate(store_url, tmp_path)
    caplog.set_level(logging.WARNING, logger="effectledger")
    with connect(store_url) as ledger:
        proposal_id, approval_id = _approved(ledger, receiver)
        forge(ledger, store_url, proposal_id)
        with pytest.raises(TamperedOperation) as refused:
            ledger.perform(AGENT, proposal_id, approval=approval_id)
    assert _unprotected_warnings(caplog) == []
    assert refused.value.code == "tampered_operation"
    assert refused.value.details["reason"] == "trail_not_authentic"
    assert receiver.counts().submissions == 0
    assert receiver.counts().effects == 0
    assert count_rows(store_url, "attempts") == 0


def test_the_same_forgery_is_sent_by_a_ledger_opened_without_keys(
    store_url: str, tmp_path: Path, receiver: SimulatedReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """The control: opened with ``keys=None`` the ledger says once that it is unprotected, and
    the same forgery reaches the receiver as a refund of 500,000."""
    caplog.set_level(logging.WARNING, logger="effectledger")
    with connect(store_url, keys=None) as ledger:
        proposal_id, approval_id = _approved(ledger, receiver)
        forge(ledger, store_url, proposal_id)
        done = ledger.perform(AGENT, proposal_id, approval=approval_id)
    (warning,) = _unprotected_warnings(caplog)
    assert "no trail key" in warning
    assert "no log key" in warning
    assert done.state is OperationState.SUCCEEDED
    ((key,),) = run_sql(store_url, "SELECT idempotency_key FROM operations")
    effect = receiver.effect(str(key))
    assert effect is not None
    assert effect.amount == FORGED_AMOUNT


README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
README_URL = "sqlite:///ledger.db"


def _readme_commands() -> list[list[str]]:
    """The README's evidence commands, each as arguments after ``effectledger``."""
    block = re.search(r"<!-- evidence-commands -->\n```sh\n(.*?)```", README, re.S)
    assert block is not None
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0] == ".venv/bin/effectledger", line
            commands.append(words[1:])
    assert [words[:2] for words in commands] == [
        ["migrate", "--db"],
        ["audit", "seal"],
        ["audit", "export"],
        ["audit", "verify"],
    ]
    return commands


@pytest.mark.slow
def test_the_readme_commands_give_evidence_that_verifies_with_the_printed_key(
    store_url: str, tmp_path: Path, receiver: SimulatedReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's evidence commands as written (the store URL swapped for PostgreSQL's), a
    perform through ``connect()`` between them: the bundle verifies with the key migrate
    printed, and does not verify under another key."""
    monkeypatch.chdir(tmp_path)  # the README's relative paths
    url = store_url if store_url.startswith("postgresql") else README_URL
    migrate, *evidence = [
        [url if word == README_URL else word for word in words] for words in _readme_commands()
    ]
    verifier_key = _migrate(url, tmp_path, *migrate[3:])
    with connect(url) as ledger:
        proposal_id, approval_id = _approved(ledger, receiver)
        assert ledger.perform(AGENT, proposal_id, approval=approval_id).outcome == "performed"
    assert receiver.counts().effects == 1
    *keeping, verify = evidence
    for words in keeping:
        done = _cli(*words, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert count_rows(store_url, "log_pending") == 0
    verified = _cli(*[verifier_key if w == "VERIFIER_KEY" else w for w in verify], cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    keygen = _cli("audit", "keygen", cwd=tmp_path)
    other = re.search(r"verifier key: (\S+)", keygen.stdout)
    assert other is not None, keygen.stdout
    forged_key = [other.group(1) if w == "VERIFIER_KEY" else w for w in verify]
    assert _cli(*forged_key, cwd=tmp_path).returncode == 1


@pytest.mark.slow
def test_the_worker_seals_a_default_ledger_with_the_key_it_finds(
    store_url: str, tmp_path: Path, receiver: SimulatedReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``effectledger worker --once`` over a migrated ledger needs no key setting: its sealing
    pass signs checkpoints with the key directory's log key and leaves nothing pending."""
    _migrate(store_url, tmp_path)
    with connect(store_url) as ledger:
        _approved(ledger, receiver)
    assert count_rows(store_url, "log_pending") > 0
    monkeypatch.setenv("EFFECTLEDGER_TEST_RECEIVER", str(tmp_path / "worker-receiver.db"))
    done = _cli(
        "worker", "--db", store_url, "--app", "tests.worker.apps:refunds", "--once",
        "--seal-interval", "30", cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "UNPROTECTED" not in done.stderr
    assert count_rows(store_url, "log_checkpoints") >= 1
    assert count_rows(store_url, "log_pending") == 0


def test_migrate_keeps_the_keys_private_and_prints_only_the_verifier_key(
    tmp_path: Path, receiver: SimulatedReceiver
) -> None:
    """The key directory beside ``ledger.db`` is mode 700 and its files 600; neither migrate's
    output nor any stored row holds the trail secret or the log's private key."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = _cli("migrate", "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "ledger.db.keys"
    assert key_directory_for(url) == directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = {path.name: stat.S_IMODE(path.stat().st_mode) for path in directory.iterdir()}
    assert files == {"trail.keys": 0o600, "log.key": 0o600, "log.pub": 0o600}
    keys = load_keys(directory)
    assert keys.trail_keys is not None
    signer = keys.load_signer()
    assert signer is not None
    # The secrets' base64 may hold "+" itself: each is what follows the fields before it
    # (TRAIL+<key id>+<secret>; PRIVATE+KEY+<name>+<key hash>+<secret>).
    secrets = [
        (directory / "trail.keys").read_text().strip().split("+", 2)[2],
        keys.trail_keys.current.secret.hex(),
        (directory / "log.key").read_text().strip().split("+", 4)[4],
    ]
    assert min(len(secret) for secret in secrets) >= 40, secrets
    assert signer.verifier().key_string() in done.stdout
    with connect(url) as ledger:
        proposal_id, approval_id = _approved(ledger, receiver)
        ledger.perform(AGENT, proposal_id, approval=approval_id)
    stored = " ".join(
        str(value)
        for table in ("audit_events", "operations", "proposals", "approvals", "attempts")
        for row in run_sql(url, f"SELECT * FROM {table}")
        for value in row
    )
    for secret in secrets:
        assert secret not in done.stdout + done.stderr
        assert secret not in stored
    assert not list(tmp_path.glob(".ledger.db.keys.*"))  # no staging directory left behind


def _summary_keys(store_url: str, tmp_path: Path) -> dict[str, Any]:
    import json

    shown = _cli(
        "status", "--db", store_url, "--tenant", "acme", "--summary", "--json", cwd=tmp_path
    )
    assert shown.returncode == 0, shown.stderr
    keys: dict[str, Any] = json.loads(shown.stdout)["keys"]
    return keys


@pytest.mark.slow
def test_an_older_ledger_without_keys_opens_loudly_and_migrate_offers_the_keys(
    store_url: str, tmp_path: Path, receiver: SimulatedReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger that wrote events before it had keys still opens, with one warning naming what
    is unprotected, and ``status --summary`` says so; ``migrate`` points at ``--create-keys``,
    which makes the key directory, after which ``connect()`` tags and warns no more."""
    with connect(store_url, keys=None) as older:
        _approved(older, receiver)
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="effectledger")
    with connect(store_url) as reopened:
        assert reopened.ledger.settings.trail_keys is None
    assert len(_unprotected_warnings(caplog)) == 1
    assert len(_summary_keys(store_url, tmp_path)["unprotected"]) == 2
    offered = _cli("migrate", "--db", store_url, cwd=tmp_path)
    assert offered.returncode == 0, offered.stderr
    assert "--create-keys" in offered.stdout
    directory = key_directory_for(store_url, os.environ.get(KEY_DIR_ENV))
    assert not directory.exists()
    _migrate(store_url, tmp_path, "--create-keys")
    summary = _summary_keys(store_url, tmp_path)
    assert (summary["trail_key"], summary["unprotected"]) == ("trail-1", [])
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="effectledger")
    with connect(store_url) as keyed:
        assert keyed.ledger.settings.trail_keys is not None
        _approved(keyed, receiver)
    assert _unprotected_warnings(caplog) == []
    tags = [tag for (tag,) in run_sql(store_url, "SELECT trail_tag FROM audit_events")]
    assert tags.count(None) == 2  # the older ledger's proposal and approval
    assert sum(str(tag).startswith("t1:trail-1:") for tag in tags) == 2  # the new ones


@pytest.mark.postgres
def test_a_postgres_ledger_without_a_key_directory_is_refused_before_anything_is_made(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no ``key_dir`` configured, ``connect()`` and ``migrate`` on PostgreSQL refuse with
    ``invalid_input`` (field ``key_dir``) and create no schema."""
    monkeypatch.delenv(KEY_DIR_ENV)
    with pytest.raises(InvalidInput, match="key_dir") as refused:
        connect(postgres_url)
    assert refused.value.details["field"] == "key_dir"
    migrated = _cli("migrate", "--db", postgres_url, cwd=tmp_path)
    assert migrated.returncode == 1
    assert "error [invalid_input]" in migrated.stderr
    assert "key_dir" in migrated.stderr
    with pytest.raises(NotFound):
        open_store(postgres_url, create=False)


def _key_in_process(store_url: str, barrier: Any, results: Any, worker: int) -> None:
    """One spawned process's connect to the fresh ledger; reports its trail key's digest."""
    barrier.wait()
    with connect(store_url) as ledger:
        keys = ledger.ledger.settings.trail_keys
        assert keys is not None
        results.put({"worker": worker, "key": hashlib.sha256(keys.current.secret).hexdigest()})


def _directory_of(store_url: str) -> Path:
    return key_directory_for(store_url, os.environ.get(KEY_DIR_ENV)).absolute()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_racing_first_opens_of_a_fresh_ledger_share_one_set_of_keys(
    mode: str, store_url: str
) -> None:
    """16 threads, or 4 processes, opening a fresh ledger at once all end with the same trail
    key, and one complete key directory exists, with no staging directory left behind."""
    if mode == "threads":

        def first_open(index: int) -> str:
            with connect(store_url) as ledger:
                keys = ledger.ledger.settings.trail_keys
                assert keys is not None
                return hashlib.sha256(keys.current.secret).hexdigest()

        seen = race(THREADS, first_open)
    else:
        seen = [r["key"] for r in spawn_all(_key_in_process, [(store_url,)] * PROCESSES)]
    directory = _directory_of(store_url)
    kept = load_keys(directory).trail_keys
    assert kept is not None
    assert set(seen) == {hashlib.sha256(kept.current.secret).hexdigest()}
    assert sorted(path.name for path in directory.iterdir()) == ["log.key", "log.pub", "trail.keys"]
    assert not list(directory.parent.glob(f".{directory.name}.*"))


def test_creating_keys_where_they_exist_keeps_the_first_ones(tmp_path: Path) -> None:
    """A second ``create_keys`` on an existing key directory returns its keys unchanged."""
    first = create_keys(tmp_path / "keys")
    again = create_keys(tmp_path / "keys")
    assert first.created
    assert not again.created
    assert first.trail_keys is not None
    assert again.trail_keys is not None
    assert first.trail_keys.current.secret == again.trail_keys.current.secret
    assert first.verifier_key() == again.verifier_key()


@pytest.mark.slow
def test_the_trail_key_is_rotated_re_tagged_and_dropped_from_the_command_line(
    store_url: str, tmp_path: Path, receiver: SimulatedReceiver
) -> None:
    """docs/operating.md's rotation, as an operator runs it: rotate, the old key's drop refused
    while a trail relies on it, retag, drop; the approved refund still performs once."""
    _migrate(store_url, tmp_path)
    with connect(store_url) as ledger:
        proposal_id, approval_id = _approved(ledger, receiver)
    directory = key_directory_for(store_url, os.environ.get(KEY_DIR_ENV))
    (old_id,) = [key.key_id for key in load_keys(directory).trail_keys.keys]  # type: ignore[union-attr]

    rotated = _cli("audit", "rotate-trail-key", "--db", store_url, cwd=tmp_path)
    assert rotated.returncode == 0, rotated.stderr
    assert f"{old_id}: retired at" in rotated.stdout
    assert "PRIVATE" not in rotated.stdout + rotated.stderr  # no secret is printed
    early = _cli("audit", "drop-trail-key", "--db", store_url, old_id, cwd=tmp_path)
    assert early.returncode != 0
    assert "run `effectledger audit retag` first" in early.stderr
    assert old_id in [key.key_id for key in load_keys(directory).trail_keys.keys]  # type: ignore[union-attr]

    retagged = _cli("audit", "retag", "--db", store_url, cwd=tmp_path)
    assert retagged.returncode == 0, retagged.stdout + retagged.stderr
    assert ", 0 refused" in retagged.stdout
    assert " 0 re-tagged" not in retagged.stdout
    dropped = _cli("audit", "drop-trail-key", "--db", store_url, old_id, cwd=tmp_path)
    assert dropped.returncode == 0, dropped.stderr
    remaining = load_keys(directory).trail_keys
    assert remaining is not None
    assert old_id not in remaining.key_ids
    assert count_rows(store_url, "audit_events", "event_type = 'TrailRetagged'") >= 1

    with connect(store_url) as ledger:  # the old key's secret is gone; the refund performs
        ledger.action(name="refund", contract="refund-v1", arguments=Refund, destination=receiver)
        done = ledger.perform(AGENT, proposal_id, approval=approval_id)
    assert done.outcome == "performed", done
    assert receiver.counts().effects == 1
    again = _cli("audit", "retag", "--db", store_url, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
