"""A finished refund's trail cut back to its admission is never sent as a new request.

The attack: a database administrator takes a SUCCEEDED refund, deletes every event after the
authentic ``OperationAdmitted`` and the attempt, sets the row back to READY and gives it a new
``idempotency_key``, so that the destination would see a new request and refund again. The
admission now records the key and the destination in its (tagged) event: a row whose key
differs is ``tampered_operation`` / ``key_not_admitted`` before anything is sent, and with the
same key the destination sees the same request again and performs nothing new. Once the log
has sealed the trail, a trail shorter than what it sealed is ``sealed_event_deleted``, and the
sealer refuses to seal a second event at a position it sealed. Each test counts the receiver's
own effects and the rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from effectledger import (
    AuditVerificationFailed,
    EffectLedger,
    OperationState,
    TamperedOperation,
)
from effectledger.audit import LogSealer
from effectledger.audit.bundles.export import export_log
from effectledger.audit.keys.signers import generate_signer
from effectledger.destinations.simulated import SubmitMode
from effectledger.events.authentication import TrailKey, TrailKeys, new_trail_key
from effectledger.ledger.trail import write_event
from effectledger.model.states import EventType
from effectledger.workers import RecoveryWorker
from tests.conftest import count_rows, drop_trigger, run_sql
from tests.races.forgery import receiver
from tests.races.world import AGENT, REFUND_30, approver, build, close
from tests.support.evidence import verify_both_ways as verify_bundle

KEY = TrailKey.from_key_string(new_trail_key("trail-1"))
SIGNER = generate_signer("log-1")


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service whose ledger holds a trail key (the default a fresh install gets)."""
    made = build(store_url, tmp_path, trail_keys=TrailKeys(KEY))
    yield made
    close(made)


