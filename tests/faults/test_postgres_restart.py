"""PostgreSQL restarted under a running worker process and API calls, or made read-only, on a
private cluster.

Refunds are admitted and performed while an ``effectledger worker`` process dispatches and
recovers; the server is restarted (``pg_ctl restart -m fast``: every session closed, open
transactions rolled back) twice. The worker backs off and resumes by itself, calls that failed
say so with a storage code, and in the end every refund the receiver performed is SUCCEEDED
exactly once by the receiver's own count, no refund was sent twice, and every trail is whole.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from effectledger import (
    EffectLedgerError,
    LedgerSettings,
    ManualClock,
    OperationState,
    StorageError,
    StorageReadOnly,
)
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app
from effectledger.clock import SystemClock
from effectledger.workers import Worker, WorkerSettings
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.conftest import count_rows, use_key_directory, with_options
from tests.faults._cluster import Cluster, private_cluster
from tests.faults._disk import check_consistent
from tests.http_api.server import serving
from tests.worker.support import Refunds, refunds, wait_until
from tests.worker.test_worker_processes import start_worker, stop

# One worker runs the clusters one at a time (pytest -n auto --dist loadgroup): two Patroni
# clusters or restarts at once on a 2-core machine would turn their deadlines into races.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres-clusters")]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A private PostgreSQL server of this test's own."""
    yield from private_cluster()


def _perform_until(world: Refunds, done: threading.Event, failures: list[str]) -> None:
    """Propose, approve and perform refunds until ``done``; note each failure's code."""
    while not done.is_set():
        try:
            proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
            world.app.approve(REVIEWER, proposal)
            world.app.perform(AGENT, proposal)
        except EffectLedgerError as exc:
            failures.append(exc.code)
            done.wait(0.05)


