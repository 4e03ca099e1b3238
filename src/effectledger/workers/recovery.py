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
from functools import partial

from effectledger import telemetry
from effectledger._failpoints import crash_point
from effectledger.destinations import Destination, ensure_matches
from effectledger.errors import DestinationMismatch, EffectLedgerError, StorageBusy, StorageError
from effectledger.ledger import RECOVERY_WORKER, Ledger, traces
from effectledger.model.operations import (
    Attempt,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    OperationState,
    Outcome,
    validate_limit,
)

__all__ = ["RecoveryReport", "RecoveryWorker"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RecoveryReport:
    """What one pass did, by ``(tenant, operation)``.

    ``failed`` holds ``(tenant, operation, code)``, or ``(account, endpoint, code)`` for a
    destination whose adapter could not be used at all (nothing was reserved for it).
    """

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
        self.destinations = {
            DestinationRef(account_id=d.account_id, endpoint=d.endpoint): d for d in found
        }
        self.actor = actor

    def run_once(
        self, *, limit: int = 100, progress: Callable[[int, int], None] | None = None
    ) -> RecoveryReport:
        """One pass over the attempts due now; ``progress(done, total)`` is called per lookup.

        Each adapter's identity is checked first (docs/design.md, invariant 8): an adapter that
        no longer reports the account and endpoint it was registered with reserves nothing and
        writes nothing. Then only attempts sent to this worker's destinations are reserved, in
        one transaction per destination that skips whatever another worker is reserving, so
        workers running this on many hosts never take the same attempt twice in one window.
        One operation that fails (a failed lookup, a storage error, a reply that cannot be
        recorded) is reported in ``failed`` and never ends the pass.
        """
        limit = validate_limit(limit)
        report = RecoveryReport()
        work: list[tuple[Destination, Attempt]] = []
        for bound, destination in self.destinations.items():
            left = limit - report.due
            if left <= 0:
                break
            try:
                ensure_matches(destination, bound)
            except DestinationMismatch:
                log.error(
                    "destination adapter %s/%s changed identity; nothing reserved for it",
                    bound.account_id,
                    bound.endpoint,
                )
                report.failed.append((bound.account_id, bound.endpoint, "destination_mismatch"))
                continue
            try:
                due = self.ledger.reserve_due(bound, limit=left, actor=self.actor)
            except EffectLedgerError as exc:
                # Nothing reserved is lost: an unreserved attempt is still due next pass.
                log.warning("reserving lookups for %s failed: %s", bound.endpoint, exc.code)
                report.failed.append((bound.account_id, bound.endpoint, exc.code))
                continue
            report.due += len(due.lookups) + len(due.escalated)
            report.escalated.extend(due.escalated)
            telemetry.count("escalations", len(due.escalated))
            work.extend((destination, attempt) for attempt in due.lookups)
        for done, (destination, attempt) in enumerate(work, start=1):
            self._recover_safely(report, destination, attempt)
            if progress is not None:
                progress(done, len(work))
        return report

    def recover_operation(self, operation: Operation) -> RecoveryReport:
        """Look up this one operation now if it is due, as :meth:`run_once` would; nothing else.

        For a caller that may see only this operation (``EffectLedger.reconcile``): no other
        operation is reserved, looked up or escalated.
        """
        report = RecoveryReport()
        attempt_id = operation.active_attempt_id
        if operation.state.value not in _RECOVERABLE or attempt_id is None:
            return report
        destination = self.destinations.get(operation.destination)
        if destination is None:
            report.failed.append(
                (operation.tenant_id, operation.operation_id, "destination_mismatch")
            )
            return report
        tenant_id, operation_id = operation.tenant_id, operation.operation_id
        try:
            ensure_matches(destination, operation.destination)
            if self.ledger.needs_review(tenant_id, operation_id):
                self.ledger.escalate(
                    tenant_id, operation_id, reason="inconclusive_lookups", actor=self.actor
                )
                report.due = 1
                report.escalated.append((tenant_id, operation_id))
                telemetry.count("escalations")
                return report
            attempt = self.ledger.reserve_lookup(
                tenant_id, operation_id, attempt_id, actor=self.actor
            )
        except EffectLedgerError as exc:
            report.failed.append((tenant_id, operation_id, exc.code))
            return report
        if attempt is not None:
            report.due = 1
            self._recover_safely(report, destination, attempt)
        return report

    def _recover_safely(
        self, report: RecoveryReport, destination: Destination, attempt: Attempt
    ) -> None:
        """:meth:`_recover`, with whatever goes wrong reported instead of ending the pass."""
        try:
            self._recover(report, destination, attempt)
        except EffectLedgerError as exc:
            code = exc.code
        except Exception as exc:  # one operation never ends the pass
            code = "unexpected_error"
            # Only the type: an exception's text may carry payload or secrets.
            log.error("recovery of %s/%s raised %s", *_key(attempt), type(exc).__name__)
        else:
            return
        log.warning("recovery of %s/%s failed: %s", *_key(attempt), code)
        report.failed.append((*_key(attempt), code))

    def _recover(self, report: RecoveryReport, destination: Destination, attempt: Attempt) -> None:
        tenant_id, operation_id = _key(attempt)
        ensure_matches(destination, attempt.destination)
        with telemetry.span(
            "lookup",
            linked=partial(traces.admitted, self.ledger.store, tenant_id, operation_id),
            tenant_id=tenant_id,
            operation_id=operation_id,
            attempt_id=attempt.attempt_id,
        ) as span:
            try:
                observation = destination.lookup(attempt.idempotency_key)
            except Exception as exc:
                # A failed lookup leaves the pushed recover_after: the next window tries again.
                log.warning(
                    "lookup failed for %s/%s: %s", tenant_id, operation_id, type(exc).__name__
                )
                report.failed.append((tenant_id, operation_id, "lookup_failed"))
                span.set(outcome="lookup_failed")
                telemetry.count("lookups", outcome="lookup_failed")
                return
            span.set(outcome=telemetry.outcome_of(observation))
        telemetry.count("lookups", outcome=telemetry.outcome_of(observation))
        report.looked_up += 1
        crash_point("after_lookup")
        try:
            result = self._record_answer(attempt, observation)
        except StorageError as exc:
            # Nothing was written (or a lost COMMIT could not be read back): the attempt keeps
            # the window this pass reserved and is looked up again when it is due.
            log.warning("answer for %s/%s not recorded: %s", tenant_id, operation_id, exc.code)
            report.still_unknown.append((tenant_id, operation_id))
            return
        if result.uncertain:
            report.still_unknown.append((tenant_id, operation_id))
            if self.ledger.needs_review(tenant_id, operation_id):
                self.ledger.escalate(
                    tenant_id, operation_id, reason="inconclusive_lookups", actor=self.actor
                )
                report.escalated.append((tenant_id, operation_id))
                telemetry.count("escalations")
        else:
            report.resolved.append((tenant_id, operation_id, result.state.value))

    def _record_answer(self, attempt: Attempt, observation: Observation) -> DispatchResult:
        """:meth:`record`, given one more full record budget if the store stayed busy.

        The answer is in hand and a busy store wrote nothing, so recording it again is safe;
        a disk stall longer than one budget should not cost a whole lookup window.
        """
        try:
            return self.record(attempt, observation)
        except StorageBusy:
            return self.record(attempt, observation)

    def record(self, attempt: Attempt, observation: Observation) -> DispatchResult:
        """Record a lookup's answer as a reconciliation (never a resubmission)."""
        if isinstance(observation, Observation) and (
            observation.outcome is Outcome.RETRYABLE_REJECTION
        ):
            # A lookup cannot say "try again": without proof of non-acceptance it is Unknown.
            observation = Observation.unknown(observation.evidence_reference)
        return self.ledger.record(attempt, observation, actor=self.actor, reconciled=True)


_RECOVERABLE = frozenset({OperationState.IN_PROGRESS.value, OperationState.OUTCOME_UNKNOWN.value})


def _key(attempt: Attempt) -> tuple[str, str]:
    return attempt.tenant_id, attempt.operation_id
