"""Sealers racing with witnesses: every cosignature stored is genuine, none is a false alarm.

Submitting reads what a witness last cosigned, asks it, then stores the line. 16 threads and 4
processes seal one log at once in small batches, each submitting every checkpoint it signs to
two witnesses on loopback. A sealer whose checkpoint the witness has already seen superseded
by a racer's larger one is not a refusal. Afterwards, on both backends: no sealer stopped,
every event has one position, each stored cosignature verifies (C2SP text alone) for its
checkpoint, one row per checkpoint and witness at most, and the latest checkpoint is cosigned
by both witnesses, which hold its size.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed
from effectledger.store import open_store
from tests.conftest import count_rows, raw_sql
from tests.contract.test_sealer_witnesses import W1, W2, Served
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import SIGNER
from tests.unit.test_witness import spec_verifies

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver, with 8 operations' events pending."""
    made = build(store_url, tmp_path)
    for _ in range(8):
        admitted(made)
    yield made
    close(made)


@pytest.fixture
def witnesses(tmp_path: Path) -> Iterator[list[Served]]:
    """Two witnesses on loopback, each with its own file."""
    folder = tmp_path / "witnesses"
    folder.mkdir()
    served = [Served(folder, W1), Served(folder, W2)]
    yield served
    for one in served:
        one.stop()


def entries(witnesses: list[Served]) -> list[str]:
    """The ``URL=KEY`` of each witness."""
    return [f"{w.endpoint.url}={w.key}" for w in witnesses]


def check(store_url: str, witnesses: list[Served]) -> None:
    """The durable facts after the race (see the module docstring)."""
    store = open_store(store_url)
    try:  # one last pass: the latest checkpoint is submitted by whoever seals next
        LogSealer(store, SIGNER, witnesses=entries(witnesses)).seal("acme")
    finally:
        store.close()
    assert count_rows(store_url, "log_pending") == 0
    positions = raw_sql(store_url, "SELECT position FROM log_entries ORDER BY position")
    assert [p for (p,) in positions] == list(range(24))
    notes = dict(raw_sql(store_url, "SELECT seq, note FROM log_checkpoints"))
    rows = raw_sql(store_url, "SELECT seq, witness_key, cosignature FROM checkpoint_cosignatures")
    assert len({(seq, key) for seq, key, _ in rows}) == len(rows)
    by_key = {w.key: w.cosigner for w in witnesses}
    for seq, key, line in rows:
        cosigner = by_key[str(key)]
        public = cosigner.verifier().public_key
        assert spec_verifies(str(notes[seq]), str(line), cosigner.name, public) is not None
    latest = max(notes)
    assert {str(key) for seq, key, _ in rows if seq == latest} == set(by_key)
    assert [w.held() for w in witnesses] == [24, 24]


def test_sixteen_sealer_threads_with_witnesses(
    service: EffectLedger, witnesses: list[Served], store_url: str
) -> None:
    """16 sealer threads submitting to two witnesses: no false refusal, only genuine lines."""
    outcomes: list[str] = []

    def seal() -> None:
        own = open_store(store_url)
        try:
            LogSealer(own, SIGNER, batch_size=2, witnesses=entries(witnesses)).seal("acme")
            outcomes.append("ok")
        except AuditVerificationFailed as exc:  # pragma: no cover - reported below
            outcomes.append(f"{exc.details.get('reason')}: {exc.message}")
        finally:
            own.close()

    threads = [threading.Thread(target=seal) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == ["ok"] * 16
    check(store_url, witnesses)


def test_four_sealer_processes_with_witnesses(
    service: EffectLedger, witnesses: list[Served], store_url: str
) -> None:
    """4 sealer processes submitting to two witnesses: no false refusal, only genuine lines."""
    command = [sys.executable, "-m", "tests.races.witness_sealer", store_url, "2"]
    workers = [
        subprocess.Popen(
            [*command, *entries(witnesses)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [worker.communicate(timeout=120)[0].strip() for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outcomes
    assert outcomes == ["ok"] * 4
    check(store_url, witnesses)
