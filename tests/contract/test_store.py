"""The store contract: transactions, the database's own guards, and errors in the project's tree."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from effectledger import ConstraintViolation, Context, InvalidInput, SimulatedReceiver, StorageError
from effectledger.ledger import Ledger
from effectledger.store import Store, Transaction, open_store
from effectledger.store.postgres import PostgresStore
from effectledger.workers import Executor
from tests.conftest import admit, run_sql, with_options

_DRIVER_ERRORS = (sqlite3.Error, psycopg.Error)


def _event(ledger: Ledger, context: Context, **changes: Any) -> dict[str, Any]:
    """The parameters of a copy of op-1's first audit event, with ``changes`` applied."""
    (first,) = [event for event in ledger.events(context, "op-1") if event.sequence == 1]
    return {
        "event_id": "evt-copy",
        "tenant_id": first.tenant_id,
        "operation_id": first.operation_id,
        "attempt_id": first.attempt_id,
        "sequence": 99,
        "actor": first.actor,
        "event_type": first.event_type,
        "recorded_us": 1,
        "evidence_reference": None,
        "details_json": "{}",
        "observation_id": None,
        "prev_hash": first.prev_hash,
        "event_hash": first.event_hash,
        "trail_tag": None,
        **changes,
    }


def test_a_failing_body_leaves_no_trace(
    store: Store, ledger: Ledger, receiver: SimulatedReceiver, context: Context
) -> None:
    """A write whose body raises after a statement rolls back: the event is not stored."""
    admit(ledger, context, receiver)
    copy = _event(ledger, context)

    def body(tx: Transaction) -> None:
        tx.run("event_insert", copy)
        raise RuntimeError("the body changed its mind")

    with pytest.raises(RuntimeError):
        store.write(body)
    assert len(ledger.events(context, "op-1")) == 1


def test_duplicate_sequence_is_a_constraint_violation(
    store: Store, ledger: Ledger, receiver: SimulatedReceiver, context: Context
) -> None:
    """Two events with one sequence number are refused, as ConstraintViolation from the driver."""
    admit(ledger, context, receiver)

    copy = _event(ledger, context, sequence=1)

    with pytest.raises(ConstraintViolation) as refused:
        store.write(lambda tx: tx.run("event_insert", copy))

    assert isinstance(refused.value.__cause__, _DRIVER_ERRORS)
    assert len(ledger.events(context, "op-1")) == 1


def test_event_cannot_name_an_attempt_of_another_operation(
    store: Store, ledger: Ledger, receiver: SimulatedReceiver, context: Context
) -> None:
    """The composite foreign key refuses an event that names another operation's attempt."""
    admit(ledger, context, receiver, "op-1")
    admit(ledger, context, receiver, "op-2")
    attempt_of_op_2 = Executor(ledger, receiver).execute(context, "op-2").attempt_id

    copy = _event(ledger, context, attempt_id=attempt_of_op_2)

    with pytest.raises(ConstraintViolation):
        store.write(lambda tx: tx.run("event_insert", copy))
    assert len(ledger.events(context, "op-1")) == 1


@pytest.mark.parametrize(
    "statement",
    ["UPDATE audit_events SET actor = 'mallory'", "DELETE FROM audit_events"],
)
def test_audit_events_are_append_only_in_the_database(
    store_url: str,
    ledger: Ledger,
    receiver: SimulatedReceiver,
    context: Context,
    statement: str,
) -> None:
    """The database itself refuses to change or delete an audit event, whoever asks."""
    admit(ledger, context, receiver)

    with pytest.raises(_DRIVER_ERRORS, match="append-only"):
        run_sql(store_url, statement)

    (event,) = ledger.events(context, "op-1")
    assert event.actor == "alice"


def test_read_sees_one_snapshot(
    store: Store, ledger: Ledger, receiver: SimulatedReceiver, context: Context
) -> None:
    """A read transaction returns the rows it reads by name, and writes nothing."""
    admit(ledger, context, receiver)

    rows = store.read(lambda tx: tx.all("operations_list", {"tenant_id": "acme", "limit": 10}))

    assert [row["operation_id"] for row in rows] == ["op-1"]


