"""Export bundles and receipts on every backend, and verify them offline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, NotFound, SimulatedReceiver
from effectledger.audit.bundles.export import export_log, prove_events
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import ExportCursorMismatch, LogNotSealed
from effectledger.ledger import Ledger
from effectledger.store import Store
from tests.conftest import admit
from tests.support.evidence import (
    NEW_SIGNER,
    SIGNER,
    VERIFIER_KEY,
    canonical_line,
    make_history,
    parsed,
    read_lines,
    write_lines,
)
from tests.support.evidence import verify_both_ways as verify_bundle


class Interrupted(Exception):
    """Raised by a test between an export's durable write and its cursor update."""


def _sealed_history(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> list[str]:
    operations = make_history(ledger, receiver, context)
    LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    return operations


def test_an_export_verifies_offline_and_holds_every_event_once(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """The bundle holds each event once in log order, every checkpoint, and verifies."""
    operations = _sealed_history(ledger, context, receiver, store, clock)
    bundle = tmp_path / "acme.jsonl"
    report = export_log(store, "acme", bundle, clock=clock, batch_size=4)
    assert (report.events, report.checkpoints, report.position) == (12, 3, 12)
    lines = [parsed(line) for line in read_lines(bundle)]
    assert lines[0] == {
        "format": "effectledger-evidence/1",
        "kind": "log",
        "origin": "effectledger/acme",
        "tenant_id": "acme",
        "type": "bundle",
    }
    events = [line for line in lines if line["type"] == "event"]
    assert [line["position"] for line in events] == list(range(12))
    stored = {e.event_id for op in operations for e in ledger.events(context, op)}
    assert {line["entry"]["event_id"] for line in events} == stored
    assert [line["type"] for line in lines].count("consistency") == 2
    verified = verify_bundle(bundle, [VERIFIER_KEY])
    assert verified.ok, verified.findings
    assert (verified.events, verified.operations, verified.checkpoints, verified.size) == (
        12,
        4,
        3,
        12,
    )
    observed = [line for line in events if line["entry"]["observation_id"] == "obs-observed-1"]
    assert len(observed) == 1


def test_an_outside_verifier_recomputes_hashes_from_the_documented_rules(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """With hashlib, json and an off-the-shelf RFC 8785 library, hashes and links recompute."""
    import rfc8785

    _sealed_history(ledger, context, receiver, store, clock)
    bundle = tmp_path / "acme.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    heads: dict[str, str] = {}
    for line in read_lines(bundle):
        value = json.loads(line)
        assert rfc8785.dumps(value) + b"\n" == line  # every line is its own JCS encoding
        if value["type"] != "event":
            continue
        entry = rfc8785.dumps(value["entry"])
        digest = hashlib.sha256(b"effectledger/event/v2\n" + entry).hexdigest()
        assert "v2:" + digest == value["event_hash"]
        assert hashlib.sha256(b"\x00" + entry).hexdigest() == value["leaf_hash"]
        operation = value["entry"]["operation_id"]
        assert value["entry"]["prev_hash"] == heads.get(operation, "0" * 64)
        heads[operation] = value["event_hash"]


def test_a_later_export_appends_only_what_is_new(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A second run appends the new events and checkpoints with a consistency proof."""
    _sealed_history(ledger, context, receiver, store, clock)
    bundle = tmp_path / "acme.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    before = read_lines(bundle)
    admit(ledger, context, receiver, "op-new")
    LogSealer(store, SIGNER, clock=clock).seal("acme")
    report = export_log(store, "acme", bundle, clock=clock)
    assert (report.events, report.checkpoints, report.resumed) == (1, 1, True)
    after = read_lines(bundle)
    assert after[: len(before)] == before
    assert [parsed(line)["type"] for line in after[len(before) :]] == [
        "event",
        "consistency",
        "checkpoint",
    ]
    assert verify_bundle(bundle, [VERIFIER_KEY]).ok
    assert export_log(store, "acme", bundle, clock=clock).events == 0
    assert read_lines(bundle) == after


def test_an_export_interrupted_between_batches_resumes_without_gaps_or_duplicates(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A failure after a batch is durable but before its cursor moves costs nothing on rerun."""
    _sealed_history(ledger, context, receiver, store, clock)
    bundle = tmp_path / "acme.jsonl"
    calls: list[int] = []

    def fail_on_second(position: int) -> None:
        calls.append(position)
        if len(calls) == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        export_log(store, "acme", bundle, clock=clock, batch_size=4, between_batches=fail_on_second)
    cursor = store.one(
        "export_cursor_get", {"exporter_id": f"file:{bundle.resolve()}", "tenant_id": "acme"}
    )
    assert cursor is not None
    assert int(cursor["position"]) == 4
    written = [parsed(line) for line in read_lines(bundle)]
    assert [line["position"] for line in written if line["type"] == "event"] == list(range(8))
    report = export_log(store, "acme", bundle, clock=clock, batch_size=4)
    assert report.resumed
    assert report.duplicates_skipped == 5
    lines = [parsed(line) for line in read_lines(bundle)]
    ids = [line["entry"]["event_id"] for line in lines if line["type"] == "event"]
    assert len(ids) == len(set(ids)) == 12
    assert [line["seq"] for line in lines if line["type"] == "checkpoint"] == [1, 2, 3]
    assert verify_bundle(bundle, [VERIFIER_KEY]).ok


def test_a_torn_last_line_is_dropped_and_rewritten(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """Half a line left by a crash mid-write is cut off and the export completes the file."""
    _sealed_history(ledger, context, receiver, store, clock)
    bundle = tmp_path / "acme.jsonl"
    export_log(store, "acme", bundle, clock=clock, batch_size=100)
    complete = bundle.read_bytes()
    admit(ledger, context, receiver, "op-new")
    LogSealer(store, SIGNER, clock=clock).seal("acme")
    with bundle.open("ab") as handle:
        handle.write(b'{"entry":{"actor":"ali')
    export_log(store, "acme", bundle, clock=clock)
    repaired = bundle.read_bytes()
    assert repaired.startswith(complete)
    assert repaired.endswith(b"\n")
    assert verify_bundle(bundle, [VERIFIER_KEY]).events == 13


def test_a_file_that_disagrees_with_its_cursor_is_refused_untouched(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A truncated bundle, or a non-empty file without a cursor, fails loudly and is not changed."""
    _sealed_history(ledger, context, receiver, store, clock)
    bundle = tmp_path / "acme.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    lines = read_lines(bundle)
    write_lines(bundle, lines[:5])
    with pytest.raises(ExportCursorMismatch, match="truncated or replaced"):
        export_log(store, "acme", bundle, clock=clock)
    assert read_lines(bundle) == lines[:5]
    stranger = tmp_path / "other.jsonl"
    stranger.write_bytes(b"not a bundle\n")
    with pytest.raises(ExportCursorMismatch, match="no cursor"):
        export_log(store, "acme", stranger, clock=clock)
    assert stranger.read_bytes() == b"not a bundle\n"


def test_a_receipt_proves_chosen_events_offline(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A receipt holds the checkpoint and inclusion proofs; a tampered proof is named."""
    _sealed_history(ledger, context, receiver, store, clock)
    chosen = [
        ledger.events(context, "op-lost")[2].event_id,
        ledger.events(context, "op-ok")[0].event_id,
    ]
    receipt = tmp_path / "receipt.jsonl"
    proved = prove_events(store, "acme", chosen, receipt)
    assert (proved.events, proved.size) == (2, 12)
    report = verify_bundle(receipt, [VERIFIER_KEY])
    assert report.ok, report.findings
    assert (report.kind, report.events) == ("receipt", 2)
    lines = read_lines(receipt)
    inclusion = parsed(lines[-1])
    inclusion["proof"][0] = "00" * 32
    write_lines(receipt, [*lines[:-1], canonical_line(inclusion)])
    failed = verify_bundle(receipt, [VERIFIER_KEY])
    assert [finding.code for finding in failed.findings] == ["inclusion_proof_invalid"]


def test_a_receipt_needs_a_sealed_and_signed_event(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """Proving an event before any checkpoint (log_not_sealed), or an unknown event, is refused."""
    admit(ledger, context, receiver)
    event_id = ledger.events(context, "op-1")[0].event_id
    with pytest.raises(LogNotSealed) as refused:
        prove_events(store, "acme", [event_id], tmp_path / "r.jsonl")
    assert (refused.value.code, refused.value.status) == ("log_not_sealed", 409)
    assert not (tmp_path / "r.jsonl").exists()
    LogSealer(store, SIGNER, clock=clock).seal("acme")
    with pytest.raises(NotFound):
        prove_events(store, "acme", ["no-such-event"], tmp_path / "r.jsonl")


def test_a_kept_checkpoint_is_extended_by_a_later_bundle(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A checkpoint a reviewer kept earlier is consistent with the later, longer log."""
    _sealed_history(ledger, context, receiver, store, clock)
    sealer = LogSealer(store, SIGNER, clock=clock)
    kept = sealer.latest_checkpoint("acme")
    assert kept is not None
    admit(ledger, context, receiver, "op-new")
    sealer.seal("acme")
    bundle = tmp_path / "acme.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    report = verify_bundle(bundle, [VERIFIER_KEY], trusted_checkpoints=[kept.note])
    assert report.ok, report.findings


def test_a_receipt_after_a_key_rotation_verifies_with_the_old_key(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A receipt carries the co-signed rotation, so a reviewer holding the old key follows it."""
    _sealed_history(ledger, context, receiver, store, clock)
    LogSealer(store, SIGNER, clock=clock).rotate_key("acme", NEW_SIGNER)
    admit(ledger, context, receiver, "op-new")
    LogSealer(store, NEW_SIGNER, clock=clock).seal("acme")
    receipt = tmp_path / "receipt.jsonl"
    prove_events(store, "acme", [ledger.events(context, "op-new")[0].event_id], receipt)
    assert [parsed(line)["type"] for line in read_lines(receipt)] == [
        "bundle",
        "checkpoint",
        "consistency",
        "checkpoint",
        "event",
        "inclusion",
    ]
    for trusted in (SIGNER.verifier(), NEW_SIGNER.verifier()):
        report = verify_bundle(receipt, [trusted])
        assert report.ok, report.findings
        assert report.size == 13
