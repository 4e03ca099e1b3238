"""A tenant's figures for operators: operations by state, the uncertain ones and their age, and
how long events have waited to be sealed (what ``status --summary`` and ``/metrics`` show).

Three reads of the tenant's rows in one read transaction, no write. The counts by state read
the tenant's operations (an operator's read, not a hot path); the pending events are read
through their own index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from effectledger.ledger.validation import checked_context
from effectledger.model import Context, OperationState
from effectledger.model.operations import from_micros
from effectledger.store import Store

__all__ = ["LedgerSummary", "summarize"]


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
        """The figures in the Prometheus text exposition format, labelled by tenant."""
        tenant = self.tenant_id.replace("\\", "\\\\").replace('"', '\\"')
        lines = [
            "# HELP effectledger_operations Operations by state.",
            "# TYPE effectledger_operations gauge",
            *(
                f'effectledger_operations{{tenant="{tenant}",state="{state}"}} {count}'
                for state, count in self.by_state.items()
            ),
            "# HELP effectledger_uncertain_operations Operations whose effect may have happened.",
            "# TYPE effectledger_uncertain_operations gauge",
            f'effectledger_uncertain_operations{{tenant="{tenant}"}} {self.uncertain}',
            "# HELP effectledger_uncertain_oldest_age_seconds Age of the oldest uncertain one.",
            "# TYPE effectledger_uncertain_oldest_age_seconds gauge",
            f'effectledger_uncertain_oldest_age_seconds{{tenant="{tenant}"}} '
            f"{_seconds(self.oldest_uncertain_age)}",
            "# HELP effectledger_seal_pending_events Audit events not yet sealed.",
            "# TYPE effectledger_seal_pending_events gauge",
            f'effectledger_seal_pending_events{{tenant="{tenant}"}} {self.seal_pending}',
            "# HELP effectledger_seal_lag_seconds Age of the oldest event not yet sealed.",
            "# TYPE effectledger_seal_lag_seconds gauge",
            f'effectledger_seal_lag_seconds{{tenant="{tenant}"}} {_seconds(self.seal_lag)}',
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
    counted = {str(row["state"]): int(row["operations"]) for row in rows}
    by_state = {state.value: counted.get(state.value, 0) for state in OperationState}
    return LedgerSummary(
        tenant_id=context.tenant_id,
        at=now,
        by_state=by_state,
        uncertain=sum(n for state, n in by_state.items() if OperationState(state).uncertain),
        oldest_uncertain_age=_age(now, None if uncertain is None else uncertain["oldest_us"]),
        seal_pending=0 if pending is None else int(pending["pending"] or 0),
        seal_lag=_age(now, None if pending is None else pending["oldest_us"]),
    )


def _age(now: datetime, micros: object) -> timedelta | None:
    if micros is None:
        return None
    return max(now - from_micros(int(str(micros))), timedelta(0))
