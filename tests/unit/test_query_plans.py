"""Every named SQLite query finds its rows by key: no statement reads a whole tenant by accident.

A query that filters on a column no index leads with still returns the right rows, so only its
plan shows the mistake (admission once read every approval of the tenant to find one proposal's
denial). ``EXPLAIN QUERY PLAN`` of each statement is checked against two rules: no full scan of
a table, and no search that pins only the tenant. The queries that must read a whole tenant (or
every tenant) by design are listed with the reason; a new one has to be added here on purpose.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from effectledger.sql import load_queries, load_statements, schema

# query name -> why reading a whole tenant (or every tenant) is what it is for
WHOLE_TENANT = {
    "operations_list": "lists a tenant's operations, a page at a time",
    "operations_by_state": "the operator's summary counts a tenant's operations by state",
    "operations_uncertain_oldest": "the operator's summary: a tenant's uncertain operations",
    "attempts_due_lock": "the recovery queue: walks the unresolved index across tenants",
    "log_head_lock": "log_heads holds one row per tenant: its key is the tenant",
    "log_head_get": "log_heads holds one row per tenant: its key is the tenant",
    "log_head_advance": "log_heads holds one row per tenant: its key is the tenant",
    "log_tenants": "the sealer's list of tenants with a log",
    "log_pending_tenants": "the sealer's list of tenants with pending entries",
    "log_pending_batch": "the sealer takes a tenant's pending entries in order",
    "log_pending_oldest": "the sealer's oldest pending entry of a tenant",
    "log_checkpoint_latest": "a tenant's latest checkpoint, newest first on its key",
    "api_keys_list": "an administrator's list of every API key",
    "api_keys_list_tenant": "an administrator's list of a tenant's API keys",
    "operations_by_tenant_state": "the gauges count every tenant's operations by state",
    "operations_uncertain_oldest_by_tenant": "the gauges: every tenant's uncertain operations",
    "log_pending_oldest_by_tenant": "the gauges: every tenant's oldest pending entry",
    "operations_in_review": "the manual-review queue: the partial index holds only those in review",
    "capacity_recount": "the capacity check recounts every pool from its operations",
    "capacity_totals_all": "the capacity check compares every pool's running totals",
    "capacity_totals_rebuild": "the capacity repair rebuilds every pool from its operations",
    "ledger_has_events": "whether the ledger holds any event at all: EXISTS stops at the first",
    "trails_in_flight": "audit retag walks every trail not yet final, an operator's command",
    "trails_in_flight_count": "audit retag's progress counts every trail not yet final",
    "decisions_page": "the desk's history lists a tenant's decisions, newest first, by page",
}
_PARAMETER = re.compile(r":(\w+)")


def _plans() -> dict[str, list[str]]:
    connection = sqlite3.connect(":memory:")
    connection.executescript(schema("sqlite"))
    connection.execute(load_statements("sqlite", "store.sql")["migrations_create"])
    plans: dict[str, list[str]] = {}
    for name, text in load_queries("sqlite").items():
        steps: list[str] = []
        for statement in filter(str.strip, text.split(";")):
            bound = dict.fromkeys(_PARAMETER.findall(statement))
            rows = connection.execute(f"EXPLAIN QUERY PLAN {statement}", bound).fetchall()
            steps.extend(str(row[3]) for row in rows)
        plans[name] = steps
    connection.close()
    return plans


def _reads_too_much(step: str) -> bool:
    scanned = step.split()[1] if step.startswith("SCAN ") else None
    # SCAN CONSTANT ROW and the one-row ``(SELECT 1) AS request`` a LEFT JOIN hangs on read nothing;
    # json_each walks the keys a batch passes as a parameter, not a table
    return scanned not in (None, "CONSTANT", "request", "json_each") or "(tenant_id=?)" in step


PLANS = _plans()


@pytest.mark.parametrize("name", sorted(set(PLANS) - set(WHOLE_TENANT)))
def test_query_reads_by_key(name: str) -> None:
    """The statement's plan neither scans a table nor searches by the tenant alone."""
    wide = [step for step in PLANS[name] if _reads_too_much(step)]
    assert not wide, f"{name} reads more than its rows: {wide}"


def test_whole_tenant_list_is_current() -> None:
    """Every query allowed to read a whole tenant exists and still does (else drop it here)."""
    assert set(WHOLE_TENANT) <= set(PLANS)
    narrow = [name for name in WHOLE_TENANT if not any(map(_reads_too_much, PLANS[name]))]
    assert not narrow, f"these read by key now; remove them from WHOLE_TENANT: {narrow}"


def test_the_check_catches_a_tenant_wide_read(tmp_path: Path) -> None:
    """Without the proposal index, admission's approval read is caught as tenant-wide."""
    connection = sqlite3.connect(tmp_path / "ledger.db")
    connection.executescript(schema("sqlite"))
    connection.execute("DROP INDEX approvals_by_proposal")
    statement = load_queries("sqlite")["admission_approval"]
    bound = dict.fromkeys(_PARAMETER.findall(statement))
    steps = [str(row[3]) for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}", bound)]
    connection.close()
    assert any(map(_reads_too_much, steps)), steps
