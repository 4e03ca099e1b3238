"""Capacity: the most units a tenant's pool may hold, and what it holds."""

from __future__ import annotations

from dataclasses import dataclass

from effectledger.errors import InvalidInput
from effectledger.ledger import Ledger, append_event, lock_scope
from effectledger.model.authority import CapacityUsage
from effectledger.model.operations import Row, validate_identifier
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = [
    "CAPACITY_ACTOR",
    "TotalsMismatch",
    "capacity_in",
    "capacity_trail",
    "check_limit",
    "rebuild_totals_in",
    "set_limit_in",
    "totals_mismatches_in",
]

CAPACITY_ACTOR = "capacity-admin"


def capacity_trail(pool: str) -> str:
    """The id under which a pool's limit changes are chained (never an operation's id)."""
    return f"pool:{pool}"


def check_limit(tenant_id: str, pool: str, units: int, actor: str, *, most: int) -> None:
    """Refuse a malformed limit change: ids, actor, and ``units`` from 0 to ``most``."""
    validate_identifier(tenant_id, "tenant_id")
    validate_identifier(pool, "pool")
    validate_identifier(actor, "actor")
    if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= most:
        raise InvalidInput(f"a capacity limit is an integer from 0 to {most}", field="units")


def set_limit_in(
    tx: Transaction,
    ledger: Ledger,
    tenant_id: str,
    pool: str,
    units: int,
    *,
    actor: str,
    now_us: int,
) -> None:
    """Set the pool's limit and record ``CapacityLimitSet`` on the pool's own trail."""
    lock_scope(tx, tenant_id, f"pool:{pool}")
    previous = tx.one("capacity_limit_get", {"tenant_id": tenant_id, "pool": pool})
    tx.run(
        "capacity_limit_set",
        {"tenant_id": tenant_id, "pool": pool, "limit_units": units, "now_us": now_us},
    )
    append_event(
        tx,
        ledger,
        tenant_id=tenant_id,
        operation_id=capacity_trail(pool),
        actor=actor,
        event_type=EventType.CAPACITY_LIMIT_SET,
        details={
            "pool": pool,
            "limit_units": units,
            "previous_units": None if previous is None else int(previous["limit_units"]),
        },
    )


@dataclass(frozen=True, slots=True)
class TotalsMismatch:
    """A pool whose running totals differ from its operations' units: ``(held, committed,
    freed)`` as stored in ``capacity_totals`` and as recounted from the operations."""

    tenant_id: str
    pool: str
    stored: tuple[int, int, int]
    recounted: tuple[int, int, int]


def _by_pool(rows: list[Row]) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {
        (str(row["tenant_id"]), str(row["pool"])): (
            int(row["held"]),
            int(row["committed"]),
            int(row["freed"]),
        )
        for row in rows
    }


def totals_mismatches_in(tx: Transaction) -> list[TotalsMismatch]:
    """Every pool of every tenant whose running totals differ from the sum over its operations
    (read in ``tx``, one snapshot: the totals move in the transactions that move the units)."""
    stored = _by_pool(tx.all("capacity_totals_all", {}))
    recounted = _by_pool(tx.all("capacity_recount", {}))
    zero = (0, 0, 0)
    return [
        TotalsMismatch(
            tenant, pool, stored.get((tenant, pool), zero), recounted.get((tenant, pool), zero)
        )
        for tenant, pool in sorted(stored.keys() | recounted.keys())
        if stored.get((tenant, pool), zero) != recounted.get((tenant, pool), zero)
    ]


def rebuild_totals_in(tx: Transaction) -> list[TotalsMismatch]:
    """Rebuild every pool's running totals from its operations in ``tx``, with every other
    writer held off; return the mismatches found just before (none: nothing is rewritten)."""
    tx.run("capacity_totals_lock", {})
    found = totals_mismatches_in(tx)
    if found:
        tx.run("capacity_totals_clear", {})
        tx.run("capacity_totals_rebuild", {})
    return found


def capacity_in(tx: Transaction, tenant_id: str, pool: str) -> CapacityUsage:
    """Held, committed and freed units of the tenant's pool, and its limit."""
    key = {"tenant_id": tenant_id, "pool": pool}
    usage = tx.one("capacity_usage", key)
    limit = tx.one("capacity_limit_get", key)
    return CapacityUsage(
        pool=pool,
        held=0 if usage is None else int(usage["held"]),
        committed=0 if usage is None else int(usage["committed"]),
        freed=0 if usage is None else int(usage["freed"]),
        limit=None if limit is None else int(limit["limit_units"]),
    )
