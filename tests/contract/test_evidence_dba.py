"""A hostile database administrator edits the store directly; sealing and verify notice.

The statements are SQLite's (the administrator drops the append-only triggers first), so this
module runs on SQLite only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from effectledger import Context, ManualClock, SimulatedReceiver
from effectledger.audit.bundles.export import export_log, prove_events
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed, LogKeyInvalid
from effectledger.events.record import body_from_row, entry_bytes, hash_of_entry
from effectledger.ledger import Ledger
from effectledger.store import Store
from tests.conftest import count_rows, make_store_url, raw_sql
from tests.support.evidence import ROGUE_SIGNER, SIGNER, VERIFIER_KEY, make_history
from tests.support.evidence import verify_both_ways as verify_bundle


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """This module speaks SQLite's SQL as the administrator would: one SQLite store per test."""
    return make_store_url("sqlite", tmp_path)


@pytest.fixture
def sealed(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, clock: ManualClock
) -> Store:
    """The mixed history of 12 events, sealed in three checkpoints."""
    make_history(ledger, receiver, context)
    LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    return store


def _event(store: Store, operation_id: str, sequence: int) -> dict[str, Any]:
    row = store.one(
        "event_at_sequence",
        {"tenant_id": "acme", "operation_id": operation_id, "sequence": sequence},
    )
    assert row is not None
    return dict(row)


def _verdict(store: Store, clock: ManualClock, tmp_path: Path) -> str:
    bundle = tmp_path / "after.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert not report.ok
    return report.findings[0].code


def _drop_triggers(url: str, *names: str) -> None:
    for name in names:
        raw_sql(url, f"DROP TRIGGER {name}")


def _rehash(store: Store, url: str, event_id: str) -> str:
    """Recompute an edited event's hash in place, as a careful administrator would."""
    row = store.one("event_get", {**_keys(store, event_id), "event_id": event_id})
    assert row is not None
    new_hash = hash_of_entry(entry_bytes(body_from_row(row)))
    raw_sql(url, f"UPDATE audit_events SET event_hash = '{new_hash}' WHERE event_id = '{event_id}'")
    return new_hash


def _keys(store: Store, event_id: str) -> dict[str, str]:
    rows = store.read(
        lambda tx: tx.all("log_entries_from", {"tenant_id": "acme", "position": 0, "limit": 100})
    )
    row = next(row for row in rows if row["event_id"] == event_id)
    return {"tenant_id": "acme", "operation_id": row["operation_id"]}


