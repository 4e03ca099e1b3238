"""The controlled executor: claim, check the destination, submit outside any transaction, record.

A repeated call for an operation that is not READY makes no attempt: it returns the recorded
state, including a success the caller never heard about. Anything that goes wrong after the
claim and before a definite answer (an exception, a timeout, a cancellation) is recorded as
``Unknown``, never as a rejection, because the destination may have acted.

A claim whose COMMIT was sent but never acknowledged (:class:`CommitUncertain`) is checked by
its attempt id on a fresh connection: the effect is submitted only if the claim is proven
stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from effectledger import telemetry
from effectledger._failpoints import crash_point
from effectledger.destinations import Destination, ensure_matches
from effectledger.errors import CommitUncertain, EffectLedgerError, InvalidInput, StorageError
from effectledger.ledger import DISPATCH_WORKER, Ledger, new_id, traces
from effectledger.model.operations import (
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    OperationState,
    Outcome,
    PreparedAttempt,
    validate_identifier,
    validate_limit,
)

__all__ = [
    "PERFORMED",
    "RELEASED",
    "REPLAYED",
    "BatchGuard",
    "DispatchGuard",
    "ExecutionStep",
    "Executor",
]

log = logging.getLogger(__name__)


DispatchGuard = Callable[[Context, Operation], "str | None"]
"""A dispatch-time recheck: returns a reason code to release the operation, or ``None``.

