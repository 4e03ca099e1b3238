"""The Merkle log on every backend: sealing, signed checkpoints, delay, rotation, corrections."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, NotFound, OperationState, SimulatedReceiver
from effectledger.audit.bundles.export import export_log
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.log.tlog import open_checkpoint
from effectledger.audit.sealing.schedule import seal_periodically
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import InvalidInput, LogKeyInvalid, NotPermitted
from effectledger.events.chain import verify_chain
from effectledger.events.record import (
    body_from_event,
    body_from_row,
    entry_bytes,
    entry_from_row,
    leaf_of_entry,
)
from effectledger.ledger import AUDITOR_ROLE, Ledger
from effectledger.store import Store, open_store
from tests.conftest import admit
from tests.support.evidence import NEW_SIGNER, SIGNER, make_history
from tests.support.evidence import verify_both_ways as verify_bundle


def _all_events(ledger: Ledger, context: Context, operation_ids: list[str]) -> list[object]:
    return [event for op in operation_ids for event in ledger.events(context, op)]


def _positions(store: Store, tenant_id: str) -> list[tuple[int, str, str]]:
    rows = store.read(
        lambda tx: tx.all(
            "log_entries_from", {"tenant_id": tenant_id, "position": 0, "limit": 1000}
        )
    )
    return [(int(row["position"]), row["event_id"], row["leaf_hash"]) for row in rows]


def test_sealing_gives_every_event_one_position_and_signs_the_root(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """Every committed event gets exactly one log position, and the signed root covers them all."""
    operations = make_history(ledger, receiver, context)
    report = LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    events = [e for op in operations for e in ledger.events(context, op)]
    assert report.sealed == len(events) == 12
    assert report.checkpoints == 3  # batches of 5, 5 and 2
    assert report.pending == 0
    assert report.oldest_pending_age is None
    positions = _positions(store, "acme")
    assert [p for p, _, _ in positions] == list(range(12))
    assert {e for _, e, _ in positions} == {event.event_id for event in events}
    by_id = {event.event_id: event for event in events}
    leaves = [bytes.fromhex(leaf) for _, _, leaf in positions]
    for _, event_id, leaf in positions:
        assert leaf_of_entry(entry_bytes(body_from_event(by_id[event_id]))).hex() == leaf
    latest = LogSealer(store, SIGNER).latest_checkpoint("acme")
    assert latest is not None
    assert latest.seq == 3
    checkpoint, _ = open_checkpoint(latest.note, [SIGNER.verifier()], origin="effectledger/acme")
    assert (checkpoint.size, checkpoint.root_hash) == (12, MerkleTree(leaves).root())


def test_one_operations_events_keep_their_order_in_the_log(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """An operation's events take increasing log positions in sequence order, across batches."""
    operations = make_history(ledger, receiver, context)
    LogSealer(store, SIGNER, clock=clock, batch_size=2).seal("acme")
    position = {event_id: p for p, event_id, _ in _positions(store, "acme")}
    for op in operations:
        places = [position[event.event_id] for event in ledger.events(context, op)]
        assert places == sorted(places)


