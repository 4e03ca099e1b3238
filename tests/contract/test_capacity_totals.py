"""Running capacity totals: moved by every state change, rebuilt by migration 14, checked by the
CLI, on both backends."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger, SubmitMode
from effectledger.authority.capacity import totals_mismatches_in
from effectledger.cli import main
from effectledger.sql import migrations
from effectledger.store import open_store
from tests.conftest import RAW_REFUSED, count_rows, raw_sql
from tests.races.world import AGENT, REFUND_30, approver, build, close

# One row of the pool's totals (PostgreSQL spreads a pool over several) gains 500 held units.
TAMPER = (
    "UPDATE capacity_totals SET held = held + 500 "
    "WHERE shard = (SELECT min(shard) FROM capacity_totals)"
)


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


def _perform(service: EffectLedger, order: int, mode: SubmitMode) -> str:
    """Propose, approve and perform one refund of 30 while the receiver answers in ``mode``."""
    proposal = service.propose(AGENT, "refund_order", {**REFUND_30, "order_id": f"ord-{order}"})
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    receiver = next(iter(service.destinations.values()))
    receiver.submit_mode = mode  # type: ignore[attr-defined]
    return str(service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id).state)


def _totals(store_url: str) -> list[tuple[object, ...]]:
    rows = raw_sql(
        store_url,
        "SELECT tenant_id, pool, sum(held), sum(committed), sum(freed) FROM capacity_totals "
        "GROUP BY tenant_id, pool",
    )
    return [tuple(int(v) if not isinstance(v, str) else v for v in row) for row in rows]  # type: ignore[call-overload]


def _mix(service: EffectLedger) -> None:
    """Two successes, one permanent rejection and one lost request (held, outcome unknown)."""
    _perform(service, 1, SubmitMode.ACCEPT)
    _perform(service, 2, SubmitMode.ACCEPT)
    _perform(service, 3, SubmitMode.PERMANENT_REJECT)
    _perform(service, 4, SubmitMode.LOSE_REQUEST)


def test_each_state_change_moves_the_pool_totals(service: EffectLedger, store_url: str) -> None:
    """Success commits, rejection frees and an unknown outcome holds the units in the totals."""
    _mix(service)
    assert _totals(store_url) == [("acme", "refunds", 30, 60, 30)]
    usage = service.authority.capacity(AGENT, "refunds")
    assert (usage.held, usage.committed, usage.freed) == (30, 60, 30)
    assert service.ledger.store.read(totals_mismatches_in) == []


def test_migration_14_builds_the_totals_of_an_existing_ledger(
    service: EffectLedger, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger from before migration 14 gets totals equal to its operations' units, and says so."""
    _mix(service)
    close(service)
    sqlite = store_url.startswith("sqlite:")
    for trigger in ("operations_capacity_admitted", "operations_capacity_moved"):
        raw_sql(store_url, f"DROP TRIGGER {trigger}" + ("" if sqlite else " ON operations"))
    raw_sql(
        store_url, "DROP TRIGGER operations_capacity_fixed" + ("" if sqlite else " ON operations")
    )
    if not sqlite:
        raw_sql(store_url, "DROP FUNCTION effectledger_capacity_moved()")
        raw_sql(store_url, "DROP FUNCTION effectledger_capacity_fixed()")
    raw_sql(store_url, "DROP TABLE capacity_totals")
    raw_sql(
        store_url, "CREATE INDEX operations_capacity ON operations (tenant_id, pool, state, units)"
    )
    raw_sql(store_url, "DELETE FROM schema_migrations WHERE version = 14")
    store = open_store(store_url, migrate=False)
    try:
        with caplog.at_level(logging.WARNING, logger="effectledger.store"):
            assert store.migrate() == [14]
        said = [r.getMessage() for r in caplog.records if r.name == "effectledger.store"]
        applying = [line for line in said if line.startswith("applying")]
        assert len(applying) == 1
        assert applying[0].startswith("applying schema migration 0014 (capacity_totals)")
        assert store.read(totals_mismatches_in) == []
    finally:
        store.close()
    assert _totals(store_url) == [("acme", "refunds", 30, 60, 30)]


def test_a_new_ledger_is_created_without_a_migration_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Creating a ledger applies every migration without announcing one: only upgrades warn."""
    with caplog.at_level(logging.WARNING, logger="effectledger.store"):
        open_store(f"sqlite:///{tmp_path / 'new.db'}").close()
    assert [r for r in caplog.records if r.name == "effectledger.store"] == []
    applied = raw_sql(f"sqlite:///{tmp_path / 'new.db'}", "SELECT count(*) FROM schema_migrations")
    assert applied == [(len(migrations("sqlite")),)]


def test_capacity_check_finds_and_repairs_a_wrong_total(
    service: EffectLedger, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``capacity check`` exits 1 on a tampered total; ``--repair`` rebuilds it from operations."""
    _mix(service)
    assert main(["capacity", "check", "--db", store_url]) == 0
    raw_sql(store_url, TAMPER)
    assert main(["capacity", "check", "--db", store_url]) == 1
    assert "pool refunds: totals held 530" in capsys.readouterr().out
    assert _totals(store_url) == [("acme", "refunds", 530, 60, 30)]  # a check changes nothing
    assert main(["capacity", "check", "--db", store_url, "--repair"]) == 1
    assert _totals(store_url) == [("acme", "refunds", 30, 60, 30)]
    assert main(["capacity", "check", "--db", store_url]) == 0


def test_capacity_check_on_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    """``capacity check`` on a path with no ledger fails with a stable code and writes no file."""
    missing = tmp_path / "nothing.db"
    assert main(["capacity", "check", "--db", f"sqlite:///{missing}"]) == 1
    assert not missing.exists()


def test_an_admitted_operations_pool_and_units_are_fixed(
    service: EffectLedger, store_url: str
) -> None:
    """The database refuses to change an operation's units or pool, so totals cannot drift."""
    _perform(service, 1, SubmitMode.ACCEPT)
    for change in ("units = 1", "pool = 'other'", "pool = NULL"):
        with pytest.raises(RAW_REFUSED):
            raw_sql(store_url, f"UPDATE operations SET {change}")
    assert count_rows(store_url, "operations", "units = 30 AND pool = 'refunds'") == 1
    assert _totals(store_url) == [("acme", "refunds", 0, 30, 0)]
