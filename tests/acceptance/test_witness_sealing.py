"""Witnesses across processes: ``audit seal --witness`` against ``witness serve`` on loopback.

Two witnesses run as ``effectledger witness serve`` processes with their own files; the sealer
and the reviewer are ``effectledger audit`` processes over a ledger on each backend. Genuine
work is sealed and cosigned by both; one witness is stopped (the log goes on) and restarted on
its file (the next seal has the checkpoint cosigned); the export verifies with both witness keys.
Then the log is rolled back and a sealer that lies signs a fork with the genuine key: the
genuine sealer reports the witnesses' refusal, and a reviewer who kept nothing rejects the
bundle with a witness key while it verifies without one. Last, the log tables are emptied and
part of the events re-queued: the genuine sealer (no memory) re-seals them as checkpoint 1, is
refused, stops signing, and the re-sealed bundle is rejected the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.audit.keys.files import write_signer_key
from effectledger.audit.witnessing.cosign import Cosigner
from tests.acceptance.test_evidence_cli import run_cli
from tests.acceptance.test_witness_processes import WITNESS, WitnessProcess
from tests.conftest import count_rows, raw_sql
from tests.contract.test_sealer_memory import head, restore, unguard_log
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import SIGNER, VERIFIER_KEY

pytestmark = pytest.mark.slow

SECOND = Cosigner("witness.example/w2", bytes(range(96, 128)))


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger of the backend under test."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


def start(tmp_path: Path, cosigner: Cosigner) -> WitnessProcess:
    """A witness process with ``cosigner``'s key and its own folder (kept across restarts)."""
    folder = tmp_path / cosigner.name.replace("/", "_")
    folder.mkdir(exist_ok=True)
    key = folder / "witness.key"
    if not key.exists():
        write_signer_key(key, cosigner.key_string())
    return WitnessProcess(folder)


def test_witness_processes_cosign_a_cli_sealer_survive_a_restart_and_expose_a_lie(
    service: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """Both witnesses cosign; a restart resumes; a forked log is refused and its bundle rejected."""
    key_file = tmp_path / "log.key"
    write_signer_key(key_file, SIGNER.key_string())
    keys = [c.verifier().key_string() for c in (WITNESS, SECOND)]
    running = [start(tmp_path, WITNESS), start(tmp_path, SECOND)]
    try:

        def seal(*witnesses: WitnessProcess) -> tuple[int, str]:
            flags = [f"--witness={w.url}={k}" for w, k in zip(witnesses, keys, strict=False)]
            done = run_cli(
                "audit", "seal", "--db", store_url, "--key-file", str(key_file), *flags,
                cwd=tmp_path,
            )  # fmt: skip
            return done.returncode, done.stdout + done.stderr

        def verify(bundle: Path, *witness_keys: str) -> tuple[int, str]:
            flags = [f"--witness-key={k}" for k in witness_keys]
            done = run_cli(
                "audit", "verify", "--bundle", str(bundle), "--key", VERIFIER_KEY, *flags,
                cwd=tmp_path,
            )  # fmt: skip
            return done.returncode, done.stdout + done.stderr

        def export(name: str) -> Path:
            path = tmp_path / name
            done = run_cli(
                "audit", "export", "--db", store_url, "--tenant", "acme", "--out", str(path),
                cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return path

        admitted(service)
        assert seal(*running)[0] == 0
        earlier = head(store_url)
        assert count_rows(store_url, "checkpoint_cosignatures", "seq = 1") == 2
        running[1].stop()  # the second witness goes down mid-run
        admitted(service)
        status, said = seal(*running)
        assert status == 0, said
        assert "did not answer" in said
        assert count_rows(store_url, "log_checkpoints") == 2  # the log did not wait
        assert count_rows(store_url, "checkpoint_cosignatures", "seq = 2") == 1
        running[1] = start(tmp_path, SECOND)  # restarted on its own file
        assert seal(*running)[0] == 0
        assert count_rows(store_url, "checkpoint_cosignatures", "seq = 2") == 2
        genuine = export("genuine.jsonl")
        status, said = verify(genuine, *keys)
        assert status == 0, said

        # The lie: the log rolled back to checkpoint 1 and a fork signed with the genuine key.
        unguard_log(store_url)
        restore(store_url, earlier)
        raw_sql(store_url, "DELETE FROM log_pending")
        admitted(service)
        assert seal()[0] == 0  # a sealer that asks no witness signs the fork
        assert count_rows(store_url, "log_checkpoints", "size = 6") == 1
        status, said = seal(*running)
        assert status == 1
        assert "refused" in said
        assert count_rows(store_url, "checkpoint_cosignatures", "seq = 2") == 2  # genuine only
        forged = export("forged.jsonl")
        assert verify(forged)[0] == 0  # without a witness key the fork looks genuine
        status, said = verify(forged, keys[0])
        assert status == 1
        assert "cosignature_missing" in said
        held = [json.loads(line) for line in (tmp_path / "forged.jsonl").read_text().splitlines()]
        assert [line["seq"] for line in held if line["type"] == "checkpoint"] == [1, 2]
    finally:
        for process in running:
            process.stop()


def test_a_log_emptied_and_re_sealed_by_the_cli_is_refused_and_its_bundle_rejected(
    service: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """The genuine sealer re-seals an emptied log as checkpoint 1, reports the refusal, stops."""
    key_file = tmp_path / "log.key"
    write_signer_key(key_file, SIGNER.key_string())
    key = WITNESS.verifier().key_string()
    witness = start(tmp_path, WITNESS)
    try:
        seal = ["audit", "seal", "--db", store_url, "--key-file", str(key_file)]
        flag = f"--witness={witness.url}={key}"
        admitted(service)
        _, second = admitted(service)
        assert run_cli(*seal, flag, cwd=tmp_path).returncode == 0
        unguard_log(store_url)
        for table in ("log_entries", "log_checkpoints", "log_heads"):
            raw_sql(store_url, f"DELETE FROM {table}")
        raw_sql(  # only the second operation's events are re-queued
            store_url,
            "INSERT INTO log_pending (tenant_id, event_id, recorded_us) SELECT tenant_id, "
            f"event_id, recorded_us FROM audit_events WHERE operation_id = '{second}' "
            "ORDER BY sequence",
        )
        refused = run_cli(*seal, flag, cwd=tmp_path)
        assert refused.returncode == 1
        assert "refused" in refused.stderr
        assert count_rows(store_url, "log_checkpoints") == 1
        admitted(service)
        assert run_cli(*seal, flag, cwd=tmp_path).returncode == 1  # no further signature
        assert count_rows(store_url, "log_checkpoints") == 1
        bundle = tmp_path / "resealed.jsonl"
        exported = run_cli(
            "audit", "export", "--db", store_url, "--tenant", "acme", "--out", str(bundle),
            cwd=tmp_path,
        )  # fmt: skip
        assert exported.returncode == 0, exported.stderr
        verify = ["audit", "verify", "--bundle", str(bundle), "--key", VERIFIER_KEY]
        assert run_cli(*verify, cwd=tmp_path).returncode == 0
        rejected = run_cli(*verify, f"--witness-key={key}", cwd=tmp_path)
        assert rejected.returncode == 1
        assert "cosignature_missing" in rejected.stderr
    finally:
        witness.stop()
