"""`effectledger migrate --from URL --to URL`: a whole ledger moves between stores, verified.

The ledger moved holds sealed checkpoints, events still waiting to be sealed, an evidence blob,
an uncertain operation, an API key, a capacity limit and an export cursor. After the move the
target holds the same rows, and goes on as the source would have: it performs, recovers the
uncertain refund by lookup (the receiver's own count proves nothing was sent twice), seals on
from the copied checkpoint, exports, and `audit verify` accepts its bundle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from effectledger import (
    AuditVerificationFailed,
    Context,
    LedgerNotEmpty,
    ManualClock,
    Observation,
    OperationState,
    Outcome,
)
from effectledger.app.keys import ApiKeys
from effectledger.audit.moving import move_ledger
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.audit.witnessing.witness import Witness
from effectledger.audit.witnessing.witness_http import serve_witness
from effectledger.authority.capacity import totals_mismatches_in
from effectledger.cli import main as cli_main
from effectledger.model.evidence import EvidencePolicy, capture
from effectledger.store import open_store
from effectledger.store.copying import NOT_MOVED, TABLES, table_names
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.conftest import admit, count_rows, drop_trigger, make_store_url, raw_sql
from tests.support.evidence import SIGNER, VERIFIER_KEY
from tests.worker.support import LOOKUP_WINDOW, Refunds, refunds

MOVED = [name for name, _ in TABLES]
OPERATOR = Context(tenant_id="acme", actor_id="ops", roles=frozenset({"approver"}))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "EFFECTLEDGER_LOG_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        cwd=cwd,
        env={**environment, "COLUMNS": "250", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _refund(world: Refunds) -> OperationState:
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    world.app.approve(REVIEWER, proposal)
    return world.app.perform(AGENT, proposal).state


def _history(world: Refunds, tmp_path: Path) -> str:
    """Two sealed refunds, a blob, a lost reply, a cosigned checkpoint, an export, unsealed work;
    the uncertain id."""
    assert [_refund(world) for _ in range(2)] == [OperationState.SUCCEEDED] * 2
    admit(world.app.ledger, OPERATOR, world.receiver, "op-blob")
    prepared = world.app.ledger.claim(OPERATOR, "op-blob", attempt_id="attempt-blob")
    assert prepared is not None
    evidence = capture({"status": 201}, EvidencePolicy(), body={"id": "r-blob"})
    world.app.ledger.record(
        prepared,
        Observation(outcome=Outcome.ACCEPTED, provider_reference="r-blob", evidence=evidence),
    )
    assert world.app.seal(REVIEWER).checkpoints == 1
    (lost,) = world.uncertain(1)
    cosigner = Cosigner("witness.example/w1", bytes(range(64, 96)))
    witness = Witness(tmp_path / "witness.db", cosigner, [SIGNER.verifier()])
    server = serve_witness(witness, port=0)
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}={cosigner.verifier().key_string()}"
        (sealed,) = world.app.seal_pending(witnesses=[endpoint])  # its checkpoint is cosigned
        assert (sealed.checkpoints, sealed.cosigned) == (1, 2), sealed  # the old and the new
    finally:
        server.shutdown()
        server.server_close()
        witness.close()
    world.app.export(REVIEWER, tmp_path / "before.jsonl", exporter_id="nightly")
    assert _refund(world) is OperationState.SUCCEEDED  # its events wait to be sealed
    ApiKeys(world.app.store).create(tenant_id="acme", actor_id="rita", roles=["approver"])
    world.app.set_capacity_limit(REVIEWER, "refunds", 10_000)
    traced = {  # the row an admission under a recording tracer keeps (ledger.traces)
        "tenant_id": "acme",
        "operation_id": lost,
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    }
    world.app.store.write(lambda tx: tx.run("operation_trace_insert", traced))
    return lost


def _counts(url: str) -> dict[str, int]:
    return {table: count_rows(url, table) for table in MOVED}


DIRECTIONS = [
    pytest.param("sqlite", "postgres", id="sqlite-to-postgres", marks=pytest.mark.postgres),
    pytest.param("postgres", "sqlite", id="postgres-to-sqlite", marks=pytest.mark.postgres),
    pytest.param("sqlite", "sqlite", id="sqlite-to-sqlite"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("source_backend", "target_backend"), DIRECTIONS)
def test_a_moved_ledger_holds_every_row_and_performs_recovers_seals_and_verifies(
    source_backend: str, target_backend: str, tmp_path: Path
) -> None:
    """Moved by the command, the target holds every row and goes on performing, recovering once,
    sealing from the copied checkpoint, exporting, and `audit verify` accepts it."""
    (tmp_path / "from").mkdir()
    (tmp_path / "to").mkdir()
    source_url = make_store_url(source_backend, tmp_path / "from")
    target_url = make_store_url(target_backend, tmp_path / "to")
    clock = ManualClock()
    world = refunds(source_url, tmp_path, clock=clock, signer=SIGNER)
    try:
        lost = _history(world, tmp_path)
    finally:
        world.close()
    before = _counts(source_url)
    assert all(before.values()), before  # every table has something to move

    moved = _cli("migrate", "--from", source_url, "--to", target_url, "--batch", "2", cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    assert "migrate: audit_events 2/" in moved.stderr  # progress, a batch at a time
    assert f"moved {sum(before.values())} rows of {len(MOVED)} tables" in moved.stdout
    assert "verified 6 trails, 1 logs and 2 checkpoints" in moved.stdout
    assert _counts(target_url) == before
    assert _counts(source_url) == before  # the source is only read

    world = refunds(target_url, tmp_path, clock=clock, signer=SIGNER)
    try:
        assert world.app.operation(REVIEWER, lost).state is OperationState.OUTCOME_UNKNOWN
        assert _refund(world) is OperationState.SUCCEEDED
        clock.advance(LOOKUP_WINDOW)
        assert world.app.recover().resolved
        assert world.app.operation(REVIEWER, lost).state is OperationState.SUCCEEDED
        sealed = world.app.seal(REVIEWER)
        assert (sealed.checkpoints, sealed.checkpoint_seq, sealed.pending) == (1, 3, 0)
        bundle = tmp_path / "after.jsonl"
        assert world.app.export(REVIEWER, bundle).events == sealed.size
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (
            5,
            5,
        )  # looked up, never resent
        assert world.receiver.effects_for(world.app.operation(REVIEWER, lost).idempotency_key) == 1
        # the target's triggers built its capacity totals from the copied operations
        assert world.app.store.read(totals_mismatches_in) == []
        assert world.app.store.read(lambda tx: tx.all("capacity_totals_all", {}))
    finally:
        world.close()
    verified = _cli("audit", "verify", "--bundle", str(bundle), "--key", VERIFIER_KEY, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert "verified log of tenant acme" in verified.stdout


@pytest.mark.slow
def test_a_target_that_holds_rows_is_refused_and_left_as_it_was(
    backend: str, tmp_path: Path
) -> None:
    """Moving into a ledger that holds anything is refused with ledger_not_empty, nothing
    written to it."""
    (tmp_path / "from").mkdir()
    (tmp_path / "to").mkdir()
    source_url = make_store_url("sqlite", tmp_path / "from")
    target_url = make_store_url(backend, tmp_path / "to")
    world = refunds(source_url, tmp_path / "from")
    try:
        assert _refund(world) is OperationState.SUCCEEDED
    finally:
        world.close()
    other = refunds(target_url, tmp_path / "to")
    try:
        other.ready(1)
    finally:
        other.close()
    before = _counts(target_url)

    with pytest.raises(LedgerNotEmpty) as refused:
        move_ledger(source_url, target_url)
    assert refused.value.code == "ledger_not_empty"
    assert refused.value.details["tables"]["operations"] == 1
    assert _counts(target_url) == before

    done = _cli("migrate", "--from", source_url, "--to", target_url, cwd=tmp_path)
    assert done.returncode == 1
    assert "error [ledger_not_empty]" in done.stderr
    assert _counts(target_url) == before


@pytest.mark.slow
def test_a_move_whose_trails_do_not_verify_leaves_the_target_empty(
    backend: str, tmp_path: Path
) -> None:
    """A source whose event was edited behind the ledger's back is not moved: the
    verification fails inside the target's transaction and the target keeps no row."""
    (tmp_path / "from").mkdir()
    (tmp_path / "to").mkdir()
    source_url = make_store_url("sqlite", tmp_path / "from")
    target_url = make_store_url(backend, tmp_path / "to")
    world = refunds(source_url, tmp_path / "from")
    try:
        assert [_refund(world) for _ in range(3)] == [OperationState.SUCCEEDED] * 3
    finally:
        world.close()
    drop_trigger(source_url, "audit_events", "audit_events_no_update")
    raw_sql(
        source_url,
        "UPDATE audit_events SET actor = 'mallory' WHERE event_type = 'AttemptPrepared' "
        "AND event_id = (SELECT min(event_id) FROM audit_events "
        "WHERE event_type = 'AttemptPrepared')",
    )

    with pytest.raises(AuditVerificationFailed) as refused:
        move_ledger(source_url, target_url, batch=1)
    assert refused.value.reason == "event_edited"
    assert _counts(target_url) == dict.fromkeys(MOVED, 0)


