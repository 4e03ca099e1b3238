"""The one object an application holds: :func:`connect` returns an :class:`EffectLedger`.

It owns the store, the :class:`~effectledger.ledger.Ledger`, the action registry and the
:class:`~effectledger.service.EffectService` built over them, and offers every step of an
effect's life, each scoped by the trusted :class:`~effectledger.model.Context`: declare an
action (:meth:`EffectLedger.action`), propose, approve or deny, perform, read status, events and
an explanation, manage capacity, authorize a retry, escalate and resolve a manual review, run a
recovery pass, seal and export the evidence.

Every caller is built on this object: the function tools (``FunctionTools(ledger)``), the MCP
server (``build_server(ledger, ...)``) and the HTTP API (``create_app(ledger, keys)``) call these
methods and nothing beneath them, so each applies the same rules. The tenant's wider views
(``operations``, ``events``, ``explain``, ``capacity``, another actor's ``proposal`` or
``operation``) need a reviewer's role (:mod:`effectledger.access`); everyone sees their own.

Records are passed from call to call (a :class:`~effectledger.proposals.Proposal` to
``approve`` and ``perform``), so nobody copies an id or a digest by hand; every call also takes
the plain ids, for callers that only have strings (HTTP, MCP, a reviewer page). The lower layer
stays reachable (``.ledger``, ``.registry``, ``.service``) and public.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from effectledger.access import (
    require_reader,
    require_writer,
    visible_operation,
    visible_proposal,
)
from effectledger.actions import Action
from effectledger.catalog import ActionCatalog
from effectledger.clock import Clock
from effectledger.destinations import Destination
from effectledger.errors import InvalidInput, InvalidTransition, NotFound, NotPermitted
from effectledger.executor import Executor
from effectledger.function_actions import ActionHandle
from effectledger.ledger import Ledger, LedgerSettings
from effectledger.model import (
    AuditEvent,
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    OperationState,
    Outcome,
)
from effectledger.outcomes import EffectResult
from effectledger.proposals import Approval, CapacityUsage, Correlation, Proposal
from effectledger.recovery import RecoveryReport
from effectledger.store import Store, open_store

if TYPE_CHECKING:  # the evidence tooling is imported by the calls that use it, not the hot path
    from effectledger.audit.explain import Sentence
    from effectledger.audit.export import ExportReport
    from effectledger.audit.sealer import SealReport
    from effectledger.audit.signers import Signer

__all__ = ["DEFAULT_URL", "URL_VARIABLE", "EffectLedger", "OperationRef", "connect"]

URL_VARIABLE = "EFFECTLEDGER_DB"
DEFAULT_URL = "sqlite:///effectledger.db"

OperationRef = str | Proposal | Operation | DispatchResult | EffectResult
"""An operation named by its id or by a record that carries it."""

ProposalRef = Proposal | str
ActionRef = ActionHandle | Action | str


def connect(
    url: str | None = None,
    *,
    migrate: bool = True,
    clock: Clock | None = None,
    settings: LedgerSettings | None = None,
    destinations: Iterable[Destination] = (),
    signer: Signer | None = None,
    **store_options: Any,
) -> EffectLedger:
    """Open the ledger at ``url`` (else ``$EFFECTLEDGER_DB``, else ``sqlite:///effectledger.db``).

    ``migrate`` brings the schema up to date first (each migration once, even when several
    processes start together). ``destinations`` binds existing
    :class:`~effectledger.destinations.Destination` adapters; ``signer`` is the log key for
    :meth:`EffectLedger.seal` (default: ``$EFFECTLEDGER_LOG_KEY``). Use the result as a context
    manager to close the store.
    """
    chosen = url or os.environ.get(URL_VARIABLE) or DEFAULT_URL
    store = open_store(chosen, migrate=migrate, **store_options)
    try:
        return EffectLedger(
            store, clock=clock, settings=settings, destinations=destinations, signer=signer
        )
    except BaseException:
        store.close()
        raise


class EffectLedger(ActionCatalog):
    """Store, ledger, registry and service for one application (see the module docstring).

    Thread-safe for concurrent calls once the actions are declared; declare them at start-up.
    Every step trusts the context it is given: which steps a model may reach is the caller's
    choice (a tool layer offers ``propose``, ``perform`` and ``status``); capacity limits,
    retries, escalation and resolution are for trusted people and workers.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        settings: LedgerSettings | None = None,
        destinations: Iterable[Destination] = (),
        signer: Signer | None = None,
    ) -> None:
        self.store = store
        self._signer = signer
        super().__init__(Ledger(store, clock=clock, settings=settings), destinations)

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
        **fields: Any,
    ) -> Proposal:
        """Record what ``context`` proposes: arguments as a mapping, a model, or keywords."""
        require_writer(context)
        name = action if isinstance(action, str) else action.name
        if arguments is not None and fields:
            raise InvalidInput("give the arguments as one object or as keywords, not both")
        if isinstance(arguments, BaseModel):
            arguments = arguments.model_dump()
        return self.service.propose(
            context,
            name,
            fields if arguments is None else arguments,
            operation_id=operation_id,
            correlation=correlation,
        )

    def proposal(self, context: Context, proposal_id: str) -> Proposal:
        """The proposal, its digest recomputed (what a reviewer page shows).

        Its proposer and the tenant's reviewers see it; to anyone else it is ``NotFound``.
        """
        return visible_proposal(context, self.service.authority.get_proposal(context, proposal_id))

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
        proposal_id, shown = _shown(proposal, digest)
        return self.service.approve(approver, proposal_id, digest=shown, expires_in=expires_in)

    def deny(
        self, approver: Context, proposal: ProposalRef, /, *, reason: str, digest: str | None = None
    ) -> Approval:
        """Deny the proposal as shown, recording who and why; a denial is final."""
        require_writer(approver)
        proposal_id, shown = _shown(proposal, digest)
        return self.service.deny(approver, proposal_id, digest=shown, reason=reason)

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
        Denials, including a proposal ``context`` cannot see, are results, not exceptions; a
        context whose roles only read is refused (``not_permitted``).
        """
        require_writer(context)
        proposal_id = proposal if isinstance(proposal, str) else proposal.proposal_id
        approval_id = (
            approval if approval is None or isinstance(approval, str) else approval.approval_id
        )
        return self.service.perform(
            context,
            proposal_id,
            approval_id=approval_id,
            recorded_decision=approval is None,
            tenant_id=tenant_id,
        )

    # -- reading -------------------------------------------------------------------------

    def status(self, context: Context, operation: OperationRef) -> DispatchResult:
        """The recorded state of an operation ``context``'s actor requested."""
        return self.ledger.status(context, _operation_id(operation))

    def operation(self, context: Context, operation: OperationRef) -> Operation:
        """The operation as stored, for its requester, its review owner or a reviewer.

        To anyone else of the tenant it is ``NotFound``, like another tenant's.
        """
        return visible_operation(context, self.ledger.get(context, _operation_id(operation)))

    def operations(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """The tenant's most recent operations, newest first (approver or auditor)."""
        require_reader(context)
        return self.ledger.list_operations(context, limit=limit)

    def events(self, context: Context, operation: OperationRef) -> list[AuditEvent]:
        """The operation's audit trail in order, from its proposal on (approver or auditor)."""
        require_reader(context)
        return self.ledger.events(context, _operation_id(operation))

    def explain(self, context: Context, operation: OperationRef) -> list[Sentence]:
        """What the operation's events say happened, one cited sentence per event (as events)."""
        from effectledger.audit.explain import explain

        return explain(self.events(context, operation))

    # -- capacity ------------------------------------------------------------------------

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """Held, committed and freed units of the tenant's pool, and its limit (as events)."""
        require_reader(context)
        return self.service.authority.capacity(context, pool)

    def set_capacity_limit(self, context: Context, pool: str, units: int) -> CapacityUsage:
        """Set the most units the tenant's pool may hold and commit together (trusted step)."""
        self.service.authority.set_capacity_limit(context.tenant_id, pool, units)
        return self.service.authority.capacity(context, pool)

    # -- retry, escalation, manual review, recovery --------------------------------------

    def authorize_retry(
        self, context: Context, operation: OperationRef, *, max_retries: int = 1
    ) -> DispatchResult:
        """Return a RETRY_PENDING operation to READY (same key), within ``max_retries``."""
        require_writer(context)
        return self.ledger.authorize_retry(
            context, _operation_id(operation), max_retries=max_retries
        )

    def escalate(
        self, context: Context, operation: OperationRef, *, reason: str, owner: str | None = None
    ) -> DispatchResult:
        """Move an unresolved operation of the tenant to MANUAL_REVIEW with an owner."""
        require_writer(context)
        operation_id = self.ledger.get(context, _operation_id(operation)).operation_id
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
        found = self.ledger.get(context, _operation_id(operation))
        if found.state is not OperationState.MANUAL_REVIEW:
            raise InvalidTransition(
                f"only a MANUAL_REVIEW operation is resolved here; it is {found.state.value}",
                operation_id=found.operation_id,
            )
        owner = found.review_owner
        if owner is None or (context.actor_id != owner and owner not in context.roles):
            raise NotPermitted(f"only the review owner {owner!r} may resolve this operation")
        if observation.outcome not in (Outcome.ACCEPTED, Outcome.PERMANENT_REJECTION):
            raise InvalidInput("a manual review is resolved by Accepted or PermanentRejection")
        attempts = self.ledger.attempts(context, found.operation_id)
        active = [a for a in attempts if a.attempt_id == found.active_attempt_id]
        if not active:
            raise NotFound("the operation has no active attempt", operation_id=found.operation_id)
        return self.ledger.record(active[0], observation, actor=context.actor_id, reconciled=True)

    def recover(self, *, limit: int = 100) -> RecoveryReport:
        """One recovery pass over every tenant's due lookups (the trusted worker's step)."""
        return self.service.recovery.run_once(limit=limit)

    # -- evidence ------------------------------------------------------------------------

    def seal(self, context: Context) -> SealReport:
        """Seal the tenant's pending audit events into its signed Merkle log."""
        from effectledger.audit.keys import load_signer
        from effectledger.audit.sealer import LogSealer

        signer = self._signer or load_signer()
        return LogSealer(self.store, signer, clock=self.ledger.clock).seal(context.tenant_id)

    def export(
        self, context: Context, path: str | Path, *, exporter_id: str | None = None
    ) -> ExportReport:
        """Append the tenant's sealed log to the evidence bundle at ``path``, resumably."""
        from effectledger.audit.export import export_log

        return export_log(
            self.store, context.tenant_id, path, exporter_id=exporter_id, clock=self.ledger.clock
        )

    # -- the lower layer and the store ------------------------------------------------

    def executor_for(self, destination: DestinationRef) -> Executor:
        """The lower-layer executor bound to ``destination`` (no I/O: a lookup).

        It dispatches an operation admitted outside ``perform`` (``Ledger.admit`` on an outside
        decision) with the dispatch-time recheck; :class:`~effectledger.callers.tools.DispatchTool`
        is built on it. Raises ``DestinationMismatch`` if no adapter serves that endpoint.
        """
        return self.service.executor_for(destination)

    def ping(self) -> int:
        """The store's schema version (0 before migration); ``StorageError`` if it does not answer.

        What a readiness check asks: one round trip to the store, nothing written.
        """
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


def _shown(proposal: ProposalRef, digest: str | None) -> tuple[str, str]:
    if isinstance(proposal, Proposal):
        if digest is not None and digest != proposal.digest:
            raise InvalidInput("the digest given is not the record's")
        return proposal.proposal_id, proposal.digest
    if digest is None:
        raise InvalidInput("a decision by proposal id needs the digest the approver was shown")
    return proposal, digest


def _operation_id(operation: OperationRef) -> str:
    if isinstance(operation, str):
        return operation
    if operation.operation_id is None:
        raise InvalidInput("this result names no operation: nothing was admitted")
    return operation.operation_id
