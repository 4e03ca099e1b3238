"""A witness in its own process on loopback cosigns a genuine log and refuses a lying sealer.

``effectledger witness serve`` runs as a real process with its own file. A genuine sealer's
checkpoints are submitted over HTTP; the witness is killed and started again on the same file;
then the database is rolled back and a sealer without memory signs a different history with the
genuine key (a sealer that lies): the witness refuses to cosign it, before and after a restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.audit.witnessing.cosign import CosignatureVerifier, Cosigner
from effectledger.audit.witnessing.witness_http import submit_checkpoint
from effectledger.errors import AuditVerificationFailed
from effectledger.store import Store
from tests.conftest import make_store_url, run_sql
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import SIGNER

WITNESS = Cosigner("witness.example/w1", bytes(range(64, 96)))


class WitnessProcess:
    """``effectledger witness serve`` in a child process; ``url`` once it listens."""

    def __init__(self, folder: Path, *, sigint_ignored: bool = False) -> None:
        key = folder / "witness.key"
        if not key.exists():
            key.write_text(WITNESS.key_string() + "\n", "utf-8")
            key.chmod(0o600)
        command = [
            sys.executable,
            "-m",
            "effectledger.cli",
            "witness",
            "serve",
            "--db",
            str(folder / "witness.db"),
            "--key-file",
            str(key),
            "--log-key",
            SIGNER.verifier().key_string(),
            "--json",
        ]
        if sigint_ignored:  # as a shell starts a background job: the child inherits SIG_IGN
            command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert first, self.process.stderr.read() if self.process.stderr else ""
        self.url: str = json.loads(first)["url"]
        self.errors = ""  # what it wrote on standard error, once stopped
        assert self.url.startswith("http://127.0.0.1:")

    def stop(self, number: int = signal.SIGINT) -> int:
        """Send ``number`` to the witness and wait for it to end; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(number)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a witness that ignored the signal
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stderr is not None and not self.process.stderr.closed:
            self.errors = self.process.stderr.read()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode


@pytest.fixture
def service(tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh SQLite ledger (the rollback is a file-level edit)."""
    made = build(make_store_url("sqlite", tmp_path), tmp_path)
    yield made
    close(made)


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[list[WitnessProcess]]:
    """The running witness (the list holds the current process across restarts)."""
    folder = tmp_path / "witness"
    folder.mkdir()
    running = [WitnessProcess(folder)]
    yield running
    running[-1].stop()


def restart(running: list[WitnessProcess], tmp_path: Path) -> WitnessProcess:
    """Stop the witness and start it again on the same file."""
    running[-1].stop()
    running.append(WitnessProcess(tmp_path / "witness"))
    return running[-1]


def leaves(store: Store) -> list[bytes]:
    """Every leaf hash of acme's log, in position order."""
    rows = store.read(
        lambda tx: tx.all("log_entries_from", {"tenant_id": "acme", "position": 0, "limit": 10**6})
    )
    return [bytes.fromhex(row["leaf_hash"]) for row in rows]


def submit_latest(store: Store, url: str, held: int) -> str:
    """Ask the witness at ``url`` to cosign acme's latest checkpoint, from size ``held``."""
    latest = store.one("log_checkpoint_latest", {"tenant_id": "acme"})
    assert latest is not None
    tree = MerkleTree(leaves(store))

    def proof_from(size: int) -> list[bytes]:
        return [] if size == 0 else tree.consistency_proof(size, int(latest["size"]))

    return submit_checkpoint(
        url,
        CosignatureVerifier.from_key_string(WITNESS.verifier().key_string()),
        latest["note"],
        old_size=held,
        proof=proof_from(held),
        proof_from=proof_from,
    )


def test_a_witness_process_cosigns_on_and_refuses_a_lying_sealer_across_restarts(
    service: EffectLedger, witness: list[WitnessProcess], tmp_path: Path
) -> None:
    """Genuine checkpoints are cosigned; a rolled-back fork signed with the genuine key is not."""
    store = service.ledger.store
    url = make_store_url("sqlite", tmp_path)
    admitted(service)
    LogSealer(store, SIGNER).seal("acme")
    line = submit_latest(store, witness[-1].url, 0)
    assert line.startswith("\u2014 witness.example/w1 ")
    saved = run_sql(url, "SELECT size, root_hash, frontier, checkpoint_seq FROM log_heads")[0]
    admitted(service)
    LogSealer(store, SIGNER).seal("acme")
    submit_latest(store, witness[-1].url, 3)  # the size the witness holds, with its proof
    restarted = restart(witness, tmp_path)
    admitted(service)
    LogSealer(store, SIGNER).seal("acme")
    assert submit_latest(store, restarted.url, 0)  # it names the size it held: 6
    # The lie: the log tables rolled back to size 3, and a different history signed on from there.
    for table in ("log_entries", "log_checkpoints"):
        run_sql(url, f"DROP TRIGGER {table}_no_delete")
    size, root, frontier, seq = saved
    run_sql(url, "DELETE FROM log_entries WHERE position >= ?", (size,))
    run_sql(url, "DELETE FROM log_checkpoints WHERE seq > ?", (seq,))
    run_sql(
        url,
        "UPDATE log_heads SET size = ?, root_hash = ?, frontier = ?, checkpoint_seq = ?",
        (size, root, frontier, seq),
    )
    for _ in range(3):
        admitted(service)
    forked = LogSealer(store, SIGNER).seal("acme")
    assert forked.size == 12  # signed by the genuine key, a fork of what the witness saw
    with pytest.raises(AuditVerificationFailed, match="refused"):
        submit_latest(store, witness[-1].url, 0)
    again = restart(witness, tmp_path)
    with pytest.raises(AuditVerificationFailed, match="refused"):
        submit_latest(store, again.url, 9)
    assert os.path.getsize(tmp_path / "witness" / "witness.db") > 0


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_witness_stops_cleanly_on_sigterm_and_on_sigint_even_started_in_the_background(
    tmp_path: Path, number: int
) -> None:
    """A service manager's SIGTERM, or SIGINT to a witness that inherited SIGINT ignored (a
    shell's background job), ends it with status 0 and no traceback, and its file reopens."""
    folder = tmp_path / "witness"
    folder.mkdir()
    witness = WitnessProcess(folder, sigint_ignored=True)
    assert witness.stop(number) == 0  # not -9 after a 30 s wait, nor -15
    assert "Traceback" not in witness.errors, witness.errors
    restarted = WitnessProcess(folder)  # the file was closed, not left locked or half-written
    assert restarted.stop() == 0
