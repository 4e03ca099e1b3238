"""The sealer seals only authentic events: what the trail key never tagged is never signed.

A database administrator without the trail key writes events the way the ledger would (the
ledger's own code over the database, with no key or with a key of the same id and another
secret): a whole forged refund trail, or a fabricated "never sent" correction appended to a real
refund. The hash chain of each is perfect. The sealer holding the ledger's trail key stops at the
first such event with ``event_not_authentic`` naming it, and signs nothing: no checkpoint row, no
leaf. ``explain`` from the database names the events instead of telling them, and an export holds
none of them, so no bundle can carry them as sealed fact.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import Context, EffectLedger, OperationState
from effectledger.audit.bundles.export import export_log
from effectledger.audit.bundles.reader import read_events
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.explain import explain_stored
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed
from effectledger.events.authentication import TrailKey, TrailKeys, new_trail_key
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Worker, WorkerSettings
from tests.conftest import count_rows
from tests.races.forgery import admitted
from tests.races.world import AGENT, build, close
from tests.support.evidence import SIGNER, VERIFIER_KEY

KEY = TrailKey.from_key_string(new_trail_key("trail-1"))
IMPOSTOR = TrailKey("trail-1", os.urandom(32))
"""A key with the ledger key's id and another secret: what an administrator could make up."""

AUDITOR = Context(tenant_id="acme", actor_id="auditor-1", roles=frozenset({"auditor"}))