It is called with the dispatching worker's trusted identity (``Context(tenant_id=<the
operation's tenant>, actor_id=<executor_id>)``, no roles) and the operation as stored, whoever
asked for the dispatch: permission was decided at admission and travels with the operation (its
consumed approval or recorded policy tier), so the recheck never stands in for the requester.
"""

BatchGuard = Callable[[Sequence[tuple[Context, Operation]]], "list[str | None]"]
"""The dispatch-time recheck of a batch: for each ``(worker, operation)``, in order, the reason
the :data:`DispatchGuard` of the same executor would give, or ``None`` (it may read what it
needs for all of them at once)."""

PERFORMED = "performed"
_REFUSED = (OperationState.REJECTED, OperationState.RETRY_PENDING)
_REJECTIONS = (Outcome.PERMANENT_REJECTION, Outcome.RETRYABLE_REJECTION)
RELEASED = "released"
REPLAYED = "replayed"


@dataclass(frozen=True, slots=True)
class ExecutionStep:
    """What one :meth:`Executor.execute_step` call did, and the state it leaves recorded.

    ``taken`` is ``performed`` (this call's claim was submitted), ``released`` (this call
    released the operation at its dispatch-time recheck) or ``replayed`` (this call changed
    nothing; ``result`` is the recorded state).
    """

    result: DispatchResult
    taken: str


def explained(result: DispatchResult, observation: Observation) -> DispatchResult:
    """``result`` with the destination's reason when it refused: the caller is told why nothing
    was accepted, not only that it was not."""
    if result.state in _REFUSED and observation.outcome in _REJECTIONS:
        return replace(result, rejection=observation.reason or observation.outcome.value)
    return result


class Executor:
    """Performs admitted operations through one destination adapter.

    ``guard`` is the dispatch-time recheck (expiry, resource version, permission; see
    :meth:`effectledger.authority.Authority.dispatch_guard`): an operation it objects to is
    RELEASED and the destination is never contacted. ``batch_guard``, when given, is the same
    recheck of a whole batch (:func:`effectledger.authority.rechecks.dispatch_rechecks`), used
    by ``run_ready`` with ``claim_batch`` above 1.
    """

    def __init__(
        self,
        ledger: Ledger,
        destination: Destination,
        *,
        executor_id: str = DISPATCH_WORKER,
        guard: DispatchGuard | None = None,
        batch_guard: BatchGuard | None = None,
    ) -> None:
        self.ledger = ledger
        self.destination = destination
        self.executor_id = executor_id
        self.guard = guard
        self.batch_guard = batch_guard
        self._bound: DestinationRef | None = None

    def execute(self, context: Context, operation_id: str) -> DispatchResult:
        """Perform the operation once, or report what was already recorded for it."""
        return self.execute_step(context, operation_id).result

    def execute_step(self, context: Context, operation_id: str) -> ExecutionStep:
        """:meth:`execute`, also saying what this call did: performed, released or nothing.

        ``taken`` is ``performed`` only when this call's own claim was submitted, ``released``
        only when this call released the operation, and ``replayed`` otherwise (another call
        claimed it, or it was not READY): the result then reports the recorded state.
        """
        if not isinstance(context, Context):
            raise InvalidInput("context must be a Context from the trusted host", field="context")
        validate_identifier(operation_id, "operation_id")
        if self.guard is not None:
            return self._execute_rechecked(context, operation_id, self.guard)
        claimed: PreparedAttempt | DispatchResult | None
        try:
            # One read decides: a repeated call costs that read alone, and a READY operation is
            # claimed on the row it returned.
            claimed = self.ledger.claim_or_status(
                context, operation_id, executor_id=self.executor_id, bound_to=self._binding()
            )
        except CommitUncertain as uncertain:
            attempt_id = uncertain.details.get("attempt_id")
            if not isinstance(attempt_id, str):  # pragma: no cover - the ledger names it
                raise
            claimed = self._confirm(uncertain, context.tenant_id, operation_id, attempt_id)
        if isinstance(claimed, DispatchResult):
            return ExecutionStep(result=claimed, taken=REPLAYED)
        return self._performed(context, operation_id, claimed)

    def _execute_rechecked(
        self, context: Context, operation_id: str, guard: DispatchGuard
    ) -> ExecutionStep:
        """:meth:`execute` with the dispatch-time recheck between the status read and the claim."""
        status = self.ledger.status(context, operation_id)
        if status.state is not OperationState.READY:
            return ExecutionStep(result=status, taken=REPLAYED)
        operation = self.ledger.get(context, operation_id)
        reason = guard(self._worker(operation.tenant_id), operation)
        if reason is not None:
            released, mine = self.ledger.release(
                context, operation_id, reason=reason, expected_version=operation.version
            )
            return ExecutionStep(result=released, taken=RELEASED if mine else REPLAYED)
        attempt_id = new_id()
        try:
            prepared = self.ledger.claim(
                context,
                operation_id,
                attempt_id=attempt_id,
                executor_id=self.executor_id,
                bound_to=self._binding(),
                expected_version=operation.version,
            )
        except CommitUncertain as uncertain:
            prepared = self._confirm(uncertain, context.tenant_id, operation_id, attempt_id)
        return self._performed(context, operation_id, prepared)

    def _performed(
        self, context: Context, operation_id: str, prepared: PreparedAttempt | None
    ) -> ExecutionStep:
        if prepared is None:  # another worker claimed it first, or the claim did not commit
            return ExecutionStep(result=self.ledger.status(context, operation_id), taken=REPLAYED)
        return ExecutionStep(result=self._perform(prepared), taken=PERFORMED)

    def execute_claimed(self, prepared: PreparedAttempt) -> DispatchResult:
        """Submit a claim committed elsewhere (an admission that claimed at once) and record it.

        Only the caller whose transaction committed ``prepared`` may pass it here, once.
        """
        return self._perform(prepared)

    def _worker(self, tenant_id: str) -> Context:
        """This executor's own trusted identity within ``tenant_id`` (for the recheck)."""
        return Context(tenant_id=tenant_id, actor_id=self.executor_id)

    def _binding(self) -> DestinationRef:
        """The account and endpoint this executor's destination adapter is bound to.

        Checked (as a :class:`DestinationRef`) once, and again only if the adapter's account or
        endpoint changes: a repeated call compares two strings instead of checking them again.
        """
        destination = self.destination
        account_id, endpoint = destination.account_id, destination.endpoint
        bound = self._bound
        if bound is None or bound.account_id != account_id or bound.endpoint != endpoint:
            bound = self._bound = DestinationRef(account_id=account_id, endpoint=endpoint)
        return bound

    def run_ready(self, *, limit: int = 100, claim_batch: int = 1) -> list[DispatchResult]:
        """Perform up to ``limit`` READY operations bound to this executor's destination, once each.

        Operations are claimed one per transaction with :meth:`Ledger.claim_next`, which skips
        those another executor is claiming: any number of executors on any number of hosts can
        run this loop against one database. Returns what was recorded for each operation taken
        (performed or released by this call; one a racing executor took is left out). With a
        dispatch ``guard`` each operation is rechecked before its claim instead.

        ``claim_batch`` above 1 claims up to that many operations in one transaction, sends them
        together within the adapter's limit and records their replies in one transaction
        (:func:`effectledger.workers.batches.run_batches`); 1 is the path described above.
        """
        limit = validate_limit(limit)
        if validate_limit(claim_batch, "claim_batch") > 1:
            from effectledger.workers.batches import run_batches

            return run_batches(self, limit=limit, claim_batch=claim_batch)
        bound = self._binding()
        results: list[DispatchResult] = []
        if self.guard is not None:
            # The dispatch-time recheck must run before a claim, so each operation goes through
            # execute(); a racing executor's claim wins cleanly. The stored requester only
            # scopes the ledger's reads and writes to the operation: the recheck itself runs
            # under this executor's identity on what admission stored (see DispatchGuard).
            for tenant_id, operation_id, requester_id in self.ledger.ready_operations(
                bound, limit=limit
            ):
                scope = Context(tenant_id=tenant_id, actor_id=requester_id)
                try:
                    step = self.execute_step(scope, operation_id)
                    if step.taken != REPLAYED:  # another executor took it: not ours to report
                        results.append(step.result)
                except CommitUncertain:
                    # Not even a read-back could settle the claim: nothing was sent, and the
                    # operation is READY for the next pass or IN_PROGRESS for recovery.
                    log.warning("claim of %s/%s left unsettled", tenant_id, operation_id)
            return results
        for _ in range(limit):
            attempt_id = new_id()
            try:
                prepared = self.ledger.claim_next(
                    bound, attempt_id=attempt_id, executor_id=self.executor_id
                )
            except CommitUncertain as uncertain:
                uncertain_tenant = uncertain.details.get("tenant_id")
                uncertain_operation = uncertain.details.get("operation_id")
                if not (isinstance(uncertain_tenant, str) and isinstance(uncertain_operation, str)):
                    raise
                try:
                    prepared = self._confirm(
                        uncertain, uncertain_tenant, uncertain_operation, attempt_id
                    )
                except CommitUncertain:
                    log.warning(
                        "claim of %s/%s left unsettled", uncertain_tenant, uncertain_operation
                    )
                    continue  # nothing was sent; READY next pass, or IN_PROGRESS for recovery
                if prepared is None:  # proven not claimed: it is still READY for the next pass
                    continue
            if prepared is None:
                break
            results.append(self._perform(prepared))
        return results

    def _confirm(
        self, uncertain: CommitUncertain, tenant_id: str, operation_id: str, attempt_id: str
    ) -> PreparedAttempt | None:
        """The claim whose COMMIT went unacknowledged, if a fresh connection proves it stored.

        ``None`` when it is proven absent. When even that cannot be found out, the original
        :class:`CommitUncertain` is raised: nothing is submitted on a guess.
        """
        log.warning("claim of %s/%s: COMMIT unacknowledged, checking", tenant_id, operation_id)
        try:
            return self.ledger.committed_claim(tenant_id, operation_id, attempt_id)
        except StorageError as exc:
            raise uncertain from exc

    def _perform(self, prepared: PreparedAttempt) -> DispatchResult:
        """Submit one committed claim outside any transaction and record what came back.

        Once the submission has been made the effect may have happened, so nothing after it is
        reported as a failure: if the result cannot be recorded (the store is busy past the
        record budget, unreachable, or its COMMIT could not be settled), the caller gets the
        claimed state, IN_PROGRESS, which reads as uncertain, and recovery looks the attempt up
        once its ``recover_after`` is due.
        """
        ensure_matches(self.destination, prepared.destination)
        return self._recorded(prepared, self._send(prepared))

    def _send(self, prepared: PreparedAttempt) -> Observation:
        """Submit one committed claim whose destination the caller checked against the adapter
        (:func:`~effectledger.destinations.ensure_matches`); the answer, Unknown if it raised."""
        if telemetry.quiet():  # no provider is set: no span to open, no counter to add
            return self._submit(prepared)
        operation_id = prepared.operation_id
        with telemetry.span(
            "submit",
            linked=partial(traces.admitted, self.ledger.store, prepared.tenant_id, operation_id),
            tenant_id=prepared.tenant_id,
            operation_id=operation_id,
            attempt_id=prepared.attempt_id,
            action=prepared.command.action,
            proposal_id=prepared.command.proposal_id,
        ) as span:
            observation = self._submit(prepared)
            span.set(outcome=telemetry.outcome_of(observation))
        telemetry.count("submissions", outcome=telemetry.outcome_of(observation))
        return observation

    def _recorded(self, prepared: PreparedAttempt, observation: Observation) -> DispatchResult:
        """Record what the destination answered, once its reply is in hand."""
        crash_point("after_reply")
        return explained(self._record(prepared, observation), observation)

    def _submit(self, prepared: PreparedAttempt) -> Observation:
        """The destination's answer to one submission; Unknown if it raised."""
        operation_id = prepared.operation_id
        try:
            return self.destination.submit(prepared.command, prepared.idempotency_key)
        except Exception as exc:
            # The destination may have acted: Unknown, never a rejection. The exception is no
            # evidence (evidence references something stored), and its text may carry secrets
            # or payload: only its type is logged.
            log.warning("submission outcome unknown for %s: %s", operation_id, type(exc).__name__)
            return Observation.unknown()
        except BaseException:
            # Interrupted mid-submission: record the uncertainty before letting go.
            self._record(prepared, Observation.unknown())
            raise

    def _record(self, prepared: PreparedAttempt, observation: Observation) -> DispatchResult:
        try:
            return self.ledger.record(prepared, observation, actor=self.executor_id)
        except EffectLedgerError as exc:
            log.warning(
                "result of %s/%s not recorded (%s); it stays uncertain for recovery",
                prepared.tenant_id,
                prepared.operation_id,
                exc.code,
            )
            return DispatchResult(
                operation_id=prepared.operation_id,
                state=OperationState.IN_PROGRESS,
                attempt_id=prepared.attempt_id,
            )

    async def execute_async(self, context: Context, operation_id: str) -> DispatchResult:
        """:meth:`execute` in a worker thread; the result is recorded even if the caller cancels.

        Cancelling the awaiting task does not cancel the dispatch: the thread goes on, records
        the outcome in the ledger, and the caller can read it with ``status`` later.
        """
        task = asyncio.ensure_future(asyncio.to_thread(self.execute, context, operation_id))
        return await asyncio.shield(task)