def test_the_sealing_delay_is_measured_and_reported(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """Pending events report their age; a seal reports the longest wait of what it sealed."""
    admit(ledger, context, receiver)
    sealer = LogSealer(store, SIGNER, clock=clock)
    clock.advance(timedelta(seconds=7))
    assert sealer.pending("acme") == (1, timedelta(seconds=7))
    report = sealer.seal("acme")
    assert (report.sealed, report.max_delay) == (1, timedelta(seconds=7))
    assert sealer.pending("acme") == (0, None)
    again = sealer.seal("acme")
    assert (again.sealed, again.checkpoints, again.max_delay) == (0, 0, None)
    assert again.checkpoint_seq == 1


def test_a_batch_limit_leaves_the_rest_pending_and_reports_its_age(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """With ``max_batches`` the remaining events stay pending and their age is reported."""
    make_history(ledger, receiver, context)
    clock.advance(timedelta(seconds=3))
    report = LogSealer(store, SIGNER, clock=clock, batch_size=4).seal("acme", max_batches=1)
    assert (report.sealed, report.pending) == (4, 8)
    assert report.oldest_pending_age == timedelta(seconds=3)


def test_concurrent_sealers_never_assign_one_position_twice(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Four sealers racing over one log produce one position per event and a consistent log."""
    make_history(ledger, receiver, context)
    errors: list[BaseException] = []

    def seal() -> None:
        own = open_store(store_url)
        try:
            LogSealer(own, SIGNER, batch_size=1).seal("acme")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=seal) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    store = open_store(store_url)
    try:
        positions = _positions(store, "acme")
        assert [p for p, _, _ in positions] == list(range(12))
        assert len({e for _, e, _ in positions}) == 12
        latest = LogSealer(store, SIGNER).latest_checkpoint("acme")
        assert latest is not None
        assert (latest.seq, latest.size) == (12, 12)
    finally:
        store.close()


def test_tenants_have_separate_logs(
    ledger: Ledger, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """Each tenant's events go to its own log with its own origin, from position 0."""
    admit(ledger, Context(tenant_id="acme", actor_id="alice"), receiver)
    admit(ledger, Context(tenant_id="globex", actor_id="bob"), receiver, "op-g")
    sealer = LogSealer(store, SIGNER, clock=clock)
    assert sealer.tenants() == ["acme", "globex"]
    reports = {report.tenant_id: report for report in sealer.seal_all()}
    assert (reports["acme"].size, reports["globex"].size) == (1, 1)
    for tenant in ("acme", "globex"):
        latest = sealer.latest_checkpoint(tenant)
        assert latest is not None
        assert latest.note.startswith(f"effectledger/{tenant}\n1\n")


def test_a_sealer_with_another_key_is_refused(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """Once a log is signed by one key, a sealer holding another key cannot extend it."""
    admit(ledger, context, receiver)
    LogSealer(store, SIGNER, clock=clock).seal("acme")
    admit(ledger, context, receiver, "op-2")
    with pytest.raises(LogKeyInvalid, match="rotate"):
        LogSealer(store, NEW_SIGNER, clock=clock).seal("acme")
    assert LogSealer(store, SIGNER).pending("acme")[0] == 1


def test_key_rotation_is_co_signed_and_followed_by_verifiers(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """A rotation checkpoint carries both signatures; a verifier trusting either key accepts."""
    admit(ledger, context, receiver)
    old = LogSealer(store, SIGNER, clock=clock)
    old.seal("acme")
    rotation = old.rotate_key("acme", NEW_SIGNER)
    assert rotation is not None
    assert (rotation.seq, rotation.size) == (2, 1)
    open_checkpoint(rotation.note, [SIGNER.verifier()])
    open_checkpoint(rotation.note, [NEW_SIGNER.verifier()])
    admit(ledger, context, receiver, "op-2")
    with pytest.raises(LogKeyInvalid):
        old.seal("acme")
    assert LogSealer(store, NEW_SIGNER, clock=clock).seal("acme").size == 2
    bundle = tmp_path / "bundle.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    for trusted in (SIGNER.verifier(), NEW_SIGNER.verifier()):
        report = verify_bundle(bundle, [trusted])
        assert report.ok, report.findings
        assert (report.checkpoints, report.size) == (3, 2)


def test_rotating_a_log_without_checkpoints_writes_nothing(store: Store) -> None:
    """A tenant with no checkpoint has nothing to rotate; the first seal can use the new key."""
    assert LogSealer(store, SIGNER).rotate_key("acme", NEW_SIGNER) is None
    with pytest.raises(LogKeyInvalid):
        LogSealer(store, SIGNER).rotate_key("acme", SIGNER)


def test_a_correction_is_a_new_event_that_keeps_the_state(
    ledger: Ledger, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """An auditor's correction appends AuditCorrection citing the event; nothing is rewritten."""
    context = Context(tenant_id="acme", actor_id="alice")
    make_history(ledger, receiver, context)
    auditor = Context(tenant_id="acme", actor_id="carol", roles=frozenset({AUDITOR_ROLE}))
    before = ledger.events(context, "op-lost")
    target = before[1]
    correction = ledger.correct_event(
        auditor, "op-lost", event_id=target.event_id, reason="attempt was run by worker 2"
    )
    assert correction.event_type == "AuditCorrection"
    assert correction.actor == "carol"
    assert dict(correction.details) == {
        "corrects": target.event_id,
        "reason": "attempt was run by worker 2",
    }
    after = ledger.events(context, "op-lost")
    assert after[:-1] == before
    assert after[-1] == correction
    operation = ledger.get(context, "op-lost")
    assert operation.state is OperationState.OUTCOME_UNKNOWN
    verify_chain(after, head=operation.last_event_hash)
    assert LogSealer(store, SIGNER, clock=clock).pending("acme")[0] == 13


def test_only_auditors_correct_and_only_their_own_operations_events(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """A correction needs the auditor role, a reason, and an event of the same operation."""
    make_history(ledger, receiver, context)
    target = ledger.events(context, "op-ok")[0].event_id
    with pytest.raises(NotPermitted):
        ledger.correct_event(context, "op-ok", event_id=target, reason="typo")
    auditor = Context(tenant_id="acme", actor_id="carol", roles=frozenset({AUDITOR_ROLE}))
    with pytest.raises(NotFound):
        ledger.correct_event(auditor, "op-lost", event_id=target, reason="typo")
    with pytest.raises(InvalidInput):
        ledger.correct_event(auditor, "op-ok", event_id=target, reason=" ")
    foreign = Context(tenant_id="globex", actor_id="carol", roles=frozenset({AUDITOR_ROLE}))
    with pytest.raises(NotFound):
        ledger.correct_event(foreign, "op-ok", event_id=target, reason="typo")
    assert len(ledger.events(context, "op-ok")) == 3


def test_the_seal_loop_reports_waits_beyond_the_maximum_delay(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> None:
    """Passes run every half maximum delay; an event that waited longer is reported as late."""
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    sealer = LogSealer(store, SIGNER, clock=clock)
    admit(ledger, context, receiver)
    passes = list(
        seal_periodically(sealer, "acme", max_delay=timedelta(seconds=4), sleep=sleep, passes=2)
    )
    assert [(p.report.sealed, p.late) for p in passes] == [(1, False), (0, False)]
    assert sleeps == [2.0]
    admit(ledger, context, receiver, "op-2")
    clock.advance(timedelta(seconds=9))
    (late,) = seal_periodically(sealer, None, max_delay=timedelta(seconds=4), passes=1)
    assert late.late
    assert late.report.max_delay == timedelta(seconds=9)
    assert sealer.pending("acme") == (0, None)
    with pytest.raises(InvalidInput):
        next(seal_periodically(sealer, None, max_delay=timedelta(0)))


def test_the_fast_row_encoding_equals_the_canonical_encoding(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store
) -> None:
    """Splicing the stored details gives exactly the canonical bytes for every ledger row."""
    operations = make_history(ledger, receiver, context)
    for operation in operations:
        rows = store.read(
            lambda tx, op=operation: tx.all(
                "events_for_operation", {"tenant_id": "acme", "operation_id": op}
            )
        )
        for row in rows:
            assert entry_from_row(row) == entry_bytes(body_from_row(row))