# -- PostgreSQL: URLs, connections and retries ----------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("option", "value"),
    [("schema", "Not-A-Schema"), ("pool_max_size", "many"), ("pool_max_size", "0")],
)
def test_bad_store_options_are_invalid_input(postgres_url: str, option: str, value: str) -> None:
    """A malformed store option in the URL is refused before any connection is made."""
    url = postgres_url.partition("?")[0]
    with pytest.raises(InvalidInput):
        open_store(with_options(url, **{option: value}))


@pytest.mark.postgres
def test_unreachable_server_is_a_storage_error(postgres_url: str) -> None:
    """Opening a store on a port nobody listens on fails at once with a StorageError."""
    with pytest.raises(StorageError) as failed:
        open_store("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")
    assert isinstance(failed.value.__cause__, psycopg.Error)


@pytest.mark.postgres
def test_libpq_options_pass_through_the_url(postgres_url: str, application_name: str) -> None:
    """URL options the store does not know go to libpq (here the application name)."""
    store = open_store(with_options(postgres_url, application_name=application_name))
    try:
        row = store.one("operation_get", {"tenant_id": "t", "operation_id": "o"})
        assert row is None
        (name,) = run_sql(
            postgres_url,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = ?",
            (application_name,),
        )[0]
        assert name >= 1
    finally:
        store.close()


@pytest.fixture
def application_name() -> str:
    """A connection name no other test session uses."""
    return f"effectledger-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def named_store(postgres_url: str, application_name: str) -> Iterator[PostgresStore]:
    """A PostgreSQL store whose connections carry a name other sessions can find."""
    store = PostgresStore.from_url(
        with_options(postgres_url, application_name=application_name, pool_min_size=4)
    )
    yield store
    store.close()


@pytest.mark.postgres
def test_connections_killed_by_the_server_are_replaced(
    named_store: PostgresStore,
    postgres_url: str,
    application_name: str,
    context: Context,
    receiver: SimulatedReceiver,
) -> None:
    """After the server terminates every pooled connection, writes and reads still succeed."""
    ledger = Ledger(named_store)
    admit(ledger, context, receiver, "op-1")
    killed = run_sql(
        postgres_url,
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = ?",
        (application_name,),
    )
    assert killed

    admit(ledger, context, receiver, "op-2")

    assert ledger.get(context, "op-2").operation_id == "op-2"


@pytest.mark.postgres
def test_deadlocked_transaction_is_run_again(postgres_url: str, named_store: PostgresStore) -> None:
    """Two writes that deadlock both complete: the victim's body is re-run (SQLSTATE 40P01)."""
    for operation_id in ("op-a", "op-b"):
        run_sql(
            postgres_url,
            "INSERT INTO operations (tenant_id, operation_id, requester_id, revision, action, "
            "contract_version, command_json, fingerprint, admission_reference, "
            "destination_account, destination_endpoint, idempotency_key, state, version, "
            "created_us, updated_us, last_event_hash) "
            "VALUES ('acme', ?, 'alice', 'r', 'a', 'v', '{}', 'f', 'ref', 'acct', 'e', ?, "
            "'READY', 1, 1, 1, 'h')",
            (operation_id, f"key-{operation_id}"),
        )
    other = PostgresStore.from_url(postgres_url)
    both_locked_one = threading.Barrier(2, timeout=20)
    runs: list[str] = []

    def crossing(first: str, second: str) -> Any:
        def body(tx: Transaction) -> str:
            runs.append(first)
            tx.one("operation_lock", {"tenant_id": "acme", "operation_id": first})
            if runs.count(first) == 1:
                both_locked_one.wait()
            tx.one("operation_lock", {"tenant_id": "acme", "operation_id": second})
            return first

        return body

    results: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(named_store.write(crossing("op-a", "op-b")))
        ),
        threading.Thread(target=lambda: results.append(other.write(crossing("op-b", "op-a")))),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        other.close()

    assert sorted(results) == ["op-a", "op-b"]
    assert len(runs) == 3  # one body ran twice


