"""A tenant's figures for operators: operations by state, the uncertain ones and their age, and
how long events have waited to be sealed (what ``status --summary`` and ``/metrics`` show).

Three reads of the tenant's rows in one read transaction, no write. The counts by state read
the tenant's operations (an operator's read, not a hot path); the pending events are read
through their own index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from effectledger.clock import Clock
from effectledger.ledger.validation import checked_context
from effectledger.model import Context, OperationState
from effectledger.model.operations import Row, from_micros
from effectledger.store import Store
from effectledger.telemetry import Gauges, Reading, register_gauges

__all__ = ["LedgerSummary", "gauge_reading", "register_ledger_gauges", "summarize", "summarize_all"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerSummary:
    """One tenant's figures at ``at``.

    ``by_state``: operations per state (every state, zero included); ``uncertain``: those whose
    effect may or may not have happened; ``oldest_uncertain_age``: how long the longest-waiting
    of them has gone without a recorded change (``None`` when there is none); ``seal_pending`` /
    ``seal_lag``: audit events not yet sealed into the log and the oldest one's age.
    """

    tenant_id: str
    at: datetime
    by_state: dict[str, int]
    uncertain: int
    oldest_uncertain_age: timedelta | None
    seal_pending: int
    seal_lag: timedelta | None

    def prometheus(self) -> str:
        """The figures in the Prometheus text exposition format, labelled by tenant.

        The labels are the gauges' attribute names as an OpenTelemetry Prometheus exporter
        writes them (``effectledger.tenant_id`` -> ``effectledger_tenant_id``), so one alert rule
        reads either source.
        """
        tenant = self.tenant_id.replace("\\", "\\\\").replace('"', '\\"')
        by = f'effectledger_tenant_id="{tenant}"'
        lines = [
            "# HELP effectledger_operations Operations by state.",
            "# TYPE effectledger_operations gauge",
            *(
                f'effectledger_operations{{{by},effectledger_state="{state}"}} {count}'
                for state, count in self.by_state.items()
            ),
            "# HELP effectledger_uncertain_operations Operations whose effect may have happened.",
            "# TYPE effectledger_uncertain_operations gauge",
            f"effectledger_uncertain_operations{{{by}}} {self.uncertain}",
            "# HELP effectledger_uncertain_oldest_age_seconds Age of the oldest uncertain one.",
            "# TYPE effectledger_uncertain_oldest_age_seconds gauge",
            f"effectledger_uncertain_oldest_age_seconds{{{by}}} "
            f"{_seconds(self.oldest_uncertain_age)}",
            "# HELP effectledger_seal_pending_events Audit events not yet sealed.",
            "# TYPE effectledger_seal_pending_events gauge",
            f"effectledger_seal_pending_events{{{by}}} {self.seal_pending}",
            "# HELP effectledger_seal_lag_seconds Age of the oldest event not yet sealed.",
            "# TYPE effectledger_seal_lag_seconds gauge",
            f"effectledger_seal_lag_seconds{{{by}}} {_seconds(self.seal_lag)}",
        ]
        return "\n".join(lines) + "\n"


def _seconds(age: timedelta | None) -> str:
    return "0" if age is None else f"{age.total_seconds():.3f}"


def summarize(store: Store, context: Context, now: datetime) -> LedgerSummary:
    """The figures of the context's tenant (the caller checks the reader's role)."""
    checked_context(context)
    tenant = {"tenant_id": context.tenant_id}
    rows, uncertain, pending = store.read(
        lambda tx: (
            tx.all("operations_by_state", tenant),
            tx.one("operations_uncertain_oldest", tenant),
            tx.one("log_pending_oldest", tenant),
        )
    )
    return _summary(context.tenant_id, now, rows, uncertain, pending)


def _summary(
    tenant_id: str, now: datetime, rows: list[Row], uncertain: Row | None, pending: Row | None
) -> LedgerSummary:
    counted = {str(row["state"]): int(row["operations"]) for row in rows}
    by_state = {state.value: counted.get(state.value, 0) for state in OperationState}
    return LedgerSummary(
        tenant_id=tenant_id,
        at=now,
        by_state=by_state,
        uncertain=sum(n for state, n in by_state.items() if OperationState(state).uncertain),
        oldest_uncertain_age=_age(now, None if uncertain is None else uncertain["oldest_us"]),
        seal_pending=0 if pending is None else int(pending["pending"] or 0),
        seal_lag=_age(now, None if pending is None else pending["oldest_us"]),
    )


def summarize_all(store: Store, now: datetime) -> list[LedgerSummary]:
    """Every tenant's figures (a tenant with operations or events waiting to be sealed), from
    one read transaction of three grouped queries: what the gauges read on each collection."""
    rows, uncertain, pending = store.read(
        lambda tx: (
            tx.all("operations_by_tenant_state", {}),
            tx.all("operations_uncertain_oldest_by_tenant", {}),
            tx.all("log_pending_oldest_by_tenant", {}),
        )
    )
    by_tenant: dict[str, list[Row]] = {}
    for row in rows:
        by_tenant.setdefault(str(row["tenant_id"]), []).append(row)
    uncertain_of = {str(row["tenant_id"]): row for row in uncertain}
    pending_of = {str(row["tenant_id"]): row for row in pending}
    tenants = sorted(set(by_tenant) | set(pending_of))
    return [
        _summary(
            tenant, now, by_tenant.get(tenant, []), uncertain_of.get(tenant), pending_of.get(tenant)
        )
        for tenant in tenants
    ]


def gauge_reading(summaries: list[LedgerSummary]) -> Reading:
    """The gauges' values (:data:`effectledger.telemetry.GAUGES`) of the tenants' figures."""
    reading: dict[str, list[tuple[float, dict[str, Any]]]] = {name: [] for name in _GAUGE_NAMES}
    for summary in summaries:
        tenant = {"tenant_id": summary.tenant_id}
        for state, count in summary.by_state.items():
            reading["operations"].append((count, {**tenant, "state": state}))
        reading["uncertain_operations"].append((summary.uncertain, tenant))
        reading["uncertain_oldest_age"].append((_float(summary.oldest_uncertain_age), tenant))
        reading["seal_pending_events"].append((summary.seal_pending, tenant))
        reading["seal_lag"].append((_float(summary.seal_lag), tenant))
    return reading


_GAUGE_NAMES = (
    "operations",
    "uncertain_operations",
    "uncertain_oldest_age",
    "seal_pending_events",
    "seal_lag",
)


def _float(age: timedelta | None) -> float:
    return 0.0 if age is None else age.total_seconds()


def register_ledger_gauges(
    store: Store,
    clock: Clock,
    *,
    meter_provider: Any = None,
    refresh_s: float = 1.0,
    monotonic: Callable[[], float] | None = None,
) -> Gauges | None:
    """Register the ledger's observable gauges over every tenant of ``store`` (one read of it
    per collection); ``None`` without opentelemetry-api. ``close()`` the result when done."""

    def read() -> Reading:
        return gauge_reading(summarize_all(store, clock.now()))

    if monotonic is None:
        return register_gauges(read, meter_provider=meter_provider, refresh_s=refresh_s)
    return register_gauges(
        read, meter_provider=meter_provider, refresh_s=refresh_s, clock=monotonic
    )


def _age(now: datetime, micros: object) -> timedelta | None:
    if micros is None:
        return None
    return max(now - from_micros(int(str(micros))), timedelta(0))
