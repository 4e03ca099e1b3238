"""The worker's sealer remembers what it signed, outside the database, by default.

The attack: a witness is down while the worker signs checkpoint N; the database is then rolled
back to before N and new work arrives. A sealer that learns what it signed from the database
signs a fork at the old size plus the new work, and the witness, which never saw N, cosigns it.
The worker's sealer keeps ``sealer-memory.json`` in the ledger's key directory (or where
``sealer_memory`` says), so it refuses the rolled-back log before any signature, the witness
never sees the fork, and the refusal is logged with its reason.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import Context, EffectLedger, SimulatedReceiver, connect
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed
from effectledger.keyfiles import KEY_DIR_ENV, SEALER_MEMORY_FILE, key_directory_for
from effectledger.workers import Worker, WorkerSettings
from tests.conftest import admit, count_rows
from tests.contract.test_sealer_memory import head, restore, unguard_log
from tests.contract.test_sealer_witnesses import ORIGIN, W1, Served
from tests.support.evidence import SIGNER

ONLY_SEALING = {"dispatch_threads": 0, "recovery_threads": 0}


@pytest.fixture
def app(store_url: str, receiver: SimulatedReceiver) -> Iterator[EffectLedger]:
    """The ledger as a worker opens it: ``connect`` with the key directory made by migrate."""
    with connect(store_url, destinations=[receiver], signer=SIGNER) as opened:
        yield opened


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[Served]:
    """One witness on loopback, with its own file."""
    folder = tmp_path / "witness"
    folder.mkdir()
    served = Served(folder, W1)
    yield served
    served.stop()


def remembered(path: Path) -> dict[str, object]:
    """What the memory file holds for acme's log."""
    entry = json.loads(path.read_text("utf-8"))["logs"][ORIGIN]
    assert isinstance(entry, dict)
    return entry


def test_connect_keeps_the_sealer_memory_in_the_key_directory(
    app: EffectLedger, store_url: str, context: Context, receiver: SimulatedReceiver
) -> None:
    """The memory is ``sealer-memory.json`` beside the keys, written by the first seal."""
    directory = key_directory_for(store_url, os.environ.get(KEY_DIR_ENV))
    assert app.sealer_memory == directory / SEALER_MEMORY_FILE
    admit(app.ledger, context, receiver, "op-1")
    (report,) = app.seal_pending()
    assert report.sealed == 1
    assert remembered(directory / SEALER_MEMORY_FILE) == {
        "size": 1,
        "root": head(store_url)[1],
        "pending": None,
    }
    assert (directory / SEALER_MEMORY_FILE).stat().st_mode & 0o077 == 0


def test_a_fork_after_a_witness_outage_is_refused_by_the_worker_and_never_cosigned(
    app: EffectLedger,
    witness: Served,
    store_url: str,
    context: Context,
    receiver: SimulatedReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Witness down at checkpoint N, log rolled back, new work: the worker signs nothing, the
    witness holds the last checkpoint it saw; a memory-less sealer would have had the fork
    cosigned (the control)."""
    endpoint = f"http://127.0.0.1:{witness.port}={witness.key}"
    settings = WorkerSettings(seal_witnesses=(endpoint,), **ONLY_SEALING)
    worker = Worker(app, settings)
    admit(app.ledger, context, receiver, "op-1")
    assert worker.run_once() == {"seal": 1}
    assert witness.held() == 1
    earlier = head(store_url)
    witness.stop()  # the outage: checkpoint 2 is signed, never cosigned
    admit(app.ledger, context, receiver, "op-2")
    assert worker.run_once() == {"seal": 1}
    assert head(store_url)[0] == 2
    assert app.sealer_memory is not None
    signed = remembered(app.sealer_memory)
    assert signed["size"] == 2
    unguard_log(store_url)
    restore(store_url, earlier)  # the database is rolled back to before checkpoint 2
    witness.start()
    admit(app.ledger, context, receiver, "op-3")  # new work: the fork's second leaf
    checkpoints = count_rows(store_url, "log_checkpoints")
    with pytest.raises(AuditVerificationFailed, match="rolled back") as refused:
        Worker(app, settings).run_once()  # a restarted worker: the memory is the file
    assert refused.value.details["reason"] == "log_rolled_back"
    with caplog.at_level(logging.ERROR, logger="effectledger.workers"):
        Worker(app, settings, wait=lambda seconds: True).run()  # the long-running loop
    assert "refused to sign [audit_verification_failed/log_rolled_back]" in caplog.text
    assert count_rows(store_url, "log_checkpoints") == checkpoints
    assert head(store_url) == earlier
    assert witness.held() == 1
    assert remembered(app.sealer_memory) == signed
    # The control: the same sequence without memory signs the fork and has it cosigned.
    liar = LogSealer(app.store, SIGNER, witnesses=[witness.endpoint])
    assert liar.seal("acme").cosigned == 1
    assert witness.held() == 2


def test_the_worker_setting_points_the_memory_elsewhere(
    app: EffectLedger,
    store_url: str,
    context: Context,
    receiver: SimulatedReceiver,
    tmp_path: Path,
) -> None:
    """``sealer_memory`` names another file: it is the one written, and the one that refuses."""
    elsewhere = tmp_path / "sealer-host" / "memory.json"
    settings = WorkerSettings(sealer_memory=str(elsewhere), **ONLY_SEALING)
    admit(app.ledger, context, receiver, "op-1")
    assert Worker(app, settings).run_once() == {"seal": 1}
    earlier = head(store_url)
    admit(app.ledger, context, receiver, "op-2")
    assert Worker(app, settings).run_once() == {"seal": 1}
    assert remembered(elsewhere)["size"] == 2
    assert app.sealer_memory is not None
    assert not app.sealer_memory.exists()
    unguard_log(store_url)
    restore(store_url, earlier)
    admit(app.ledger, context, receiver, "op-3")
    checkpoints = count_rows(store_url, "log_checkpoints")
    with pytest.raises(AuditVerificationFailed) as refused:
        Worker(app, settings).run_once()
    assert refused.value.details["reason"] == "log_rolled_back"
    assert count_rows(store_url, "log_checkpoints") == checkpoints
