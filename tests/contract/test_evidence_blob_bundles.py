"""Evidence blobs in bundles: each cited blob travels with its event and is checked by hash; a
blob the store no longer holds is an integrity error everywhere, on every backend."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, Observation, Outcome, SimulatedReceiver
from effectledger.audit.bundles.export import export_log, prove_events
from effectledger.audit.bundles.format import blob_line, header_line
from effectledger.audit.bundles.verify import VerificationReport
from effectledger.audit.explain import explain_stored
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import EvidenceMissing
from effectledger.ledger import Ledger
from effectledger.ledger.evidence import load_evidence
from effectledger.model.evidence import EvidencePolicy, capture
from effectledger.store import Store
from tests.conftest import admit, count_rows, drop_trigger, raw_sql
from tests.support.evidence import (
    SIGNER,
    VERIFIER_KEY,
    make_history,
    parsed,
    read_lines,
    write_lines,
)
from tests.support.evidence import (
    verify_both_ways as verify_bundle,
)


def _record_with_evidence(ledger: Ledger, context: Context, receiver: SimulatedReceiver) -> str:
    """Admit op-blob and record it Accepted with a captured answer; the blob's SHA-256."""
    admit(ledger, context, receiver, "op-blob")
    prepared = ledger.claim(context, "op-blob", attempt_id="a-blob")
    assert prepared is not None
    evidence = capture({"status": 201}, EvidencePolicy(), body={"id": "r-blob", "note": "kept"})
    ledger.record(
        prepared,
        Observation(outcome=Outcome.ACCEPTED, provider_reference="r-blob", evidence=evidence),
    )
    return evidence.sha256


