"""The recovery worker: find due attempts, reserve a lookup, ask the destination, record.

It never submits. An attempt is due when its operation is IN_PROGRESS or OUTCOME_UNKNOWN and its
``recover_after`` has passed (a crash may have happened on either side of the submission).
Reserving the lookup is one transaction that pushes ``recover_after`` forward, so competing
workers look up once per window and a failed lookup is not retried at once. After too many
inconclusive lookups the operation goes to MANUAL_REVIEW with an owner and a deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from effectledger._failpoints import crash_point
from effectledger.destinations import Destination, ensure_matches
from effectledger.errors import DestinationMismatch, EffectLedgerError
from effectledger.ledger import RECOVERY_WORKER, Ledger
from effectledger.model import Attempt, DispatchResult, Observation, Outcome

__all__ = ["RecoveryReport", "RecoveryWorker"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RecoveryReport:
    """What one pass did, by ``(tenant, operation)``."""

    due: int = 0
    looked_up: int = 0
    resolved: list[tuple[str, str, str]] = field(default_factory=list)
    still_unknown: list[tuple[str, str]] = field(default_factory=list)
    escalated: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)


class RecoveryWorker:
    """Reconciles uncertain operations against the destinations they were sent to."""

    def __init__(
        self,
        ledger: Ledger,
        destinations: Destination | Iterable[Destination],
        *,
        actor: str = RECOVERY_WORKER,
    ) -> None:
        self.ledger = ledger
        found = [destinations] if isinstance(destinations, Destination) else list(destinations)
        self.destinations = {(d.account_id, d.endpoint): d for d in found}
        self.actor = actor

    def run_once(
        self, *, limit: int = 100, progress: Callable[[int, int], None] | None = None
    ) -> RecoveryReport:
        """One pass over the attempts due now; ``progress(done, total)`` is called per lookup.

        The lookups are reserved first, in one transaction that skips whatever another worker
        is reserving, so workers running this on many hosts never take the same attempt twice
        in one window; an attempt another worker holds is simply not part of this pass.
        """
        report = RecoveryReport()
        work = self.ledger.reserve_due(limit=limit, actor=self.actor)
        report.due = len(work.lookups) + len(work.escalated)
        report.escalated.extend(work.escalated)
        for done, attempt in enumerate(work.lookups, start=1):
            try:
                self._recover(report, attempt)
            except EffectLedgerError as exc:
                log.warning(
                    "recovery of %s/%s failed: %s",
                    attempt.tenant_id,
                    attempt.operation_id,
                    exc.code,
                )
                report.failed.append((attempt.tenant_id, attempt.operation_id, exc.code))
            if progress is not None:
                progress(done, len(work.lookups))
        return report

    def _recover(self, report: RecoveryReport, attempt: Attempt) -> None:
        tenant_id, operation_id = attempt.tenant_id, attempt.operation_id
        destination = self.destinations.get(
            (attempt.destination.account_id, attempt.destination.endpoint)
        )
        if destination is None:
            raise DestinationMismatch(
                "no destination adapter is bound to the attempt's account and endpoint",
                operation_id=operation_id,
            )
        ensure_matches(destination, attempt.destination)
        try:
            observation = destination.lookup(attempt.idempotency_key)
        except Exception as exc:
            # A failed lookup leaves the pushed recover_after: the next window tries again.
            log.warning("lookup failed for %s/%s: %s", tenant_id, operation_id, type(exc).__name__)
            report.failed.append((tenant_id, operation_id, "lookup_failed"))
            return
        report.looked_up += 1
        crash_point("after_lookup")
        result = self.record(attempt, observation)
        if result.uncertain:
            report.still_unknown.append((tenant_id, operation_id))
            if self.ledger.needs_review(tenant_id, operation_id):
                self.ledger.escalate(
                    tenant_id, operation_id, reason="inconclusive_lookups", actor=self.actor
                )
                report.escalated.append((tenant_id, operation_id))
        else:
            report.resolved.append((tenant_id, operation_id, result.state.value))

    def record(self, attempt: Attempt, observation: Observation) -> DispatchResult:
        """Record a lookup's answer as a reconciliation (never a resubmission)."""
        if observation.outcome is Outcome.RETRYABLE_REJECTION:
            # A lookup cannot say "try again": without proof of non-acceptance it is Unknown.
            observation = Observation.unknown(observation.evidence_reference)
        return self.ledger.record(attempt, observation, actor=self.actor, reconciled=True)
