"""The :class:`Ledger`: the public face of the ledger package, one method per step.

Each public method that writes is one database transaction (docs/design.md, "Transactions"):
it hands one plain function of the package's modules, over a transaction, to the store's
``write``. A transition always goes through
:func:`~effectledger.ledger.trail.write_transition`, which updates the operation under its
version (a stale writer changes nothing) and appends exactly one hash-linked audit event; if
either write fails the transaction rolls back and the operation is as it was.
"""

from __future__ import annotations

import functools
from functools import partial

import effectledger.ledger.admission as admission
import effectledger.ledger.claims as claims
import effectledger.ledger.corrections as corrections
import effectledger.ledger.reads as reads
import effectledger.ledger.reconciliation as reconciliation
import effectledger.ledger.recording as outcomes
import effectledger.ledger.review as review
import effectledger.ledger.traces as traces
from effectledger import telemetry
from effectledger._failpoints import crash_point
from effectledger.clock import Clock, SystemClock
from effectledger.errors import CommitUncertain
from effectledger.ledger.settings import (
    DISPATCH_WORKER,
    RECOVERY_WORKER,
    DueWork,
    LedgerSettings,
)
from effectledger.model.operations import (
    Attempt,
    AuditEvent,
    Command,
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    PreparedAttempt,
    validate_identifier,
)
from effectledger.store import Store

__all__ = ["Ledger"]