@pytest.fixture
def digest(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> str:
    """A sealed log of the mixed history plus one operation whose outcome cites a blob."""
    make_history(ledger, receiver, context)
    digest = _record_with_evidence(ledger, context, receiver)
    LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    return digest


def _codes(report: VerificationReport) -> list[str]:
    return [finding.code for finding in report.findings]


def _blob_index(lines: list[bytes]) -> int:
    return next(i for i, line in enumerate(lines) if parsed(line)["type"] == "blob")


def _delete_blob(store_url: str) -> None:
    drop_trigger(store_url, "evidence_blobs", "evidence_blobs_no_delete")
    raw_sql(store_url, "DELETE FROM evidence_blobs")
    assert count_rows(store_url, "evidence_blobs") == 0


def test_an_exported_log_carries_each_cited_blob_before_its_event(
    digest: str, store: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """The bundle holds one blob line, right before the event citing it, whose content is the
    stored blob's bytes and hashes to the event's reference; the bundle verifies."""
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    lines = read_lines(path)
    at = _blob_index(lines)
    blob = parsed(lines[at])
    stored = raw_sql(store_url, "SELECT content FROM evidence_blobs")
    assert base64.b64decode(blob["content"]) == bytes(stored[0][0])  # type: ignore[arg-type]
    assert hashlib.sha256(base64.b64decode(blob["content"])).hexdigest() == digest == blob["sha256"]
    assert parsed(lines[at + 1])["entry"]["evidence_reference"] == f"evidence_blobs/sha256:{digest}"
    assert sum(parsed(line)["type"] == "blob" for line in lines) == 1
    report = verify_bundle(path, [VERIFIER_KEY])
    assert report.ok, report.findings


def test_a_bundle_without_the_cited_blob_is_evidence_missing(
    digest: str, store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    """Removing the blob line leaves the event's commitment unmet: ``evidence_missing``."""
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    lines = read_lines(path)
    del lines[_blob_index(lines)]
    write_lines(path, lines)
    report = verify_bundle(path, [VERIFIER_KEY])
    assert _codes(report) == ["evidence_missing"]
    assert digest in report.findings[0].message


def test_an_edited_blob_line_is_evidence_edited(
    digest: str, store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    """A blob line whose content no longer hashes to its stated hash is ``evidence_edited``."""
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    lines = read_lines(path)
    at = _blob_index(lines)
    content = base64.b64decode(parsed(lines[at])["content"]).replace(b"kept", b"lost")
    lines[at] = blob_line(digest, content)
    write_lines(path, lines)
    assert _codes(verify_bundle(path, [VERIFIER_KEY])) == ["evidence_edited"]


def test_an_uncited_or_non_canonical_blob_line_is_malformed(
    digest: str, store: Store, clock: ManualClock, tmp_path: Path
) -> None:
    """A blob no event cites carries bytes no signature covers; a blob in another base64 spelling
    (a line break that lenient decoders skip) is refused: both ``bundle_malformed``."""
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    genuine = read_lines(path)
    extra = b"an answer nobody cited"
    write_lines(path, [*genuine, blob_line(hashlib.sha256(extra).hexdigest(), extra)])
    report = verify_bundle(path, [VERIFIER_KEY])
    assert _codes(report) == ["bundle_malformed"]
    assert "cited by no event" in report.findings[0].message
    lines = list(genuine)
    at = _blob_index(lines)
    unpadded = json.loads(lines[at])
    unpadded["content"] = unpadded["content"][:8] + "\n" + unpadded["content"][8:]  # MIME-style
    assert base64.b64decode(unpadded["content"]) == base64.b64decode(
        json.loads(lines[at])["content"]
    )
    lines[at] = json.dumps(unpadded, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    write_lines(path, lines)
    assert "bundle_malformed" in _codes(verify_bundle(path, [VERIFIER_KEY]))


def test_a_blob_edited_in_the_database_is_exported_as_it_is_and_named(
    digest: str, store: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """The exporter carries the stored bytes faithfully; verify names the edit."""
    drop_trigger(store_url, "evidence_blobs", "evidence_blobs_no_update")
    if store_url.startswith("sqlite"):
        edited = "CAST(replace(CAST(content AS TEXT), 'kept', 'lost') AS BLOB)"
    else:
        edited = "convert_to(replace(convert_from(content, 'UTF8'), 'kept', 'lost'), 'UTF8')"
    raw_sql(store_url, f"UPDATE evidence_blobs SET content = {edited}")
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    assert _codes(verify_bundle(path, [VERIFIER_KEY])) == ["evidence_edited"]


def test_a_deleted_blob_is_an_integrity_error_everywhere(
    digest: str,
    ledger: Ledger,
    context: Context,
    store: Store,
    store_url: str,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """With the blob deleted behind the triggers, loading it, explaining its operation,
    exporting and proving its event all raise ``evidence_missing``; the export writes no event
    of that batch and its cursor does not move, and no receipt file appears."""
    reference = ledger.events(context, "op-blob")[-1].evidence_reference
    assert reference == f"evidence_blobs/sha256:{digest}"
    _delete_blob(store_url)
    with pytest.raises(EvidenceMissing) as loaded:
        load_evidence(store, "acme", reference)
    assert loaded.value.code == "evidence_missing"
    with pytest.raises(EvidenceMissing):
        explain_stored(store, "acme", "op-blob")
    assert explain_stored(store, "acme", "op-ok")  # other operations are still told
    path = tmp_path / "acme.jsonl"
    with pytest.raises(EvidenceMissing) as exported:
        export_log(store, "acme", path, clock=clock, batch_size=1000)
    assert exported.value.details["event_id"] == ledger.events(context, "op-blob")[-1].event_id
    assert read_lines(path) == [header_line("acme")]
    cursor = raw_sql(store_url, "SELECT position FROM export_cursors")
    assert [int(row[0]) for row in cursor] == [0]  # type: ignore[call-overload]
    receipt = tmp_path / "receipt.jsonl"
    with pytest.raises(EvidenceMissing):
        prove_events(store, "acme", [ledger.events(context, "op-blob")[-1].event_id], receipt)
    assert not receipt.exists()


def test_a_blob_of_another_tenant_is_missing_not_absent(
    digest: str, ledger: Ledger, context: Context
) -> None:
    """A reference read under a tenant that holds no such blob raises, never reads as none."""
    reference = ledger.events(context, "op-blob")[-1].evidence_reference
    assert reference is not None
    with pytest.raises(EvidenceMissing):
        load_evidence(ledger.store, "other-tenant", reference)
    assert load_evidence(ledger.store, "acme", "reply/not-a-blob") is None


def test_a_receipt_carries_its_events_blob(
    digest: str, ledger: Ledger, context: Context, store: Store, tmp_path: Path
) -> None:
    """A receipt of the citing event holds its blob and verifies; without it, it does not."""
    event_id = ledger.events(context, "op-blob")[-1].event_id
    path = tmp_path / "receipt.jsonl"
    prove_events(store, "acme", [event_id], path)
    lines = read_lines(path)
    at = _blob_index(lines)
    assert parsed(lines[at])["sha256"] == digest
    assert verify_bundle(path, [VERIFIER_KEY]).ok
    del lines[at]
    write_lines(path, lines)
    assert _codes(verify_bundle(path, [VERIFIER_KEY])) == ["evidence_missing"]


def test_a_bundle_whose_events_cite_no_blob_has_no_blob_line_and_verifies(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A log whose events cite no blob exports as bundles always did, and verifies."""
    make_history(ledger, receiver, context)
    LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    lines = read_lines(path)
    assert {parsed(line)["type"] for line in lines} == {
        "bundle",
        "event",
        "checkpoint",
        "consistency",
    }
    report = verify_bundle(path, [VERIFIER_KEY])
    assert report.ok, report.findings
    assert report.events == 12