def refunded(service: EffectLedger) -> str:
    """A refund of 30 performed once: its operation id."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.SUCCEEDED
    assert done.operation_id is not None
    assert receiver(service).counts().effects == 1
    return done.operation_id


def _as_administrator(store_url: str, statements: list[tuple[str, tuple[object, ...]]]) -> None:
    """Run ``statements`` in one transaction with the protective triggers and foreign keys off,
    as an administrator can (PostgreSQL: ``session_replication_role``; SQLite: a connection
    that does not enforce foreign keys, the append-only triggers dropped)."""
    if store_url.startswith("sqlite:"):
        for table, trigger in (
            ("audit_events", "audit_events_no_delete"),
            ("log_entries", "log_entries_no_delete"),
        ):
            with contextlib.suppress(Exception):  # dropped by an earlier call of this test
                drop_trigger(store_url, table, trigger)
        for statement, params in statements:
            run_sql(store_url, statement, params)
        return
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(store_url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    for option in ("group_commit", "pooler"):
        query.pop(option, None)
    with psycopg.connect(urlunsplit(parts._replace(query=urlencode(query)))) as connection:
        connection.execute("SELECT set_config('search_path', %s, true)", (schema,))
        connection.execute("SET LOCAL session_replication_role = replica")
        for statement, params in statements:
            connection.execute(statement.replace("?", "%s").encode(), params)


def _admitted_at(store_url: str, operation_id: str) -> int:
    (row,) = run_sql(
        store_url,
        "SELECT sequence FROM audit_events WHERE operation_id = ? AND event_type = ?",
        (operation_id, "OperationAdmitted"),
    )
    return int(row[0])


def cut_back(store_url: str, operation_id: str, *, new_key: str | None) -> int:
    """Delete the trail after its admission and the attempts, set the row back to READY (with
    ``new_key`` as its idempotency key, if given), as the administrator would; the admission's
    sequence."""
    admitted = _admitted_at(store_url, operation_id)
    key_change = "" if new_key is None else ", idempotency_key = ?"
    statements: list[tuple[str, tuple[object, ...]]] = [
        (
            "DELETE FROM audit_events WHERE operation_id = ? AND sequence > ?",
            (operation_id, admitted),
        ),
        ("DELETE FROM attempts WHERE operation_id = ?", (operation_id,)),
        (
            "DELETE FROM log_pending WHERE event_id NOT IN (SELECT event_id FROM audit_events)",
            (),
        ),
        (
            "UPDATE operations SET state = 'READY', event_sequence = ?, active_attempt_id = NULL, "
            "provider_reference = NULL, version = version + 1, last_event_hash = "
            "(SELECT event_hash FROM audit_events WHERE operation_id = ? AND sequence = ?)"
            f"{key_change} WHERE operation_id = ?",
            (admitted, operation_id, admitted)
            + (() if new_key is None else (new_key,))
            + (operation_id,),
        ),
    ]
    _as_administrator(store_url, statements)
    return admitted


def _perform_again(service: EffectLedger, operation_id: str) -> TamperedOperation:
    executor = service.executor_for(next(iter(service.destinations)))
    with pytest.raises(TamperedOperation) as refused:
        executor.execute(AGENT, operation_id)
    assert refused.value.code == "tampered_operation"
    return refused.value


def test_a_cut_back_trail_given_a_new_key_is_refused_and_not_sent(
    service: EffectLedger, store_url: str
) -> None:
    """The attack as reported: the new key is not the admitted one; nothing is sent again."""
    operation_id = refunded(service)
    admitted = cut_back(store_url, operation_id, new_key="el-forged-second-refund")
    refused = _perform_again(service, operation_id)
    assert refused.details["reason"] == "key_not_admitted"
    counts = receiver(service).counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert receiver(service).effects_for("el-forged-second-refund") == 0
    assert count_rows(store_url, "attempts") == 0
    assert count_rows(store_url, "audit_events", f"operation_id = '{operation_id}'") == admitted


def test_a_cut_back_trail_with_its_own_key_is_the_same_request_again(
    service: EffectLedger, store_url: str
) -> None:
    """Left with its admitted key, the resend carries that key: the destination performs
    nothing new (its own count stays one effect)."""
    operation_id = refunded(service)
    (key,) = run_sql(
        store_url, "SELECT idempotency_key FROM operations WHERE operation_id = ?", (operation_id,)
    )
    cut_back(store_url, operation_id, new_key=None)
    executor = service.executor_for(next(iter(service.destinations)))
    executor.execute(AGENT, operation_id)
    assert receiver(service).counts().effects == 1
    assert receiver(service).effects_for(str(key[0])) == 1


def test_a_ready_row_given_a_new_key_before_its_first_send_is_refused(
    service: EffectLedger, store_url: str
) -> None:
    """Before any send, too, a row's key is the admitted one or nothing is sent."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    operation = service.authority.admit(
        AGENT, proposal.proposal_id, approval_id=approval.approval_id
    )
    run_sql(
        store_url,
        "UPDATE operations SET idempotency_key = ? WHERE operation_id = ?",
        ("el-elsewhere", operation.operation_id),
    )
    refused = _perform_again(service, operation.operation_id)
    assert refused.details["reason"] == "key_not_admitted"
    assert receiver(service).counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0


@pytest.mark.parametrize("new_key", [None, "el-forged-after-sealing"])
def test_a_sealed_trail_cut_back_is_refused_whatever_its_key(
    service: EffectLedger, store_url: str, new_key: str | None
) -> None:
    """Once sealed, the cut shows: the log sealed more of the trail than the trail holds."""
    operation_id = refunded(service)
    LogSealer(service.ledger.store, SIGNER, trail_keys=TrailKeys(KEY)).seal("acme")
    cut_back(store_url, operation_id, new_key=new_key)
    refused = _perform_again(service, operation_id)
    assert refused.details["reason"] == "sealed_event_deleted"
    counts = receiver(service).counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    assert count_rows(store_url, "attempts") == 0


