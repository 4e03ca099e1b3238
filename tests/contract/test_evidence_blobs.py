"""Evidence blobs in the ledger: stored with the event, content-addressed, tenant-scoped,
append-only, on every backend."""

from __future__ import annotations

import dataclasses

import pytest

from effectledger import Context, Observation, OperationState, Outcome, SimulatedReceiver
from effectledger.errors import EvidenceMissing, IntegrityError
from effectledger.ledger import Ledger
from effectledger.ledger.evidence import load_evidence
from effectledger.model.evidence import EvidencePolicy, capture
from tests.conftest import RAW_REFUSED, admit, count_rows, drop_trigger, raw_sql, refuse_event

POLICY = EvidencePolicy()


def accepted(body: str) -> Observation:
    """An Accepted observation whose evidence is a response with ``body``."""
    evidence = capture({"status": 201}, POLICY, body={"id": "r-1", "note": body})
    return Observation(outcome=Outcome.ACCEPTED, provider_reference="r-1", evidence=evidence)


def test_record_stores_the_blob_and_references_it_from_the_event(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """An observation with evidence stores the blob and the event and attempt carry its
    reference; the loaded blob has the same bytes, and another tenant cannot load it."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    observation = accepted("first")
    assert ledger.record(prepared, observation).state is OperationState.SUCCEEDED
    assert observation.evidence is not None
    event = ledger.events(context, "op-1")[-1]
    assert event.evidence_reference == observation.evidence.reference
    assert ledger.attempts(context, "op-1")[0].evidence_reference == event.evidence_reference
    loaded = load_evidence(ledger.store, "acme", event.evidence_reference)
    assert loaded is not None
    assert loaded.content == observation.evidence.content
    with pytest.raises(EvidenceMissing):  # another tenant's blob is not readable, nor "none"
        load_evidence(ledger.store, "other-tenant", event.evidence_reference)


def test_identical_answers_share_one_blob(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Two operations recorded with byte-identical evidence store one row for the tenant."""
    for operation_id in ("op-1", "op-2"):
        admit(ledger, context, receiver, operation_id)
        prepared = ledger.claim(context, operation_id, attempt_id=f"a-{operation_id}")
        assert prepared is not None
        ledger.record(prepared, accepted("same"))
    assert count_rows(store_url, "evidence_blobs") == 1


def test_blob_and_event_commit_together(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """When the event cannot be stored, the blob is not stored either."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    refuse_event(store_url, "ProviderAcceptanceConfirmed")
    with pytest.raises(Exception):  # noqa: B017 - the store's translated refusal
        ledger.record(prepared, accepted("lost"))
    assert count_rows(store_url, "evidence_blobs") == 0
    assert ledger.get(context, "op-1").state is OperationState.IN_PROGRESS


def test_blobs_are_append_only(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """The database refuses UPDATE and DELETE of a stored blob."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    ledger.record(prepared, accepted("kept"))
    with pytest.raises(RAW_REFUSED):
        raw_sql(store_url, "UPDATE evidence_blobs SET media_type = 'text/plain'")
    with pytest.raises(RAW_REFUSED):
        raw_sql(store_url, "DELETE FROM evidence_blobs")
    assert count_rows(store_url, "evidence_blobs") == 1


def test_a_blob_whose_bytes_no_longer_match_its_hash_is_refused(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """If someone bypasses the triggers and edits a blob, loading it raises IntegrityError."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    ledger.record(prepared, accepted("original"))
    reference = ledger.events(context, "op-1")[-1].evidence_reference
    assert reference is not None
    drop_trigger(store_url, "evidence_blobs", "evidence_blobs_no_update")
    if store_url.startswith("sqlite"):
        edited = "CAST(replace(CAST(content AS TEXT), 'original', 'modified') AS BLOB)"
    else:
        text = "replace(convert_from(content, 'UTF8'), 'original', 'modified')"
        edited = f"convert_to({text}, 'UTF8')"
    raw_sql(store_url, f"UPDATE evidence_blobs SET content = {edited}")
    with pytest.raises(IntegrityError):
        load_evidence(ledger.store, "acme", reference)


def test_oversized_content_is_refused_by_the_table(store_url: str, ledger: Ledger) -> None:
    """The table's CHECK refuses content over 64 KiB even from outside the library."""
    big = "x" * 70_000
    statement = (
        "INSERT INTO evidence_blobs VALUES ('acme', '" + "0" * 64 + "', 'text/plain', 70000, "
        + ("CAST('" + big + "' AS BLOB)" if store_url.startswith("sqlite") else
           "convert_to('" + big + "', 'UTF8')")
        + ", 0)"
    )  # fmt: skip
    with pytest.raises(RAW_REFUSED):
        raw_sql(store_url, statement)


def test_sixteen_threads_recording_identical_evidence_store_one_blob(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Sixteen records racing with byte-identical evidence all commit, each event names the one
    blob, and the table holds a single row."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    prepared = []
    for number in range(16):
        admit(ledger, context, receiver, f"op-{number}")
        claim = ledger.claim(context, f"op-{number}", attempt_id=f"a-{number}")
        assert claim is not None
        prepared.append(claim)
    barrier = threading.Barrier(16)
    observation = accepted("raced")

    def record(index: int) -> OperationState:
        # Each operation its own reference (one reference held twice is flagged), one blob.
        own = dataclasses.replace(observation, provider_reference=f"r-{index}")
        barrier.wait(timeout=10)
        return ledger.record(prepared[index], own).state

    with ThreadPoolExecutor(16) as pool:
        states = list(pool.map(record, range(16)))
    assert states == [OperationState.SUCCEEDED] * 16
    assert count_rows(store_url, "evidence_blobs") == 1
    assert observation.evidence is not None
    where = f"evidence_reference = '{observation.evidence.reference}'"
    assert count_rows(store_url, "audit_events", where) == 16