@pytest.mark.postgres
def test_audit_events_cannot_be_truncated(
    postgres_url: str, receiver: SimulatedReceiver, context: Context
) -> None:
    """On PostgreSQL the append-only guard also refuses TRUNCATE of the audit trail."""
    store = PostgresStore.from_url(postgres_url)
    try:
        ledger = Ledger(store)
        admit(ledger, context, receiver)

        with pytest.raises(psycopg.Error, match="append-only"):
            run_sql(postgres_url, "TRUNCATE audit_events CASCADE")

        assert len(ledger.events(context, "op-1")) == 1
    finally:
        store.close()


def _step(ledger: Ledger, context: Context, **changes: Any) -> dict[str, Any]:
    """Parameters of ``operation_step`` moving op-1 from its stored row, with ``changes``."""
    row = ledger.store.one(
        "operation_get", {"tenant_id": context.tenant_id, "operation_id": "op-1"}
    )
    assert row is not None
    sequence = int(row["event_sequence"])
    return {
        **_event(ledger, context, event_id="evt-step", event_hash="f" * 64),
        "prev_hash": row["last_event_hash"],
        "state": row["state"],
        "active_attempt_id": row["active_attempt_id"],
        "provider_reference": row["provider_reference"],
        "inconclusive_lookups": row["inconclusive_lookups"],
        "retries_authorized": row["retries_authorized"],
        "review_owner": row["review_owner"],
        "review_deadline_us": row["review_deadline_us"],
        "version": int(row["version"]),
        "new_version": int(row["version"]),
        "sequence": sequence,
        "new_sequence": sequence + 1,
        "now_us": 2,
        **changes,
    }


def _trail_length(ledger: Ledger, context: Context) -> int:
    return len(ledger.events(context, "op-1"))


def test_an_operation_step_writes_its_row_and_event_together(
    store: Store, ledger: Ledger, receiver: SimulatedReceiver, context: Context
) -> None:
    """``operation_step`` counts 1 and stores the row's move and the event at the new head."""
    admit(ledger, context, receiver)
    before = _trail_length(ledger, context)
    params = _step(ledger, context)
    assert store.write(lambda tx: tx.run("operation_step", params)) == 1
    events = ledger.events(context, "op-1")
    assert len(events) == before + 1
    assert events[-1].event_id == "evt-step"
    assert events[-1].sequence == params["new_sequence"]
    row = store.one("operation_get", {"tenant_id": context.tenant_id, "operation_id": "op-1"})
    assert row is not None
    assert row["event_sequence"] == params["new_sequence"]
    assert row["last_event_hash"] == "f" * 64


@pytest.mark.parametrize("stale", ["version", "sequence"])
def test_an_operation_step_on_a_stale_row_writes_nothing(
    store: Store, ledger: Ledger, receiver: SimulatedReceiver, context: Context, stale: str
) -> None:
    """A guard that no longer holds (version or trail head moved) counts 0: no event, no move."""
    admit(ledger, context, receiver)
    before = _trail_length(ledger, context)
    params = _step(ledger, context)
    params[stale] += 1  # the row no longer has this version / trail head
    assert store.write(lambda tx: tx.run("operation_step", params)) == 0
    assert _trail_length(ledger, context) == before
    row = store.one("operation_get", {"tenant_id": context.tenant_id, "operation_id": "op-1"})
    assert row is not None
    assert row["event_sequence"] == params["new_sequence"] - 1


def test_an_sqlite_connection_takes_the_configured_page_cache(tmp_path: Any) -> None:
    """Each SQLite connection's page cache is 64 MiB by default and ``cache_kib`` in the URL."""
    for query, expected in (("", -65536), ("?cache_kib=4096", -4096)):
        store = open_store(f"sqlite:///{tmp_path / 'ledger.db'}{query}")
        try:
            with store._leased() as connection:  # type: ignore[attr-defined]
                assert connection.execute("PRAGMA cache_size").fetchone()[0] == expected
        finally:
            store.close()


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_a_bad_sqlite_cache_size_is_invalid_input(tmp_path: Any, value: str) -> None:
    """A ``cache_kib`` that is not a whole number of KiB from 1 is refused and creates no file."""
    path = tmp_path / "ledger.db"
    with pytest.raises(InvalidInput) as caught:
        open_store(f"sqlite:///{path}?cache_kib={value}")
    assert (caught.value.code, caught.value.details["field"]) == ("invalid_input", "cache_kib")
    assert not path.exists()
