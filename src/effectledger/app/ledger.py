"""The one object an application holds: :class:`EffectLedger` (``effectledger.connect`` opens one).

Every verb of an effect's life is one method here, scoped by the trusted
:class:`~effectledger.model.Context` and composed over the :class:`~effectledger.authority.
Authority` and the :class:`~effectledger.ledger.Ledger`, which hold every rule. Every caller
(function tools, frameworks, MCP, HTTP, the command line) calls these methods and nothing
beneath them, so each applies the same rules; the tenant's wider views need a reviewer's role
(:mod:`effectledger.app.access`). Records pass from call to call, and every call also takes the
plain ids. The lower layer stays reachable as ``.store``, ``.ledger``, ``.authority`` and
``.registry``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from effectledger import telemetry
from effectledger.actions.registry import ActionRegistry
from effectledger.app import passes, performing, proposing, reviewing
from effectledger.app.access import (
    require_reader,
    require_writer,
    visible_operation,
    visible_proposal,
)
from effectledger.app.declaring import Declarations
from effectledger.app.refs import ActionRef, OperationRef, ProposalRef, operation_id_of, shown
from effectledger.authority import Authority
from effectledger.authority.pending import QueueFilter
from effectledger.clock import Clock
from effectledger.destinations import Destination
from effectledger.errors import InvalidInput
from effectledger.ledger import Ledger, LedgerSettings
from effectledger.ledger.summary import LedgerSummary, summarize
from effectledger.model.authority import Approval, CapacityUsage, Correlation, Proposal
from effectledger.model.operations import (
    AuditEvent,
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    validate_identifier,
)
from effectledger.model.results import EffectResult
from effectledger.model.review import DecisionPage, PendingPage, ProposalReview, QueueOrder
from effectledger.store import Store
from effectledger.workers.executor import Executor
from effectledger.workers.recovery import RecoveryReport, RecoveryWorker

if TYPE_CHECKING:  # the evidence tooling is imported by the calls that use it, not the hot path
    from effectledger.audit.bundles.export import ExportReport
    from effectledger.audit.explain import Sentence
    from effectledger.audit.keys.signers import Signer
    from effectledger.audit.sealing.sealer import SealReport

__all__ = ["EffectLedger"]


class EffectLedger:
    """Every verb of an effect's life for one application (see the module docstring).

    Thread-safe for concurrent calls once the actions are declared; declare them at start-up.
    Every step trusts the context it is given: which steps a model may reach is the caller's
    choice (a tool layer offers ``propose``, ``perform`` and ``status``); capacity limits,
    retries, escalation and resolution are for trusted people and workers.

    Built over a :class:`~effectledger.store.Store` (what :func:`connect` opens), or over an
    existing :class:`~effectledger.ledger.Ledger` to share its clock and settings. ``signer``
    is the log key that seals; ``log_key_file`` a key file it is read from at the first seal
    (what :func:`connect` passes from the key directory); without either, ``seal`` reads
    ``$EFFECTLEDGER_LOG_KEY``. ``sealer_memory``: the file where ``seal`` and ``seal_pending``
    keep the last tree they signed per log, outside the database (:mod:`effectledger.audit.
    memory`; :func:`connect` passes the key directory's ``sealer-memory.json``), so a rolled-back
    or forked log is refused before any signature. The sealer seals only events the ledger's
    trail key (``settings.trail_keys``) tagged.
    """

    def __init__(
        self,
        store: Store | Ledger,
        *,
        clock: Clock | None = None,
        settings: LedgerSettings | None = None,
        destinations: Iterable[Destination] = (),
        signer: Signer | None = None,
        log_key_file: Path | None = None,
        sealer_memory: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(store, Ledger):
            if clock is not None or settings is not None:
                raise InvalidInput("a ledger given whole brings its own clock and settings")
            self.ledger = store
        else:
            self.ledger = Ledger(store, clock=clock, settings=settings)
        self.store = self.ledger.store
        self.registry = ActionRegistry()
        self.authority = Authority(self.ledger, self.registry)
        self._declared = Declarations(self.registry, self.authority)
        self._declared.bind_all(destinations)
        self._signer = signer
        self._log_key_file = log_key_file
        self.sealer_memory = None if sealer_memory is None else Path(sealer_memory)
        """The sealer's memory file (``None``: the sealer trusts the database's checkpoint)."""
        self._notifiers: tuple[reviewing.Notify, ...] = ()
        self.action = self._declared.action
        """Declare an action (:meth:`~effectledger.app.declaring.Declarations.action`)."""
        self.register = self._declared.register
        """Register a lower-layer :class:`~effectledger.actions.Action` with its adapter."""

    # -- proposing and deciding ----------------------------------------------------------

    def propose(
        self,
        context: Context,
        action: ActionRef,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        /,
        *,
        operation_id: str | None = None,
        correlation: Correlation | None = None,
        stated_reason: str | None = None,
        **fields: Any,
    ) -> Proposal:
        """Record what ``context`` proposes: arguments as a mapping, a model, or keywords.

        ``stated_reason``: the reason the agent gave (untrusted text, at most 2,000 characters),
        shown to reviewers as the agent's and kept in the proposal's event; never part of the
        digest an approval binds to.
        """
        name = action if isinstance(action, str) else action.name
        return proposing.propose(
            self.authority,
            self._notifiers,
            context,
            name,
            arguments,
            fields,
            operation_id=operation_id,
            correlation=correlation,
            stated_reason=stated_reason,
        )

    def proposal(self, context: Context, proposal_id: str) -> Proposal:
        """The proposal, its digest recomputed (what a reviewer page shows), for its proposer and
        the tenant's reviewers; to anyone else it is ``NotFound``."""
        return visible_proposal(context, self.authority.get_proposal(context, proposal_id))

    def proposal_for(self, context: Context, operation: OperationRef) -> Proposal:
        """The proposal recorded under ``operation``'s id (the id a host or an adapter chose
        when it proposed), as :meth:`proposal` shows it: for its proposer and the tenant's
        readers; to anyone else, and when none is recorded, ``NotFound``. Nothing is written."""
        found = self.authority.get_proposal_for_operation(context, operation_id_of(operation))
        return visible_proposal(context, found)

    def approve(
        self,
        approver: Context,
        proposal: ProposalRef,
        /,
        *,
        digest: str | None = None,
        expires_in: timedelta = timedelta(hours=1),
    ) -> Approval:
        """Approve the proposal exactly as shown: the record's digest, or ``digest`` with an id."""
        require_writer(approver)
        proposal_id, seen = shown(proposal, digest)
        with telemetry.span("approve", tenant_id=approver.tenant_id, proposal_id=proposal_id):
            return self.authority.approve(approver, proposal_id, digest=seen, expires_in=expires_in)

    def deny(
        self, approver: Context, proposal: ProposalRef, /, *, reason: str, digest: str | None = None
    ) -> Approval:
        """Deny the proposal as shown, recording who and why; a denial is final."""
        require_writer(approver)
        proposal_id, seen = shown(proposal, digest)
        return self.authority.deny(approver, proposal_id, digest=seen, reason=reason)

    # -- the reviewer's desk -------------------------------------------------------------

    def pending(
        self,
        context: Context,
        *,
        action: str | None = None,
        pool: str | None = None,
        proposer: str | None = None,
        expiring_before: datetime | None = None,
        order: QueueOrder | str = QueueOrder.EXPIRING,
        limit: int = 50,
        after: str | None = None,
    ) -> PendingPage:
        """What waits for ``context``'s decision, a page at a time (:func:`~effectledger.app.
        reviewing.pending`); filter by action, pool, proposer and expiry."""
        where = QueueFilter(
            action=action, pool=pool, proposer_id=proposer, expiring_before=expiring_before
        )
        return reviewing.pending(
            self.authority, context, where=where, order=order, limit=limit, after=after
        )

    def decisions(
        self,
        context: Context,
        *,
        decider: str | None = None,
        action: str | None = None,
        outcome: str | None = None,
        search: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> DecisionPage:
        """The tenant's decisions, newest first (:func:`.reviewing.decisions`): the history."""
        return reviewing.decisions(
            self.authority,
            context,
            decider=decider,
            action=action,
            outcome=outcome,
            search=search,
            since=since,
            until=until,
            limit=limit,
            after=after,
        )

    def review(self, context: Context, proposal_id: str) -> ProposalReview:
        """Where the proposal stands for this reviewer (:func:`.reviewing.review`)."""
        return reviewing.review(self.authority, context, proposal_id)

    def decide(
        self,
        context: Context,
        proposal_id: str,
        *,
        digest: str,
        approve: bool,
        reason: str | None = None,
    ) -> Approval:
        """Approve or deny only while it still waits (:func:`.reviewing.decide`)."""
        return reviewing.decide(
            self.authority, context, proposal_id, digest=digest, approve=approve, reason=reason
        )

    def prove(self, context: Context, operation_id: str) -> bytes:
        """A receipt of the operation's sealed events (:func:`.reviewing.prove`)."""
        return reviewing.prove(self.authority, context, operation_id)

    def manual_reviews(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """The tenant's operations in MANUAL_REVIEW, soonest deadline first (a reviewer's)."""
        return reviewing.manual_reviews(self.authority, context, limit=limit)

    def notify_with(self, notifier: reviewing.Notify) -> None:
        """Tell ``notifier`` of every proposal that needs a decision, once it is recorded
        (:class:`~effectledger.callers.notify.WebhookNotifier` posts them to webhooks)."""
        self._notifiers = (*self._notifiers, notifier)

    # -- performing ----------------------------------------------------------------------

    def perform(
        self,
        context: Context,
        proposal: ProposalRef,
        /,
        *,
        approval: Approval | str | None = None,
        tenant_id: str | None = None,
    ) -> EffectResult:
        """Admit the proposal on its authority and perform it once; repeat calls replay.

        Without ``approval`` the decision recorded on the proposal's trail is used: a denial
        if there is one, else the latest approval of its digest (the admission checks it).
        Denials, including a proposal ``context`` cannot see, are results, not exceptions.
        """
        approval_id: str | None
        if approval is None or type(approval) is str:
            approval_id = approval
        elif isinstance(approval, Approval):
            approval_id = approval.approval_id
        else:  # a str subclass passes; anything else is refused as a malformed id
            approval_id = validate_identifier(approval, "approval_id")
        return performing.perform(
            self.authority,
            self._declared,
            context,
            proposal,
            approval_id=approval_id,
            recorded_decision=approval is None,
            tenant_id=tenant_id,
        )

    def dispatch(self, context: Context, operation: OperationRef) -> DispatchResult:
        """Perform an operation admitted outside ``perform`` once, or report its recorded state.

        For an operation admitted on an outside decision (``Ledger.admit``): its destination's
        guarded executor claims it, rechecks it and submits it once; a repeat reports the state.
        """
        found = self.ledger.get(context, operation_id_of(operation))
        executor = self._declared.executor_for(found.destination)
        return executor.execute(context, found.operation_id)

    # -- reading -------------------------------------------------------------------------

    def status(self, context: Context, operation: OperationRef) -> DispatchResult:
        """The recorded state of an operation ``context``'s actor requested."""
        return self.ledger.status(context, operation_id_of(operation))

    def operation(self, context: Context, operation: OperationRef) -> Operation:
        """The operation as stored, for its requester, its review owner or a reviewer (to anyone
        else of the tenant it is ``NotFound``, like another tenant's)."""
        return visible_operation(context, self.ledger.get(context, operation_id_of(operation)))

    def operations(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """The tenant's most recent operations, newest first (approver or auditor)."""
        require_reader(context)
        return self.ledger.list_operations(context, limit=limit)

    def events(self, context: Context, operation: OperationRef) -> list[AuditEvent]:
        """The operation's audit trail in order, from its proposal on (approver or auditor)."""
        require_reader(context)
        return self.ledger.events(context, operation_id_of(operation))

    def summary(self, context: Context) -> LedgerSummary:
        """The tenant's operations by state, the uncertain ones and their age, and the seal lag
        (approver or auditor; what ``status --summary`` and ``/metrics`` show)."""
        require_reader(context)
        return summarize(self.store, context, self.ledger.clock.now())

    def explain(self, context: Context, operation: OperationRef) -> list[Sentence]:
        """What the operation's events say happened, one cited sentence per event, once its hash
        chain and (with a trail key) every event's tag verify (:func:`~effectledger.audit.explain.
        explain_stored`)."""
        from effectledger.audit.explain import explain_stored

        require_reader(context)
        return explain_stored(
            self.store,
            context.tenant_id,
            operation_id_of(operation),
            trail_keys=self.ledger.settings.trail_keys,
        )

    # -- capacity ------------------------------------------------------------------------

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """Held, committed and freed units of the tenant's pool, and its limit (as events)."""
        require_reader(context)
        return self.authority.capacity(context, pool)

    def set_capacity_limit(self, context: Context, pool: str, units: int) -> CapacityUsage:
        """Set the most units the tenant's pool may hold and commit together (trusted step)."""
        self.authority.set_capacity_limit(context.tenant_id, pool, units)
        return self.authority.capacity(context, pool)

    # -- retry, escalation, manual review, recovery --------------------------------------

    def authorize_retry(
        self, context: Context, operation: OperationRef, *, max_retries: int = 1
    ) -> DispatchResult:
        """Return a RETRY_PENDING operation to READY (same key), within ``max_retries``."""
        require_writer(context)
        return self.ledger.authorize_retry(
            context, operation_id_of(operation), max_retries=max_retries
        )

    def escalate(
        self, context: Context, operation: OperationRef, *, reason: str, owner: str | None = None
    ) -> DispatchResult:
        """Move an unresolved operation of the tenant to MANUAL_REVIEW with an owner."""
        require_writer(context)
        operation_id = self.ledger.get(context, operation_id_of(operation)).operation_id
        return self.ledger.escalate(
            context.tenant_id, operation_id, reason=reason, owner=owner, actor=context.actor_id
        )

    def resolve(
        self, context: Context, operation: OperationRef, observation: Observation
    ) -> DispatchResult:
        """Settle a MANUAL_REVIEW with what the destination's own records show.

        Only the review owner (as actor or role) may resolve, and only with an authoritative
        observation (``Accepted`` with its references, or ``PermanentRejection``).
        """
        return self.ledger.resolve(context, operation_id_of(operation), observation)

    def reconcile(self, context: Context, operation: OperationRef) -> EffectResult:
        """Look up this one operation now if it is due, never resubmitting; report its state.

        ``outcome`` is ``reconciled`` when the lookup settled it, ``unresolved`` otherwise (not
        due, or the destination's answer was inconclusive). Another tenant's operation is
        ``NotFound`` and nothing is reserved or looked up.
        """
        return performing.reconcile(
            self.authority, self._declared, context, operation_id_of(operation)
        )

    def recover(self, *, limit: int = 100) -> RecoveryReport:
        """One recovery pass over every tenant's due lookups (the trusted worker's step)."""
        return RecoveryWorker(self.ledger, self._declared.destinations.values()).run_once(
            limit=limit
        )

    def dispatch_ready(self, *, limit: int = 100, claim_batch: int = 1) -> list[DispatchResult]:
        """One pass of the guarded executors over READY operations (the trusted worker's step):
        up to ``limit`` of them rechecked and performed once, ``claim_batch`` of one destination
        claimed per transaction (:func:`~effectledger.app.passes.dispatch_ready`)."""
        return passes.dispatch_ready(self._declared, limit=limit, claim_batch=claim_batch)

    # -- evidence ------------------------------------------------------------------------

    def seal(self, context: Context) -> SealReport:
        """Seal the tenant's pending audit events into its signed Merkle log."""
        return passes.seal(
            self.store,
            self._log_signer(),
            self.ledger.clock,
            context.tenant_id,
            trail_keys=self.ledger.settings.trail_keys,
            memory=self.sealer_memory,
        )

    def seal_pending(
        self, *, witnesses: Iterable[str] = (), memory: str | os.PathLike[str] | None = None
    ) -> list[SealReport]:
        """Seal every tenant's pending events (the worker's step; ``URL=KEY`` witnesses cosign).

        ``memory``: the sealer's memory file, if not :attr:`sealer_memory`. Only events the
        trail key tagged are sealed; an event it did not tag, or a log that does not extend
        what the memory holds, raises :class:`~effectledger.errors.AuditVerificationFailed`
        and nothing is signed.
        """
        return passes.seal_pending(
            self.store,
            self._log_signer(),
            self.ledger.clock,
            witnesses,
            trail_keys=self.ledger.settings.trail_keys,
            memory=self.sealer_memory if memory is None else Path(memory),
        )

    def _log_signer(self) -> Signer | None:
        """The log key: the one given, else the key file's, parsed once (else, at the seal,
        ``$EFFECTLEDGER_LOG_KEY``)."""
        if self._signer is None and self._log_key_file is not None:
            from effectledger.audit.keys.files import load_signer

            self._signer = load_signer(self._log_key_file)
        return self._signer

    def export(
        self, context: Context, path: str | Path, *, exporter_id: str | None = None
    ) -> ExportReport:
        """Append the tenant's sealed log to the evidence bundle at ``path``, resumably."""
        return passes.export(self.store, self.ledger.clock, context.tenant_id, path, exporter_id)

    # -- the lower layer and the store ------------------------------------------------

    def executor_for(self, destination: DestinationRef) -> Executor:
        """The guarded executor bound to ``destination`` (a lookup, no I/O), for executor pools
        (``run_ready``); ``DestinationMismatch`` if no adapter serves that endpoint."""
        return self._declared.executor_for(destination)

    @property
    def destinations(self) -> Mapping[DestinationRef, Destination]:
        """The bound destination adapters, by account and endpoint (read-only)."""
        return MappingProxyType(self._declared.destinations)

    def ping(self) -> int:
        """The store's schema version (0 before migration), in one round trip, writing nothing;
        ``StorageError`` if it does not answer (what a readiness check asks)."""
        row = self.store.one("store_ping", {})
        return 0 if row is None or row["schema_version"] is None else int(row["schema_version"])

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (destination adapters belong to their creators)."""
        self.store.close()

    def __enter__(self) -> EffectLedger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