def test_every_table_of_the_schema_is_moved(store_url: str) -> None:
    """The copier names every table the migrations create: a new table fails here until it is
    added to TABLES (or to NOT_MOVED, filled by the target's own migrations)."""
    store = open_store(store_url)
    try:
        assert set(table_names(store)) == set(MOVED) | NOT_MOVED
    finally:
        store.close()
    assert len(MOVED) == len(set(MOVED))


def _small_source(tmp_path: Path) -> str:
    (tmp_path / "from").mkdir()
    source_url = make_store_url("sqlite", tmp_path / "from")
    world = refunds(source_url, tmp_path / "from", signer=SIGNER)
    try:
        assert [_refund(world) for _ in range(3)] == [OperationState.SUCCEEDED] * 3
        world.app.seal(REVIEWER)
    finally:
        world.close()
    return source_url


@pytest.mark.slow
def test_sixteen_threads_moving_into_one_target_move_it_once(backend: str, tmp_path: Path) -> None:
    """16 threads moving the same ledger into one empty target: one moves it, the other 15
    are refused with ledger_not_empty, and the target holds each row once."""
    source_url = _small_source(tmp_path)
    (tmp_path / "to").mkdir()
    target_url = make_store_url(backend, tmp_path / "to")
    open_store(target_url).close()  # created once: the race is over the rows, not the schema
    outcomes: list[str] = []

    def move() -> None:
        try:
            move_ledger(source_url, target_url, batch=5)
            outcomes.append("moved")
        except LedgerNotEmpty as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=move) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["ledger_not_empty"] * 15 + ["moved"]
    assert _counts(target_url) == _counts(source_url)