@pytest.fixture
def keyed(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service whose ledger holds the trail key."""
    made = build(store_url, tmp_path, trail_keys=TrailKeys(KEY))
    yield made
    close(made)


@pytest.fixture
def forger_folder(tmp_path: Path) -> Path:
    """The forger's own folder (its receiver file)."""
    folder = tmp_path / "forger"
    folder.mkdir()
    return folder


def sealer(service: EffectLedger) -> LogSealer:
    """The genuine sealer: the log key and the ledger's trail keys."""
    return LogSealer(service.ledger.store, SIGNER, trail_keys=service.ledger.settings.trail_keys)


def operation_events(operation_id: str) -> str:
    """A ``WHERE`` clause selecting the rows of ``operation_id``'s events."""
    return f"event_id IN (SELECT event_id FROM audit_events WHERE operation_id = '{operation_id}')"


def log_rows(store_url: str) -> tuple[int, int]:
    """``(checkpoints, leaves)`` stored for every log."""
    return count_rows(store_url, "log_checkpoints"), count_rows(store_url, "log_entries")


def performed(service: EffectLedger) -> str:
    """A genuine refund of 30, admitted and performed once: its operation id."""
    _, operation_id = admitted(service)
    executor = service.executor_for(next(iter(service.destinations)))
    assert executor.execute(AGENT, operation_id).state is OperationState.SUCCEEDED
    return operation_id


@pytest.mark.parametrize("forger_key", [None, IMPOSTOR], ids=["untagged", "impostor_key"])
def test_a_forged_trail_is_not_sealed_and_nothing_is_signed(
    keyed: EffectLedger,
    store_url: str,
    forger_folder: Path,
    forger_key: TrailKey | None,
) -> None:
    """A whole refund trail the trail key never tagged stops the sealer: no checkpoint, no leaf."""
    genuine = performed(keyed)
    assert sealer(keyed).seal("acme").checkpoints == 1
    before = log_rows(store_url)
    forger = build(
        store_url,
        forger_folder,
        trail_keys=None if forger_key is None else TrailKeys(forger_key),
    )
    try:
        _, forged = admitted(forger)
    finally:
        close(forger)
    first = keyed.ledger.events(AGENT, forged)[0]
    with pytest.raises(AuditVerificationFailed, match="not authenticated") as refused:
        sealer(keyed).seal("acme")
    assert refused.value.details["reason"] == "event_not_authentic"
    assert refused.value.details["event_id"] == first.event_id
    assert refused.value.details["operation_id"] == forged
    assert refused.value.details["problem"] == ("untagged" if forger_key is None else "tag_invalid")
    assert log_rows(store_url) == before
    assert count_rows(store_url, "log_entries", operation_events(forged)) == 0
    assert count_rows(store_url, "log_pending", operation_events(forged)) == 3
    with pytest.raises(AuditVerificationFailed) as told:
        explain_stored(keyed.ledger.store, "acme", forged, trail_keys=TrailKeys(KEY))
    assert told.value.details["reason"] == "event_not_authentic"
    assert [event["sequence"] for event in told.value.details["events"]] == [1, 2, 3]
    assert explain_stored(keyed.ledger.store, "acme", genuine, trail_keys=TrailKeys(KEY))


def test_a_fabricated_correction_of_a_real_refund_is_not_sealed_nor_told(
    keyed: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """A "never sent" correction written without the key is refused by the sealer, named by
    explain, and absent from an export that still verifies."""
    operation_id = performed(keyed)
    assert sealer(keyed).seal("acme").checkpoints == 1
    before = log_rows(store_url)
    trail = keyed.ledger.events(AGENT, operation_id)
    administrator = Ledger(open_store(store_url))  # the ledger's own code, without the key
    try:
        fabricated = administrator.correct_event(
            AUDITOR,
            operation_id,
            event_id=trail[-1].event_id,
            reason="never sent: the receiver has no such refund",
        )
    finally:
        administrator.store.close()
    assert fabricated.sequence == len(trail) + 1
    # Without the tag check the fabrication would be told as fact: the control.
    told = explain_stored(keyed.ledger.store, "acme", operation_id)
    assert fabricated.event_id in {sentence.event_id for sentence in told}
    with pytest.raises(AuditVerificationFailed, match="not authenticated") as refused:
        sealer(keyed).seal("acme")
    assert refused.value.details["reason"] == "event_not_authentic"
    assert refused.value.details["event_id"] == fabricated.event_id
    assert log_rows(store_url) == before
    with pytest.raises(AuditVerificationFailed) as named:
        explain_stored(keyed.ledger.store, "acme", operation_id, trail_keys=TrailKeys(KEY))
    assert named.value.details["events"] == [
        {
            "sequence": fabricated.sequence,
            "event_id": fabricated.event_id,
            "event_type": "AuditCorrection",
            "problem": "untagged",
        }
    ]
    path = tmp_path / "acme.jsonl"
    export_log(keyed.ledger.store, "acme", path)
    assert verify_bundle(path, [VERIFIER_KEY]).ok
    exported = read_events(path, operation_id)
    assert [event.event_id for event in exported] == [event.event_id for event in trail]


def test_the_worker_refuses_to_seal_a_fabricated_correction(
    keyed: EffectLedger, store_url: str
) -> None:
    """The worker's sealing pass checks the tags too: the fabrication stops it, nothing signed."""
    operation_id = performed(keyed)
    app = EffectLedger(keyed.ledger, signer=SIGNER)  # the worker's ledger: the same trail key
    worker = Worker(app, WorkerSettings(dispatch_threads=0, recovery_threads=0))
    trail = keyed.ledger.events(AGENT, operation_id)
    assert worker.run_once() == {"seal": len(trail)}
    before = log_rows(store_url)
    administrator = Ledger(open_store(store_url))
    try:
        fabricated = administrator.correct_event(
            AUDITOR, operation_id, event_id=trail[-1].event_id, reason="never sent"
        )
    finally:
        administrator.store.close()
    with pytest.raises(AuditVerificationFailed) as refused:
        worker.run_once()
    assert refused.value.details["reason"] == "event_not_authentic"
    assert refused.value.details["event_id"] == fabricated.event_id
    assert log_rows(store_url) == before


def test_a_genuine_correction_is_sealed(keyed: EffectLedger, store_url: str) -> None:
    """A correction the ledger itself wrote (tagged) seals like any other event."""
    operation_id = performed(keyed)
    last = keyed.ledger.events(AGENT, operation_id)[-1]
    keyed.ledger.correct_event(AUDITOR, operation_id, event_id=last.event_id, reason="typo")
    events = len(keyed.ledger.events(AGENT, operation_id))
    report = sealer(keyed).seal("acme")
    assert (report.sealed, report.checkpoints) == (events, 1)
    assert count_rows(store_url, "log_entries", operation_events(operation_id)) == events
    assert explain_stored(keyed.ledger.store, "acme", operation_id, trail_keys=TrailKeys(KEY))