def test_the_sealer_refuses_a_second_event_at_a_sealed_position(
    service: EffectLedger, store_url: str
) -> None:
    """Even written with the trail key itself, an event at a position the log sealed for
    another event stops the sealer (``event_deleted``): nothing of the batch is sealed."""
    operation_id = refunded(service)
    store = service.ledger.store
    sealer = LogSealer(store, SIGNER, trail_keys=TrailKeys(KEY))
    sealer.seal("acme")
    sealed = count_rows(store_url, "log_entries")
    admitted = cut_back(store_url, operation_id, new_key=None)
    prev = store.read(
        lambda tx: tx.one(
            "event_sealed_at_sequence",
            {"tenant_id": "acme", "operation_id": operation_id, "sequence": admitted},
        )
    )
    assert prev is not None
    store.write(
        lambda tx: write_event(
            tx,
            tenant_id="acme",
            operation_id=operation_id,
            sequence=admitted + 1,
            prev_hash=prev["event_hash"],
            actor="executor",
            event_type=EventType.OPERATION_RELEASED,
            now_us=prev["recorded_us"] + 1,
            details={"reason": "written again"},
            keys=TrailKeys(KEY),
        )
    )
    with pytest.raises(AuditVerificationFailed) as refused:
        sealer.seal("acme")
    assert refused.value.reason == "event_deleted"
    assert count_rows(store_url, "log_entries") == sealed
    assert receiver(service).counts().effects == 1


@pytest.mark.parametrize("edit", ["idempotency_key = 'el-never-sent'", "destination_account = 'x'"])
def test_a_lookup_is_never_asked_about_a_key_the_admission_did_not_make(
    service: EffectLedger, store_url: str, edit: str
) -> None:
    """An uncertain refund whose attempt row is given another key (or account) is not looked up:
    the destination's "not found" for a request never made would read as "never sent", and a
    resend follow. The operation stays OUTCOME_UNKNOWN, the receiver is never asked."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    destination = receiver(service)
    destination.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.OUTCOME_UNKNOWN
    assert done.operation_id is not None
    destination.submit_mode = SubmitMode.ACCEPT
    run_sql(store_url, f"UPDATE attempts SET {edit} WHERE operation_id = ?", (done.operation_id,))
    service.ledger.clock.advance(timedelta(minutes=10))  # type: ignore[attr-defined]
    report = RecoveryWorker(service.ledger, destination).run_once()
    assert report.looked_up == 0
    assert destination.counts().lookups == 0
    assert (destination.counts().submissions, destination.counts().effects) == (1, 1)
    assert service.ledger.get(AGENT, done.operation_id).state is OperationState.OUTCOME_UNKNOWN
    one = RecoveryWorker(service.ledger, destination).recover_operation(
        service.ledger.get(AGENT, done.operation_id)
    )
    assert one.failed == [("acme", done.operation_id, "tampered_operation")]
    assert destination.counts().lookups == 0
    assert count_rows(store_url, "audit_events", "event_type = 'ReconciliationStarted'") == 0


def test_a_sealed_trail_cut_back_leaves_no_bundle_that_verifies(
    service: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """After the cut, a fresh export of the tenant's log does not verify (the sealed leaves of the
    deleted events are missing: ``operation_deleted``), and the receiver still counts one
    effect."""
    operation_id = refunded(service)
    store = service.ledger.store
    LogSealer(store, SIGNER, trail_keys=TrailKeys(KEY)).seal("acme")
    before = tmp_path / "before.jsonl"
    export_log(store, "acme", before)
    assert verify_bundle(before, [SIGNER.verifier().key_string()]).ok
    cut_back(store_url, operation_id, new_key="el-forged-after-sealing")
    after = tmp_path / "after.jsonl"
    export_log(store, "acme", after)
    report = verify_bundle(after, [SIGNER.verifier().key_string()])
    assert not report.ok
    assert report.findings[0].code == "operation_deleted", report.findings
    assert receiver(service).counts().effects == 1