@pytest.mark.slow
def test_four_processes_moving_into_one_target_move_it_once(backend: str, tmp_path: Path) -> None:
    """4 `migrate --from --to` processes into one empty target: one exits 0, three exit 1 with
    ledger_not_empty, and the target holds each row once."""
    source_url = _small_source(tmp_path)
    (tmp_path / "to").mkdir()
    target_url = make_store_url(backend, tmp_path / "to")
    open_store(target_url).close()
    environment = {key: value for key, value in os.environ.items() if key != "EFFECTLEDGER_LOG_KEY"}
    command = [sys.executable, "-m", "effectledger.cli", "migrate", "--from", source_url]
    command += ["--to", target_url, "--batch", "5"]
    processes = [
        subprocess.Popen(
            command,
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    finished = [(process.wait(timeout=120), process.communicate()[1]) for process in processes]
    assert sorted(code for code, _ in finished) == [0, 1, 1, 1]
    refused = [err for code, err in finished if code == 1]
    assert all("error [ledger_not_empty]" in err for err in refused), refused
    assert _counts(target_url) == _counts(source_url)


def test_a_move_from_nowhere_or_onto_itself_is_refused_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing source, a source that is not a ledger, one URL for both sides, or --from
    without --to exit 1 with a stable code and leave no target file behind."""
    target = tmp_path / "target.db"
    to = f"sqlite:///{target}"
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, just bytes" * 10)
    cases = [
        (["--from", f"sqlite:///{tmp_path / 'missing.db'}", "--to", to], "not_found"),
        (["--from", f"sqlite:///{junk}", "--to", to], "invalid_input"),
        (["--from", to, "--to", to], "invalid_input"),
        (["--from", f"sqlite:///{junk}"], "invalid_input"),
    ]
    for arguments, code in cases:
        assert cli_main(["migrate", *arguments]) == 1
        assert f"error [{code}]" in capsys.readouterr().err
        assert not target.exists()
    assert junk.read_bytes() == b"not a database at all, just bytes" * 10


@pytest.mark.slow
def test_a_move_whose_log_does_not_rebuild_its_checkpoint_leaves_the_target_empty(
    backend: str, tmp_path: Path
) -> None:
    """A source whose sealed leaf was edited no longer reproduces its signed checkpoint's root:
    the move is refused with log_root_mismatch and the target keeps no row."""
    source_url = _small_source(tmp_path)
    (tmp_path / "to").mkdir()
    target_url = make_store_url(backend, tmp_path / "to")
    drop_trigger(source_url, "log_entries", "log_entries_no_update")
    raw_sql(source_url, f"UPDATE log_entries SET leaf_hash = '{'00' * 32}' WHERE position = 1")

    with pytest.raises(AuditVerificationFailed) as refused:
        move_ledger(source_url, target_url, batch=3)
    assert refused.value.reason == "log_root_mismatch"
    assert _counts(target_url) == dict.fromkeys(MOVED, 0)
