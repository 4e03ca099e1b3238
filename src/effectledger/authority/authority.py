"""The :class:`Authority`: proposals, approvals and admission for one action registry.

Each method that writes is one transaction of a plain function of the package's modules
(:mod:`~effectledger.authority.proposing`, :mod:`~effectledger.authority.decisions`,
:mod:`~effectledger.authority.running`, :mod:`~effectledger.authority.capacity`).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any

from effectledger.actions.registry import ActionRegistry
from effectledger.authority.admission import Admission, AdmissionRequest
from effectledger.authority.capacity import (
    CAPACITY_ACTOR,
    capacity_in,
    check_limit,
    set_limit_in,
)
from effectledger.authority.decisions import (
    Check,
    check_lifetime,
    check_reason,
    decide_in,
    decision_row,
)
from effectledger.authority.proposing import (
    MAX_UNITS,
    approval_consumed_by,
    get_proposal,
    get_proposal_for_operation,
    proposal_row,
    propose_in,
)
from effectledger.authority.rechecks import recheck_stored
from effectledger.authority.running import (
    admit_and_claim_in,
    deny_tampered_in,
    run_admission,
)
from effectledger.authority.writes import write
from effectledger.errors import AdmissionDenied, InvalidInput, NotFound, TamperedProposal
from effectledger.ledger import DISPATCH_WORKER, Ledger, replayed_result
from effectledger.ledger.stored import approval_from_row, proposal_from_row
from effectledger.model.authority import Approval, CapacityUsage, Correlation, Proposal
from effectledger.model.operations import (
    Context,
    DestinationRef,
    DispatchResult,
    Operation,
    Row,
    to_micros,
    validate_identifier,
)
from effectledger.store import Identifiers, Store
from effectledger.store.hashes import unpacked

__all__ = ["Authority", "Check"]


class Authority:
    """Proposals, approvals and admission for the actions of one registry."""

    def __init__(self, ledger: Ledger, registry: ActionRegistry) -> None:
        self.ledger = ledger
        self.registry = registry

    @property
    def _store(self) -> Store:  # the ledger's own store, read where it stands
        return self.ledger.store

    # -- proposals -----------------------------------------------------------------------

    def propose(
        self,
        context: Context,
        action_name: str,
        arguments: Mapping[str, Any],
        *,
        operation_id: str | None = None,
        correlation: Correlation | Mapping[str, str] | None = None,
        stated_reason: str | None = None,
    ) -> Proposal:
        """Record an immutable proposal of ``action_name`` with validated, normalized arguments.

        The proposer is the context's actor; the target, resource version, units, pool,
        destination, policy version and expiry come from the registered action, never from the
        arguments. ``operation_id`` (generated when omitted) must not name any other proposal,
        operation or trail (:class:`OperationIdTaken`), except that the same tool call proposed
        again (same proposer, action and arguments under the same correlation ``tool_call_id``
        and operation id) returns the proposal already recorded. Writes the proposal and
        ``ProposalRecorded`` in one transaction.
        """
        row = proposal_row(
            context,
            self.registry.get(action_name),
            arguments,
            operation_id=operation_id,
            correlation=correlation,
            clock=self.ledger.clock,
            stated_reason=stated_reason,
        )
        stored = write(
            self._store, functools.partial(propose_in, ledger=self.ledger, row=row), "propose"
        )
        return proposal_from_row(stored)

    def get_proposal(self, context: Context, proposal_id: str) -> Proposal:
        """The tenant's proposal, its digest recomputed (:class:`TamperedProposal` if edited)."""
        return get_proposal(self._store, context, proposal_id)

    def get_proposal_for_operation(self, context: Context, operation_id: str) -> Proposal:
        """The tenant's proposal recorded under ``operation_id`` (``NotFound`` without one)."""
        return get_proposal_for_operation(self._store, context, operation_id)

    def recorded_decision(self, context: Context, proposal: Proposal) -> str | None:
        """The approval a perform that names none presents, read in one statement.

        ``None`` once the proposal's operation id is admitted (its exact replay needs none) or
        while nobody has decided; else the first recorded denial of the proposal's digest (a
        denial is final), else its latest grant. Admission checks the choice again.
        """
        keys = ("tenant_id", "operation_id", "proposal_id", "digest")
        row = self._store.one("proposal_decision", {key: getattr(proposal, key) for key in keys})
        if row is None or row["admitted"]:
            return None
        chosen: str | None = row["denied"] or row["granted"]
        return chosen

    def approval_consumed_by(self, context: Context, approval_id: str) -> str | None:
        """The operation that consumed the approval, or ``None`` while it is unspent."""
        return approval_consumed_by(self._store, context, approval_id)

    # -- approvals -----------------------------------------------------------------------

    def approve(
        self,
        approver: Context,
        proposal_id: str,
        *,
        digest: str,
        expires_in: timedelta = timedelta(hours=1),
        check: Check | None = None,
    ) -> Approval:
        """Record ``approver``'s approval of exactly the proposal with ``digest``.

        ``digest`` is the one the approver was shown: if the stored proposal has another, the
        approval is refused (``digest_mismatch``). The approver comes from the trusted context;
        policy decides whether they may approve (``self_approval``, ``not_an_approver``). A
        proposal that was denied is closed (``proposal_denied``), and one already admitted is
        decided (``already_admitted``): neither takes another approval. ``expires_in`` is a positive
        duration of at most a year. ``check`` runs under the proposal's trail lock before the
        decision is written, and may refuse it (:func:`.decisions.decide_in`).
        """
        check_lifetime(expires_in)
        return self._decide(
            approver, proposal_id, digest, expires_in, granted=True, reason=None, check=check
        )

    def deny(
        self,
        approver: Context,
        proposal_id: str,
        *,
        digest: str,
        reason: str,
        check: Check | None = None,
    ) -> Approval:
        """Record ``approver``'s denial: it closes the proposal for good (a decision is final);
        no approval, earlier or later, can admit it. A proposal already admitted can no longer
        be denied (``already_admitted``): its effect may be under way. ``check`` as for approve.
        """
        check_reason(reason)
        return self._decide(
            approver, proposal_id, digest, timedelta(0), granted=False, reason=reason, check=check
        )

    def _decide(
        self,
        approver: Context,
        proposal_id: str,
        shown_digest: str,
        expires_in: timedelta,
        *,
        granted: bool,
        reason: str | None,
        check: Check | None,
    ) -> Approval:
        if not isinstance(shown_digest, str):
            raise InvalidInput("digest must be the proposal digest the approver was shown")
        proposal = self.get_proposal(approver, proposal_id)
        row = decision_row(
            approver,
            proposal,
            self.registry.get(proposal.action),
            shown_digest,
            expires_in,
            granted=granted,
            reason=reason,
            now=self.ledger.clock.now(),
        )
        body = functools.partial(
            decide_in, ledger=self.ledger, operation_id=proposal.operation_id, row=row, check=check
        )
        write(self._store, body, "approve" if granted else "deny")
        return approval_from_row(row)

    # -- admission -----------------------------------------------------------------------

    def admit(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Operation:
        """Admit the proposal as an operation, spending its authority, in one transaction.

        See :meth:`admit_or_replay`; this returns the operation alone.
        """
        return self.admit_or_replay(
            context, proposal_id, approval_id=approval_id, tenant_id=tenant_id
        ).operation

    def admit_or_replay(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None = None,
        tenant_id: str | None = None,
        claim_for: Collection[DestinationRef] = (),
        executor_id: str = DISPATCH_WORKER,
    ) -> Admission:
        """Admit the proposal, or find the operation an earlier identical call admitted.

        ``tenant_id`` is the tenant the request was addressed to (a URL, a tool binding); it
        must be the authenticated context's. The exact replay of an admission returns the
        existing operation with ``replayed=True`` without spending anything; every denial raises
        :class:`AdmissionDenied` with a stable reason, leaves no operation and no consumption,
        and is recorded as an ``AdmissionDenied`` event on the proposal's trail in the same
        transaction. Concurrent calls for one proposal serialize on its trail.

        With ``claim_for``, an operation admitted now whose destination is one of those is also
        claimed in the admission's transaction (its expiry, resource version and permission were
        just checked there): ``Admission.claim`` is then the committed claim to submit, saving
        the executor a transaction of its own. A replay claims nothing.
        """
        self._check_request(context, proposal_id, approval_id, tenant_id)
        row = self._store.one(
            "proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
        )
        proposal = self._decoded(context, row, proposal_id)
        return self._admit(context, proposal, approval_id, claim_for, executor_id)

    def perform_admission(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None = None,
        recorded_decision: bool = False,
        tenant_id: str | None = None,
        claim_for: Collection[DestinationRef] = (),
        executor_id: str = DISPATCH_WORKER,
    ) -> Admission | DispatchResult:
        """What a perform does before it submits, from one read of the proposal and its operation.

        The recorded state (a :class:`DispatchResult`) when this is the exact replay of a
        finished perform by the same actor: nothing is decoded, spent or written. Otherwise
        the admission of :meth:`admit_or_replay` on the proposal read there; with
        ``recorded_decision`` and no ``approval_id``, it presents the decision recorded on the
        proposal's trail (:meth:`recorded_decision`).
        """
        self._check_request(context, proposal_id, approval_id, tenant_id)
        store = self.ledger.store
        row = store.one(  # both checked: the context's own, and _check_request's
            "proposal_replay", Identifiers(tenant_id=context.tenant_id, proposal_id=proposal_id)
        )
        recorded = replayed_result(row, context, store)
        if recorded is not None:
            return recorded
        proposal = self._decoded(context, row, proposal_id, stored_digest=True)
        if approval_id is None and recorded_decision:
            approval_id = self.recorded_decision(context, proposal)
        return self._admit(context, proposal, approval_id, claim_for, executor_id)

    @staticmethod
    def _check_request(
        context: Context, proposal_id: str, approval_id: str | None, tenant_id: str | None
    ) -> None:
        if tenant_id is not None and tenant_id != context.tenant_id:
            raise AdmissionDenied(
                "the request names another tenant than the caller's", reason="tenant_mismatch"
            )
        validate_identifier(proposal_id, "proposal_id")
        if approval_id is not None:
            validate_identifier(approval_id, "approval_id")

    def _decoded(
        self, context: Context, row: Row | None, proposal_id: str, *, stored_digest: bool = False
    ) -> Proposal:
        """The proposal in ``row``, its digest recomputed; an edited one is denied, on its trail.

        No row is :class:`NotFound`: an unknown id and another tenant's look the same.
        ``stored_digest``: the row carries the digest as its stored bytes (``proposal_replay``).
        """
        if row is None:
            raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
        try:
            if stored_digest:
                return proposal_from_row(row, digest=unpacked(row["stored_digest"]))
            return proposal_from_row(row)
        except TamperedProposal as exc:
            denial = functools.partial(
                deny_tampered_in,
                ledger=self.ledger,
                context=context,
                operation_id=row["operation_id"],
            )
            write(self._store, denial, "admission_denied")
            raise AdmissionDenied(
                "the stored proposal no longer matches its digest",
                reason="digest_mismatch",
                tampered=True,
            ) from exc

    def _admit(
        self,
        context: Context,
        proposal: Proposal,
        approval_id: str | None,
        claim_for: Collection[DestinationRef],
        executor_id: str,
    ) -> Admission:
        action = self.registry.get(proposal.action)
        claim = proposal.destination in claim_for
        request = AdmissionRequest(
            context=context,
            proposal=proposal,
            action=action,
            approval_id=approval_id,
            # Application callback: read before the transaction, compared inside it.
            current_version=action.resource_version(context, proposal.target),
        )
        body = functools.partial(
            admit_and_claim_in,
            ledger=self.ledger,
            request=request,
            claim=claim,
            executor_id=executor_id,
        )
        return run_admission(self.ledger, body, context, proposal, claim=claim)

    # -- dispatch-time recheck and capacity ----------------------------------------------

    def dispatch_guard(self, worker: Context, operation: Operation) -> str | None:
        """The dispatch-time recheck: a reason to release the operation, or ``None``.

        ``worker`` is the dispatching executor's trusted identity in the operation's tenant
        (see :data:`effectledger.workers.DispatchGuard`), never a stand-in for the requester.
        Permission is what admission stored: the approval or pre-authorization it consumed,
        or the policy tier it recorded, decided under the requester's own roles; it is not
        re-evaluated here. What can go stale after admission is rechecked: the proposal's
        digest, its expiry and the target's resource version (read under ``worker``).
        Operations admitted without a proposal are not checked here.
        """
        if operation.proposal_id is None:
            return None
        row = self._store.one(
            "proposal_get",
            {"tenant_id": operation.tenant_id, "proposal_id": operation.proposal_id},
        )
        return recheck_stored(worker, operation, row, self.registry, self.ledger.clock.now())

    def set_capacity_limit(
        self, tenant_id: str, pool: str, units: int, *, actor: str = CAPACITY_ACTOR
    ) -> None:
        """Set the most units a tenant's pool may hold and commit together (trusted admin).

        The change is recorded as a ``CapacityLimitSet`` event on the pool's own trail
        (operation id ``pool:<pool>``), in the same transaction, naming ``actor``.
        """
        check_limit(tenant_id, pool, units, actor, most=MAX_UNITS)
        body = functools.partial(
            set_limit_in,
            ledger=self.ledger,
            tenant_id=tenant_id,
            pool=pool,
            units=units,
            actor=actor,
            now_us=to_micros(self.ledger.clock.now()),
        )
        write(self._store, body, "capacity_limit")

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """Held, committed and freed units of the tenant's pool, and its limit."""
        validate_identifier(pool, "pool")
        return self._store.read(
            functools.partial(capacity_in, tenant_id=context.tenant_id, pool=pool)
        )