class Ledger:
    """The durable record of every admitted operation, its attempts and its audit trail.

    Reads and writes are scoped by the trusted :class:`~effectledger.model.Context`: another
    tenant's operation is reported as not found. Methods without a context (``record``,
    ``reserve_lookup``, ``escalate``) are for the trusted workers that hold a claim.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        settings: LedgerSettings | None = None,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or LedgerSettings()

    # -- admission -----------------------------------------------------------------------

    def admit(
        self,
        context: Context,
        *,
        operation_id: str,
        revision: str,
        command: Command,
        destination: DestinationRef,
        admission_reference: str,
    ) -> Operation:
        """Admit ``operation_id`` for exactly this command, once.

        This is admission on a decision made outside effectledger, named by
        ``admission_reference``; :meth:`effectledger.authority.Authority.admit` admits on a
        proposal and a consumed approval instead. A repeat by the same requester with the same
        revision, command and destination returns the stored operation unchanged; any other
        repeat raises :class:`AdmissionConflict` and writes nothing. The destination and its
        idempotency key are fixed here for good. A lost COMMIT acknowledgement is settled here
        by that replay, never left to the caller.
        """
        draft = admission.draft_operation(
            context,
            operation_id=operation_id,
            revision=revision,
            command=command,
            destination=destination,
            admission_reference=admission_reference,
        )
        body = functools.partial(admission.admit_in, ledger=self, draft=draft)
        try:
            operation = self.store.write(body, label="admit")
        except CommitUncertain:
            # An admission is its own exact replay: run again, it returns the operation the
            # lost COMMIT stored (the insert waits for that transaction to end first), or
            # admits it now if it was not stored.
            operation = self.store.write(body, label="admit")
        crash_point("after_admit")
        return operation

    # -- reads ---------------------------------------------------------------------------

    def get(self, context: Context, operation_id: str) -> Operation:
        """The operation as stored, if it belongs to the context's tenant."""
        return reads.get(self.store, context, operation_id)

    def status(self, context: Context, operation_id: str) -> DispatchResult:
        """The recorded state of an operation the context's actor requested.

        A foreign tenant or another requester is told ``not_found``, never the state.
        """
        return reads.status(self.store, context, operation_id)

    def list_operations(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """The tenant's most recent operations, newest first (``limit``: 1 to 10,000)."""
        return reads.list_operations(self.store, context, limit=limit)

    def attempts(self, context: Context, operation_id: str) -> list[Attempt]:
        """Every attempt of one of the tenant's operations, oldest first."""
        return reads.attempts(self.store, context, operation_id)

    def events(self, context: Context, operation_id: str) -> list[AuditEvent]:
        """The audit trail under an operation id in sequence order (proposal events included).

        Raises ``NotFound`` when the tenant has no events under that id.
        """
        return reads.events(self.store, context, operation_id)

    def ready_operations(
        self, destination: DestinationRef, *, limit: int = 100
    ) -> list[tuple[str, str, str]]:
        """``(tenant, operation, requester)`` of READY operations bound to ``destination``."""
        return reads.ready_operations(self.store, destination, limit=limit)

    # -- claims --------------------------------------------------------------------------

    def claim(
        self,
        context: Context,
        operation_id: str,
        *,
        attempt_id: str,
        executor_id: str = DISPATCH_WORKER,
        bound_to: DestinationRef | None = None,
        expected_version: int | None = None,
    ) -> PreparedAttempt | None:
        """Claim a READY operation for one attempt, or return ``None`` if it is not READY.

        One transaction: the stored command is checked against its fingerprint and admission,
        the operation moves to IN_PROGRESS under its version, the attempt row and the
        ``AttemptPrepared`` event are written. Only a returned claim may be submitted.
        ``bound_to`` is the executor's destination: if it is not exactly the operation's, the
        claim is refused with :class:`DestinationMismatch` and nothing is written.
        ``expected_version``, when given, is the version a dispatch-time check approved: if the
        operation moved on since, nothing is claimed.
        """
        validate_identifier(operation_id, "operation_id")
        validate_identifier(attempt_id, "attempt_id")
        prepared = self.store.write(
            lambda tx: claims.claim_locked(
                tx, self, context, operation_id, attempt_id=attempt_id, executor_id=executor_id,
                bound_to=bound_to, expected_version=expected_version,
            ),
            label="claim",
        )  # fmt: skip
        if prepared is not None:
            crash_point("after_claim")
        return prepared

    def claim_or_status(
        self,
        context: Context,
        operation_id: str,
        *,
        executor_id: str = DISPATCH_WORKER,
        bound_to: DestinationRef | None = None,
    ) -> PreparedAttempt | DispatchResult:
        """Claim the operation if it is READY, or return its recorded state: an executor's step.

        The operation is read once, outside any transaction: a foreign tenant or another
        requester is told ``not_found`` as :meth:`status` tells them, and an operation that is
        not READY (a repeated call) costs that one read and writes nothing. A READY operation is
        claimed under a fresh attempt id on the row just read, with the checks and writes of
        :meth:`claim`; its update is guarded by the version read, so if the operation changed in
        between (another executor claimed it), this claim rolls back and the state recorded by
        then is returned. A :class:`CommitUncertain` names the attempt id, so the caller can
        check the claim with :meth:`committed_claim`.
        """
        prepared = claims.claim_or_status(
            self,
            context,
            operation_id,
            executor_id=executor_id,
            bound_to=bound_to,
        )
        if prepared is None:  # another executor's claim came first
            return self.status(context, operation_id)
        if isinstance(prepared, PreparedAttempt):
            crash_point("after_claim")
        return prepared

    def claim_next(
        self,
        destination: DestinationRef,
        *,
        attempt_id: str,
        executor_id: str = DISPATCH_WORKER,
    ) -> PreparedAttempt | None:
        """Claim the oldest READY operation bound to ``destination``, or return ``None``.

        For trusted executor pools: the same claim as :meth:`claim`, on an operation picked in
        the same transaction among those no other executor is claiming (``FOR UPDATE SKIP
        LOCKED`` on PostgreSQL), so any number of pools share the queue and each operation is
        claimed once. An operation that fails its integrity check is left READY and logged,
        never claimed. If the COMMIT's acknowledgement is lost, the :class:`CommitUncertain`
        raised names the operation, so the caller can check the claim with
        :meth:`committed_claim`.
        """
        validate_identifier(attempt_id, "attempt_id")
        prepared = claims.claim_next(
            self,
            destination,
            attempt_id=attempt_id,
            executor_id=executor_id,
        )
        if prepared is not None:
            crash_point("after_claim")
        return prepared

    def release(
        self, context: Context, operation_id: str, *, reason: str, expected_version: int
    ) -> tuple[DispatchResult, bool]:
        """Release a READY operation that failed its dispatch-time recheck.

        One transaction: READY at ``expected_version`` → RELEASED with ``OperationReleased``; its
        capacity units are freed and the destination is never contacted. Returns the recorded
        state and whether this call released it: if the operation moved on meanwhile, nothing
        changes and its current state is returned with ``False``.
        """
        return self.store.write(
            lambda tx: claims.release_in(
                tx, self, context, operation_id, reason=reason, expected_version=expected_version
            ),
            label="release",
        )

    def committed_claim(
        self, tenant_id: str, operation_id: str, attempt_id: str
    ) -> PreparedAttempt | None:
        """The claim made under ``attempt_id`` if it is stored and still awaits its submission.

        For a claim whose COMMIT was not acknowledged: first waits until no transaction that
        changed the operation is still open (the lost COMMIT has then either landed or not),
        then reads. ``None`` proves the claim is not there to act on; submit nothing then.
        """
        return self.store.write(
            lambda tx: claims.committed_claim_in(tx, tenant_id, operation_id, attempt_id),
            label="committed_claim",
        )

    # -- outcomes ------------------------------------------------------------------------

    def record(
        self,
        prepared: PreparedAttempt | Attempt,
        observation: Observation,
        *,
        actor: str = DISPATCH_WORKER,
        reconciled: bool = False,
    ) -> DispatchResult:
        """Record what the destination said about one attempt, with its event, in one transaction.

        Only the active attempt of an unresolved operation changes the state; any other
        observation is kept as ``Late<Outcome>Observation`` and changes nothing. A concurrent
        change is not overwritten: the step is re-read and re-decided (at most three times).
        A reply the ledger cannot store as it stands (an Accepted without both references, a
        reference that is not 1-512 printable characters, not an :class:`Observation` at all)
        is recorded as Unknown with the reason in its event's details: the effect may have
        happened, so it is neither an input error nor a failure, and recovery looks it up.
        If the COMMIT's acknowledgement is lost, the event it carried is looked for once the
        operation settles: found, the result stands; absent, the record is made again.
        The whole record, waits for locks and re-reads included, runs within
        ``settings.record_budget``: past it :class:`~effectledger.errors.StorageBusy` is raised,
        nothing is written, and the attempt stays unresolved, so recovery looks it up once its
        ``recover_after`` is due.
        """
        return outcomes.record(
            self,
            prepared,
            observation,
            actor=actor,
            reconciled=reconciled,
        )

    # -- reconciliation ------------------------------------------------------------------

    def reserve_lookup(
        self, tenant_id: str, operation_id: str, attempt_id: str, *, actor: str = RECOVERY_WORKER
    ) -> Attempt | None:
        """Reserve one lookup of a due attempt, or return ``None`` if another worker has it.

        One transaction: the operation must still be unresolved with this attempt active and
        due; ``recover_after`` moves to now + ``lookup_interval`` and ``ReconciliationStarted``
        is written. Only a returned attempt may be looked up.
        """
        return reconciliation.reserve_lookup(self, tenant_id, operation_id, attempt_id, actor=actor)

    def reserve_due(
        self, destination: DestinationRef, *, limit: int = 100, actor: str = RECOVERY_WORKER
    ) -> DueWork:
        """Reserve the lookups of up to ``limit`` due attempts bound to ``destination``.

        One transaction. Only attempts sent to ``destination`` (exactly its account and
        endpoint) are taken: a worker reserves only what its adapter can look up, and leaves
        the windows of every other destination's attempts alone. Attempts another worker is
        reserving are skipped, not waited for (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so
        any number of workers on any number of hosts split the due work and each attempt is
        looked up once per ``lookup_interval``. Each reservation is the one of
        :meth:`reserve_lookup`; an operation whose inconclusive lookups are used up is
        escalated to MANUAL_REVIEW instead, as :meth:`escalate` does. If the COMMIT's
        acknowledgement is lost, the reservations are read back once the operations settle and
        only those found stored are returned; the others are still due for the next pass.
        """
        return reconciliation.reserve_due(self, destination, limit=limit, actor=actor)

    def needs_review(self, tenant_id: str, operation_id: str) -> bool:
        """Whether inconclusive lookups have used up the budget for this operation."""
        return reconciliation.needs_review(self, tenant_id, operation_id)

    def escalate(
        self,
        tenant_id: str,
        operation_id: str,
        *,
        reason: str,
        owner: str | None = None,
        actor: str = RECOVERY_WORKER,
    ) -> DispatchResult:
        """Move an unresolved operation to MANUAL_REVIEW with an owner and a deadline."""
        with telemetry.span(
            "escalate",
            linked=partial(traces.admitted, self.store, tenant_id, operation_id),
            tenant_id=tenant_id,
            operation_id=operation_id,
            reason=reason,
        ) as span:
            result = reconciliation.escalate(
                self, tenant_id, operation_id, reason=reason, owner=owner, actor=actor
            )
            span.set(state=result.state.value)
        return result

    def authorize_retry(
        self, context: Context, operation_id: str, *, max_retries: int
    ) -> DispatchResult:
        """Move a RETRY_PENDING operation back to READY, within a budget of ``max_retries``.

        This is the explicit retry policy's step: the model-facing tool never calls it. The same
        operation, command, destination and idempotency key are kept. An operation that used
        its retries is refused with ``invalid_transition`` (``reason="retry_budget_exhausted"``).
        """
        return reconciliation.authorize_retry(self, context, operation_id, max_retries=max_retries)

    def resolve(
        self, context: Context, operation_id: str, observation: Observation
    ) -> DispatchResult:
        """Settle a MANUAL_REVIEW with what the destination's own records show (its owner)."""
        with telemetry.span(
            "resolve",
            linked=partial(traces.admitted, self.store, context.tenant_id, operation_id),
            tenant_id=context.tenant_id,
            operation_id=operation_id,
        ) as span:
            result = review.resolve(self, context, operation_id, observation)
            span.set(state=result.state.value)
        return result

    # -- corrections ---------------------------------------------------------------------

    def correct_event(
        self, context: Context, operation_id: str, *, event_id: str, reason: str
    ) -> AuditEvent:
        """Append an ``AuditCorrection`` event correcting ``event_id``; nothing is rewritten.

        The audit trail is append-only, so a correction is a new event of the same operation
        with details ``{"corrects": event_id, "reason": reason}``; the operation's state does not
        change. Only a context with the :data:`AUDITOR_ROLE` role may correct
        (:class:`NotPermitted` otherwise), and only an event of the same tenant and operation.
        """
        return corrections.correct_event(
            self, context, operation_id, event_id=event_id, reason=reason
        )