def test_a_restarted_server_stops_nothing_for_good_and_every_refund_is_made_once(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across two server restarts the worker process backs off and resumes, failed calls raise
    storage errors (503 over HTTP), and every refund the receiver made is SUCCEEDED once."""
    use_key_directory(monkeypatch, tmp_path)  # the worker process finds the ledger's keys there
    raw = with_options(cluster.url, schema="ledger")  # for reading rows around the store
    url = with_options(raw, connect_timeout=2, pool_timeout_s=1)
    world = refunds(
        url, tmp_path, clock=SystemClock(), settings=LedgerSettings(recover_after=timedelta(0))
    )
    keys = ApiKeys(world.app.store)
    token = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"]).token
    worker = start_worker(url, tmp_path, "--dispatch-threads", "2")
    failures: list[str] = []
    done = threading.Event()
    calls = threading.Thread(target=_perform_until, args=(world, done, failures))
    try:
        with (
            serving(create_app(world.app, keys)) as base,
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http,
        ):
            ready = world.ready(10)
            path = f"/v1/operations/{ready[0]}"
            calls.start()
            wait_until(lambda: OperationState.SUCCEEDED in world.states(ready))
            cluster.restart()
            ready += _retrying(lambda: world.ready(10))
            cluster.stop()  # down for a while: every pass of the worker fails
            down = http.get(path)
            threading.Event().wait(1.5)
            cluster.start()
            ready += _retrying(lambda: world.ready(10))
            done.set()
            calls.join(timeout=60)
            wait_until(lambda: set(world.states(ready)) == {OperationState.SUCCEEDED}, timeout=90)
            wait_until(lambda: _settled(world), timeout=90)
            back = http.get(path)
    finally:
        done.set()
        code, _, err = stop(worker)
    assert down.status_code == 503, down.text  # the API says the store is down
    assert down.json()["code"] in {"storage", "storage_busy"}
    assert back.status_code == 200, back.text  # and answers again once it is back
    assert back.json()["state"] == "SUCCEEDED"
    assert code == 0, err
    assert "the store does not answer" in err  # the worker backed off
    assert "answers again" in err or "dispatch:" in err  # and went on
    assert failures, "no API call met the restart"
    assert set(failures) <= {"storage", "storage_busy", "commit_uncertain"}, failures

    states = check_consistent(world.app, raw)
    counts = world.receiver.counts()
    assert counts.submissions == counts.effects  # nothing performed twice
    assert states.get(OperationState.READY, 0) == 0
    assert states[OperationState.SUCCEEDED] == counts.effects
    for operation in world.app.operations(REVIEWER, limit=1000):
        sent = world.receiver.effects_for(operation.idempotency_key)
        assert sent == (1 if operation.state is OperationState.SUCCEEDED else 0), operation
    assert count_rows(raw, "attempts") >= counts.effects
    world.close()


def _settled(world: Refunds) -> bool:
    """No READY operation, and every one the receiver performed is recorded SUCCEEDED."""
    for operation in world.app.operations(REVIEWER, limit=1000):
        sent = world.receiver.effects_for(operation.idempotency_key)
        if operation.state is OperationState.READY:
            return False
        if sent and operation.state is not OperationState.SUCCEEDED:
            return False
    return True


def _retrying(admit: object) -> list[str]:
    """``admit()`` once the server answers again (the first calls may meet it starting)."""
    assert callable(admit)
    for _ in range(100):
        try:
            admitted: list[str] = admit()
            return admitted
        except StorageError:
            threading.Event().wait(0.1)
    raise AssertionError("the server never answered again")


def _server_read_only(cluster: Cluster, on: bool) -> None:
    """Make the whole server read-only (or writable again) as an operator would, and wait
    until a new session sees it."""
    with psycopg.connect(cluster.url, autocommit=True) as connection:
        connection.execute("SET default_transaction_read_only = off")
        if on:
            connection.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        else:
            connection.execute("ALTER SYSTEM RESET default_transaction_read_only")
        connection.execute("SELECT pg_reload_conf()")
    wanted = "on" if on else "off"
    for _ in range(100):
        with psycopg.connect(cluster.url) as connection:
            row = connection.execute("SHOW default_transaction_read_only").fetchone()
        if row is not None and row[0] == wanted:
            threading.Event().wait(0.2)  # the pool's idle sessions apply it before their next use
            return
        threading.Event().wait(0.05)
    raise AssertionError("the server never took the setting")


def test_a_read_only_server_answers_reads_refuses_writes_and_resumes_when_writable(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A server turned read-only refuses every write with storage_read_only and writes nothing,
    reads answer, the worker backs off; writable again, the same ledger performs once."""
    raw = with_options(cluster.url, schema="ledger")
    clock = ManualClock()
    world = refunds(raw, tmp_path, clock=clock)
    try:
        (first,) = world.ready(1)
        proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
        world.app.approve(REVIEWER, proposal)
        before = {table: count_rows(raw, table) for table in ("operations", "audit_events")}
        _server_read_only(cluster, True)

        with pytest.raises(StorageReadOnly) as refused:
            world.app.perform(AGENT, proposal)
        assert refused.value.code == "storage_read_only"
        with pytest.raises(StorageReadOnly):
            world.app.propose(AGENT, "refund_order", REFUND_30)
        with pytest.raises(StorageReadOnly):
            Worker(world.app, WorkerSettings(seal_interval=None)).dispatch_pass()
        assert world.app.operation(REVIEWER, first).state is OperationState.READY
        assert world.app.summary(REVIEWER).by_state["READY"] == 1
        assert {table: count_rows(raw, table) for table in before} == before
        assert world.receiver.counts().effects == 0

        _server_read_only(cluster, False)
        assert world.app.perform(AGENT, proposal).state is OperationState.SUCCEEDED
        assert world.app.dispatch_ready()
        assert world.states([first]) == [OperationState.SUCCEEDED]
        assert check_consistent(world.app, raw) == {OperationState.SUCCEEDED: 2}
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (2, 2)
    finally:
        world.close()


def test_a_write_refused_by_a_demoted_server_runs_again_on_a_fresh_connection(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A pooled connection whose server turned read-only (as a demoted primary does) is dropped
    after its refusal and the write runs again on a fresh connection, which succeeds once."""
    raw = with_options(cluster.url, schema="ledger")
    world = refunds(raw, tmp_path, clock=ManualClock())
    try:
        proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
        world.app.approve(REVIEWER, proposal)
        with psycopg.connect(cluster.url, autocommit=True) as connection:
            # New sessions of this database write; the sessions open now only read.
            connection.execute("ALTER DATABASE postgres SET default_transaction_read_only = off")
            connection.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            connection.execute("SELECT pg_reload_conf()")
            for _ in range(100):
                applied = connection.execute(
                    "SELECT count(*) FROM pg_file_settings "
                    "WHERE name = 'default_transaction_read_only' AND applied"
                ).fetchone()
                if applied is not None and applied[0] == 1:
                    break
                threading.Event().wait(0.05)
        threading.Event().wait(0.3)  # the pool's idle sessions apply it before their next use
        result = world.app.perform(AGENT, proposal)
        assert result.state is OperationState.SUCCEEDED
        assert count_rows(raw, "operations", "state = 'SUCCEEDED'") == 1
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (1, 1)
    finally:
        world.close()
        _server_read_only(cluster, False)
        with psycopg.connect(cluster.url, autocommit=True) as connection:
            connection.execute("ALTER DATABASE postgres RESET default_transaction_read_only")