def test_the_new_tables_are_append_only(sealed: Store, store_url: str) -> None:
    """Log entries and checkpoints cannot be updated or deleted without dropping triggers."""
    for statement in (
        "UPDATE log_entries SET leaf_hash = '00'",
        "DELETE FROM log_entries",
        "UPDATE log_checkpoints SET note = 'x'",
        "DELETE FROM log_checkpoints",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw_sql(store_url, statement)
    assert count_rows(store_url, "log_entries") == 12
    assert count_rows(store_url, "log_checkpoints") == 3


def test_an_administrator_editing_a_sealed_event_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Rewriting a sealed acceptance's details in the table is ``event_edited``."""
    _drop_triggers(store_url, "audit_events_no_update")
    target = _event(sealed, "op-ok", 3)["event_id"]
    raw_sql(
        store_url,
        "UPDATE audit_events SET details_json = "
        '\'{"outcome":"Accepted","provider_reference":"rcpt-forged"}\' '
        f"WHERE event_id = '{target}'",
    )
    assert _verdict(sealed, clock, tmp_path) == "event_edited"


def test_an_administrator_who_also_rehashes_the_event_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Recomputing the edited event's own hash does not help: the sealed leaf still differs."""
    _drop_triggers(store_url, "audit_events_no_update")
    target = _event(sealed, "op-rejected", 2)["event_id"]
    raw_sql(
        store_url, f"UPDATE audit_events SET actor = 'someone-else' WHERE event_id = '{target}'"
    )
    _rehash(sealed, store_url, target)
    assert _verdict(sealed, clock, tmp_path) == "event_edited"


def test_an_administrator_deleting_an_event_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Deleting a sealed event and its log entry is ``event_deleted``."""
    _drop_triggers(store_url, "audit_events_no_delete", "log_entries_no_delete")
    target = _event(sealed, "op-lost", 2)["event_id"]
    raw_sql(store_url, f"DELETE FROM log_entries WHERE event_id = '{target}'")
    raw_sql(store_url, f"DELETE FROM audit_events WHERE event_id = '{target}'")
    assert _verdict(sealed, clock, tmp_path) == "event_deleted"


def test_a_receipt_over_a_log_missing_a_position_is_refused(
    sealed: Store, store_url: str, tmp_path: Path
) -> None:
    """Proving an event of a log whose sealed entry was deleted is an audit failure, no file."""
    _drop_triggers(store_url, "log_entries_no_delete")
    target = _event(sealed, "op-lost", 2)["event_id"]
    raw_sql(store_url, f"DELETE FROM log_entries WHERE event_id = '{target}'")
    kept = _event(sealed, "op-lost", 1)["event_id"]
    receipt = tmp_path / "receipt.jsonl"
    with pytest.raises(AuditVerificationFailed) as refused:
        prove_events(sealed, "acme", [kept], receipt)
    assert (refused.value.code, refused.value.reason) == (
        "audit_verification_failed",
        "checkpoint_inconsistent",
    )
    assert not receipt.exists()


def test_an_administrator_deleting_a_whole_operation_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Deleting an operation with its events, attempts and log entries, renumbering the log,
    is ``operation_deleted``."""
    _drop_triggers(
        store_url,
        "audit_events_no_delete",
        "log_entries_no_delete",
        "log_entries_no_update",
    )
    raw_sql(
        store_url,
        "DELETE FROM log_entries WHERE event_id IN "
        "(SELECT event_id FROM audit_events WHERE operation_id = 'op-rejected')",
    )
    for table in ("audit_events", "attempts", "operations"):
        raw_sql(store_url, f"DELETE FROM {table} WHERE operation_id = 'op-rejected'")
    raw_sql(store_url, "UPDATE log_entries SET position = position + 1000")
    raw_sql(
        store_url,
        "UPDATE log_entries SET position = (SELECT count(*) FROM log_entries AS other "
        "WHERE other.tenant_id = log_entries.tenant_id AND other.position < log_entries.position)",
    )
    assert count_rows(store_url, "log_entries") == 9
    assert _verdict(sealed, clock, tmp_path) == "operation_deleted"


def test_an_administrator_reordering_events_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Swapping the log positions of two events of one operation is ``event_reordered``."""
    _drop_triggers(store_url, "log_entries_no_update")
    first, second = (
        _event(sealed, "op-lost", 2)["event_id"],
        _event(sealed, "op-lost", 3)["event_id"],
    )
    positions = {
        event_id: int(
            raw_sql(store_url, f"SELECT position FROM log_entries WHERE event_id = '{event_id}'")[
                0
            ][0]
        )  # type: ignore[call-overload]
        for event_id in (first, second)
    }
    raw_sql(store_url, f"UPDATE log_entries SET position = 999 WHERE event_id = '{first}'")
    raw_sql(
        store_url,
        f"UPDATE log_entries SET position = {positions[first]} WHERE event_id = '{second}'",
    )
    raw_sql(
        store_url,
        f"UPDATE log_entries SET position = {positions[second]} WHERE event_id = '{first}'",
    )
    assert _verdict(sealed, clock, tmp_path) == "event_reordered"


def test_an_administrator_inserting_an_event_after_sealing_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """A forged, correctly chained acceptance slipped into the log is ``event_inserted``."""
    last = _event(sealed, "op-lost", 3)
    forged = {
        **last,
        "event_id": "f" * 32,
        "event_type": "ProviderAcceptanceConfirmed",
        "details_json": '{"outcome":"Accepted","provider_reference":"rcpt-forged"}',
        "sequence": 4,
        "prev_hash": last["event_hash"],
    }
    entry = entry_bytes(body_from_row(forged))
    forged["event_hash"] = hash_of_entry(entry)
    columns = ", ".join(forged)
    values = ", ".join("NULL" if v is None else repr(v) for v in forged.values())
    raw_sql(store_url, f"INSERT INTO audit_events ({columns}) VALUES ({values})")
    raw_sql(store_url, f"DELETE FROM log_pending WHERE event_id = '{'f' * 32}'")
    raw_sql(
        store_url,
        "INSERT INTO log_entries (tenant_id, position, event_id, leaf_hash, sealed_us) "
        f"VALUES ('acme', 12, '{'f' * 32}', '{'ab' * 32}', 0)",
    )
    assert _verdict(sealed, clock, tmp_path) == "event_inserted"


def test_a_history_rewritten_and_re_sealed_with_another_key_is_named(
    sealed: Store, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Rewriting an outcome, emptying the log and re-sealing it with the administrator's own key
    gives a self-consistent log that the reviewer's key rejects: ``unknown_key``."""
    _drop_triggers(
        store_url,
        "audit_events_no_update",
        "log_entries_no_delete",
        "log_checkpoints_no_delete",
    )
    target = _event(sealed, "op-lost", 3)["event_id"]
    raw_sql(
        store_url,
        "UPDATE audit_events SET event_type = 'ProviderAcceptanceConfirmed' "
        f"WHERE event_id = '{target}'",
    )
    _rehash(sealed, store_url, target)
    for table in ("log_entries", "log_checkpoints", "log_heads"):
        raw_sql(store_url, f"DELETE FROM {table}")
    raw_sql(
        store_url,
        "INSERT INTO log_pending (tenant_id, event_id, recorded_us) "
        "SELECT tenant_id, event_id, recorded_us FROM audit_events "
        "ORDER BY operation_id, sequence",
    )
    LogSealer(sealed, ROGUE_SIGNER, clock=clock).seal("acme")
    assert _verdict(sealed, clock, tmp_path) == "unknown_key"


def test_an_edited_pending_event_is_never_sealed(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, store_url: str
) -> None:
    """An event edited before sealing makes the sealer refuse the batch: ``event_edited``."""
    make_history(ledger, receiver, context)
    _drop_triggers(store_url, "audit_events_no_update")
    raw_sql(store_url, "UPDATE audit_events SET actor = 'mallory' WHERE sequence = 2")
    with pytest.raises(AuditVerificationFailed) as refused:
        LogSealer(store, SIGNER).seal("acme")
    assert refused.value.reason == "event_edited"
    assert count_rows(store_url, "log_entries") == 0
    assert count_rows(store_url, "log_pending") == 12


@pytest.mark.parametrize("also_pending", [False, True])
def test_a_deleted_pending_event_is_never_papered_over(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    store_url: str,
    also_pending: bool,
) -> None:
    """Deleting an unsealed event (with or without its pending row) stops sealing:
    ``event_deleted``."""
    make_history(ledger, receiver, context)
    _drop_triggers(store_url, "audit_events_no_delete")
    target = _event(store, "op-lost", 2)["event_id"]
    raw_sql(store_url, f"DELETE FROM audit_events WHERE event_id = '{target}'")
    if also_pending:
        raw_sql(store_url, f"DELETE FROM log_pending WHERE event_id = '{target}'")
    with pytest.raises(AuditVerificationFailed) as refused:
        LogSealer(store, SIGNER).seal("acme")
    assert refused.value.reason == "event_deleted"
    assert count_rows(store_url, "log_checkpoints") == 0


def test_a_tampered_log_head_is_never_extended(
    sealed: Store, ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A stored frontier that does not reproduce the latest checkpoint stops sealing, so no
    inconsistent checkpoint is ever signed: ``checkpoint_inconsistent``."""
    from tests.conftest import admit

    admit(ledger, context, receiver, "op-new")
    raw_sql(store_url, f"UPDATE log_heads SET frontier = '{'00' * 32}' || substr(frontier, 65)")
    with pytest.raises(AuditVerificationFailed) as refused:
        LogSealer(sealed, SIGNER).seal("acme")
    assert refused.value.reason == "checkpoint_inconsistent"
    assert count_rows(store_url, "log_checkpoints") == 3


def test_a_checkpoint_forged_into_the_store_stops_the_sealer(
    sealed: Store, ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A checkpoint row signed by another key makes the sealer refuse rather than extend it."""
    from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
    from tests.conftest import admit

    admit(ledger, context, receiver, "op-new")
    note = sign_checkpoint(Checkpoint("effectledger/acme", 12, bytes(32)), [ROGUE_SIGNER])
    raw_sql(
        store_url,
        f"INSERT INTO log_checkpoints VALUES ('acme', 4, 12, '{'00' * 32}', 12, '[]', '{note}', 0)",
    )
    raw_sql(store_url, "UPDATE log_heads SET checkpoint_seq = 4")
    with pytest.raises(LogKeyInvalid):
        LogSealer(sealed, SIGNER).seal("acme")
    assert count_rows(store_url, "log_entries") == 12


def test_reformatted_details_are_not_an_edit(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    store_url: str,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    """Whitespace added to a stored details_json changes no content: it seals and verifies."""
    make_history(ledger, receiver, context)
    _drop_triggers(store_url, "audit_events_no_update")
    target = _event(store, "op-ok", 3)
    spaced = target["details_json"].replace(",", ", ").replace(":", ": ")
    raw_sql(
        store_url,
        f"UPDATE audit_events SET details_json = '{spaced}' "
        f"WHERE event_id = '{target['event_id']}'",
    )
    LogSealer(store, SIGNER, clock=clock).seal("acme")
    bundle = tmp_path / "acme.jsonl"
    export_log(store, "acme", bundle, clock=clock)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok, report.findings
