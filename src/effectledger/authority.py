"""Authority: immutable proposals, digest-bound single-use approvals, admission that spends them.

The model proposes; trusted code decides. A :class:`Proposal` is the canonical record of one
concrete intended effect, stored immutably with its digest (recomputed on every read). An
:class:`Approval` binds one approver's decision to that digest. :meth:`Authority.admit` is the
one transaction that turns authority into an operation: it rechecks the actor, expiry, resource
version, policy, approval binding and capacity, then inserts the operation, consumes the approval
and holds the units together. A denial writes an ``AdmissionDenied`` event and nothing else.

The proposal digest is ``digest("proposal", ...)`` (see :mod:`effectledger.canonical`) over::

    {"action", "arguments", "contract_version", "destination": {"account_id", "endpoint"},
     "expires_us", "operation_id", "policy_version", "pool", "proposer_id", "resource_version",
     "target", "tenant_id", "units"}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from effectledger.actions import Action, ActionRegistry
from effectledger.canonical import canonical_bytes, digest
from effectledger.errors import (
    AdmissionDenied,
    ApprovalRefused,
    ConstraintViolation,
    InvalidInput,
    NotFound,
    TamperedProposal,
)
from effectledger.ledger import Ledger, new_id
from effectledger.model import (
    Command,
    Context,
    Operation,
    to_micros,
    validate_identifier,
)
from effectledger.policy import Tier
from effectledger.proposals import (
    Approval,
    CapacityUsage,
    Correlation,
    Proposal,
    approval_from_row,
    proposal_digest_body,
    proposal_from_row,
)
from effectledger.rows import operation_from_row
from effectledger.store import Transaction

__all__ = ["Approval", "Authority", "CapacityUsage", "Correlation", "Proposal"]

_WRITE_ATTEMPTS = 3


@dataclass(slots=True)
class _Denial:
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


class Authority:
    """Proposals, approvals and admission for the actions of one registry."""

    def __init__(self, ledger: Ledger, registry: ActionRegistry) -> None:
        self.ledger = ledger
        self.registry = registry

    @property
    def _store(self) -> Any:
        return self.ledger.store

    def _now(self) -> datetime:
        return self.ledger.clock.now()

    def _write(self, body: Any, label: str) -> Any:
        # A racing writer can take the same trail sequence or consume the same approval first;
        # the constraint refuses the loser, and re-running the body re-decides on fresh rows.
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                return self._store.write(body, label=label)
            except ConstraintViolation:
                if attempt == _WRITE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- proposals -----------------------------------------------------------------------

    def propose(
        self,
        context: Context,
        action_name: str,
        arguments: Mapping[str, Any],
        *,
        operation_id: str | None = None,
        correlation: Correlation | None = None,
    ) -> Proposal:
        """Record an immutable proposal of ``action_name`` with validated, normalized arguments.

        The proposer is the context's actor; the target, resource version, units, pool,
        destination, policy version and expiry come from the registered action, never from the
        arguments. Writes the proposal and ``ProposalRecorded`` in one transaction.
        """
        action = self.registry.get(action_name)
        model = action.validate(arguments)
        normalized = model.model_dump(mode="json")
        canonical_bytes(normalized)  # refuses floats, oversize, lone surrogates before writing
        operation_id = validate_identifier(operation_id or f"op-{new_id()}", "operation_id")
        target = action.target(model)
        units = action.units(model)
        if not isinstance(units, int) or isinstance(units, bool) or units < 0:
            raise InvalidInput(f"{action.name} computed an invalid number of units")
        resource_version = action.resource_version(context, target)
        now = self._now()
        expires_us = to_micros(now + action.proposal_ttl)
        body = proposal_digest_body(
            tenant_id=context.tenant_id,
            operation_id=operation_id,
            proposer_id=context.actor_id,
            action=action.name,
            contract_version=action.contract_version,
            target=target,
            resource_version=resource_version,
            arguments=normalized,
            units=units,
            pool=action.pool,
            destination=action.destination,
            policy_version=action.policy.version,
            expires_us=expires_us,
        )
        proposal_digest = digest("proposal", body)
        proposal_id = f"prop-{new_id()}"
        row = {
            **{k: v for k, v in body.items() if k not in {"arguments", "destination"}},
            "proposal_id": proposal_id,
            "arguments_json": canonical_bytes(normalized).decode(),
            "destination_account": action.destination.account_id,
            "destination_endpoint": action.destination.endpoint,
            "correlation_json": canonical_bytes((correlation or Correlation()).to_dict()).decode(),
            "digest": proposal_digest,
            "created_us": to_micros(now),
        }

        def write(tx: Transaction) -> Proposal:
            if tx.one("proposal_for_operation", self.ledger._key(context.tenant_id, operation_id)):
                raise InvalidInput(
                    f"operation id {operation_id} already has a proposal",
                    operation_id=operation_id,
                )
            tx.run("proposal_insert", row)
            self.ledger.append_event(
                tx,
                tenant_id=context.tenant_id,
                operation_id=operation_id,
                actor=context.actor_id,
                event_type="ProposalRecorded",
                evidence_reference=f"proposal/{proposal_id}",
                details={"proposal_id": proposal_id, "digest": proposal_digest, "units": units},
            )
            stored = tx.one(
                "proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
            )
            assert stored is not None
            return proposal_from_row(stored)

        result: Proposal = self._write(write, "propose")
        return result

    def get_proposal(self, context: Context, proposal_id: str) -> Proposal:
        """The tenant's proposal, its digest recomputed (:class:`TamperedProposal` if edited)."""
        validate_identifier(proposal_id, "proposal_id")
        row = self._store.one(
            "proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
        )
        if row is None:
            raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
        return proposal_from_row(row)

    def get_approval(self, context: Context, approval_id: str) -> Approval:
        """The tenant's approval or denial record."""
        validate_identifier(approval_id, "approval_id")
        row = self._store.one(
            "approval_get", {"tenant_id": context.tenant_id, "approval_id": approval_id}
        )
        if row is None:
            raise NotFound(f"no approval {approval_id}", approval_id=approval_id)
        return approval_from_row(row)

    def approval_consumed_by(self, context: Context, approval_id: str) -> str | None:
        """The operation that consumed the approval, or ``None`` while it is unspent."""
        row = self._store.one(
            "consumption_get", {"tenant_id": context.tenant_id, "approval_id": approval_id}
        )
        return None if row is None else str(row["operation_id"])

    # -- approvals -----------------------------------------------------------------------

    def approve(
        self,
        approver: Context,
        proposal_id: str,
        *,
        digest: str,
        expires_in: timedelta = timedelta(hours=1),
    ) -> Approval:
        """Record ``approver``'s approval of exactly the proposal with ``digest``.

        ``digest`` is the one the approver was shown: if the stored proposal has another, the
        approval is refused (``digest_mismatch``). The approver comes from the trusted context;
        policy decides whether they may approve (``self_approval``, ``not_an_approver``).
        """
        return self._decide(approver, proposal_id, digest, expires_in, granted=True, reason=None)

    def deny(self, approver: Context, proposal_id: str, *, digest: str, reason: str) -> Approval:
        """Record ``approver``'s denial of the proposal (a denial is evidence too)."""
        if not isinstance(reason, str) or not 0 < len(reason) <= 500:
            raise InvalidInput("a denial needs a reason of 1-500 characters")
        return self._decide(
            approver, proposal_id, digest, timedelta(0), granted=False, reason=reason
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
    ) -> Approval:
        proposal = self.get_proposal(approver, proposal_id)
        action = self.registry.get(proposal.action)
        now = self._now()
        if shown_digest != proposal.digest:
            raise ApprovalRefused(
                "the approver was shown another proposal than the one stored",
                reason="digest_mismatch",
                proposal_id=proposal_id,
            )
        refusal = action.policy.may_approve(approver, proposal)
        if refusal is not None:
            raise ApprovalRefused(f"{approver.actor_id} may not decide this", reason=refusal)
        if granted and now >= proposal.expires_at:
            raise ApprovalRefused("the proposal has expired", reason="expired")
        approval_id = f"appr-{new_id()}"
        row = {
            "tenant_id": approver.tenant_id,
            "approval_id": approval_id,
            "proposal_id": proposal_id,
            "digest": proposal.digest,
            "decision": "granted" if granted else "denied",
            "kind": "approval",
            "approver_id": approver.actor_id,
            "policy_version": action.policy.version,
            "reason": reason,
            "decided_us": to_micros(now),
            "expires_us": to_micros(now + expires_in),
        }

        def write(tx: Transaction) -> Approval:
            tx.run("approval_insert", row)
            self.ledger.append_event(
                tx,
                tenant_id=approver.tenant_id,
                operation_id=proposal.operation_id,
                actor=approver.actor_id,
                event_type="ApprovalGranted" if granted else "ApprovalDenied",
                evidence_reference=f"approval/{approval_id}",
                details={"approval_id": approval_id, "digest": proposal.digest},
            )
            stored = tx.one(
                "approval_get", {"tenant_id": approver.tenant_id, "approval_id": approval_id}
            )
            assert stored is not None
            return approval_from_row(stored)

        result: Approval = self._write(write, "approve" if granted else "deny")
        return result

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

        ``tenant_id`` is the tenant the request was addressed to (a URL, a tool binding); it
        must be the authenticated context's. The exact replay of an admission returns the
        existing operation without spending anything; every denial raises
        :class:`AdmissionDenied` with a stable reason, leaves no operation and no consumption,
        and is recorded as an ``AdmissionDenied`` event on the proposal's trail.
        """
        if tenant_id is not None and tenant_id != context.tenant_id:
            raise AdmissionDenied(
                "the request names another tenant than the caller's", reason="tenant_mismatch"
            )
        validate_identifier(proposal_id, "proposal_id")
        if approval_id is not None:
            validate_identifier(approval_id, "approval_id")
        row = self._store.one(
            "proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
        )
        if row is None:
            raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
        try:
            proposal = proposal_from_row(row)
        except TamperedProposal as exc:
            self._record_denial(
                context,
                row["operation_id"],
                _Denial("digest_mismatch", "the stored proposal was edited", {"tampered": True}),
            )
            raise AdmissionDenied(
                "the stored proposal no longer matches its digest",
                reason="digest_mismatch",
                tampered=True,
            ) from exc
        action = self.registry.get(proposal.action)
        # Application callback: read before the transaction, compared inside it.
        current_version = action.resource_version(context, proposal.target)
        outcome: Operation | _Denial = self._write(
            lambda tx: self._admit(tx, context, proposal, action, approval_id, current_version),
            "admit",
        )
        if isinstance(outcome, _Denial):
            self._record_denial(context, proposal.operation_id, outcome)
            raise AdmissionDenied(outcome.message, reason=outcome.reason, **outcome.details)
        return outcome

    def _record_denial(self, context: Context, operation_id: str, denial: _Denial) -> None:
        self._write(
            lambda tx: self.ledger.append_event(
                tx,
                tenant_id=context.tenant_id,
                operation_id=operation_id,
                actor=context.actor_id,
                event_type="AdmissionDenied",
                details={"reason": denial.reason},
            ),
            "admission_denied",
        )

    def _admit(
        self,
        tx: Transaction,
        context: Context,
        proposal: Proposal,
        action: Action,
        approval_id: str | None,
        current_version: str,
    ) -> Operation | _Denial:
        tenant = context.tenant_id
        now = self._now()
        if context.actor_id != proposal.proposer_id:
            return _Denial("actor_mismatch", "only the proposer's own context may admit it")
        existing = tx.one("operation_get", self.ledger._key(tenant, proposal.operation_id))
        if existing is not None:
            same = existing["proposal_id"] == proposal.proposal_id and (
                approval_id is None or existing["approval_id"] == approval_id
            )
            if same:
                return operation_from_row(existing)  # the exact replay: nothing is spent
            return _Denial("approval_consumed", "this proposal was admitted with other authority")
        if now >= proposal.expires_at:
            return _Denial("expired", "the proposal has expired")
        if current_version != proposal.resource_version:
            return _Denial(
                "stale_resource_version",
                "the target changed since the proposal was made",
                {"proposed": proposal.resource_version, "current": current_version},
            )
        decision = action.policy.decide(context, proposal, now)
        if not decision.allowed or decision.tier is None:
            return _Denial(
                "policy_denied",
                "policy does not allow this effect",
                {"policy_reason": decision.reason or "denied"},
            )
        approval: Approval | None = None
        if decision.tier is Tier.APPROVAL_REQUIRED or approval_id is not None:
            found = self._check_approval(tx, tenant, proposal, approval_id, now)
            if isinstance(found, _Denial):
                return found
            approval = found
        elif decision.tier is Tier.PREAUTHORIZED:
            spent = self._check_budget(tx, tenant, proposal, action, now)
            if spent is not None:
                return spent
        denial = self._check_capacity(tx, tenant, proposal)
        if denial is not None:
            return denial
        if approval is None and decision.tier is Tier.PREAUTHORIZED:
            approval = self._preauthorize(tx, context, proposal, decision.policy_version, now)
        if approval is not None:
            reference = f"approval/{approval.approval_id}"
        else:
            reference = f"policy/{decision.policy_version}/{decision.tier.value}"
        draft = self.ledger.draft_operation(
            context,
            operation_id=proposal.operation_id,
            revision=proposal.proposal_id,
            command=Command(
                action=proposal.action,
                contract_version=proposal.contract_version,
                arguments=proposal.arguments,
            ),
            destination=proposal.destination,
            admission_reference=reference,
            proposal_id=proposal.proposal_id,
            approval_id=None if approval is None else approval.approval_id,
            pool=proposal.pool,
            units=proposal.units,
        )
        operation = self.ledger.insert_operation(tx, draft)
        if approval is not None:
            tx.run(
                "consumption_insert",
                {
                    "tenant_id": tenant,
                    "approval_id": approval.approval_id,
                    "operation_id": proposal.operation_id,
                    "now_us": to_micros(now),
                },
            )
        return operation

    def _check_approval(
        self,
        tx: Transaction,
        tenant: str,
        proposal: Proposal,
        approval_id: str | None,
        now: datetime,
    ) -> Approval | _Denial:
        if approval_id is None:
            return _Denial("approval_missing", "this effect needs an approval of its digest")
        row = tx.one("approval_get", {"tenant_id": tenant, "approval_id": approval_id})
        if row is None:
            return _Denial("approval_missing", "no such approval for this tenant")
        if tx.one("consumption_get", {"tenant_id": tenant, "approval_id": approval_id}):
            return _Denial("approval_consumed", "the approval was already used")
        approval = approval_from_row(row)
        if approval.proposal_id != proposal.proposal_id or approval.digest != proposal.digest:
            return _Denial("digest_mismatch", "the approval covers another proposal")
        if not approval.granted:
            return _Denial("approval_denied", "the approver denied this proposal")
        if now >= approval.expires_at:
            return _Denial("expired", "the approval has expired")
        return approval

    def _check_budget(
        self, tx: Transaction, tenant: str, proposal: Proposal, action: Action, now: datetime
    ) -> _Denial | None:
        budget = action.policy.budget()
        if budget is None:
            return None
        units, period = budget
        row = tx.one(
            "preauthorized_units_since",
            {"tenant_id": tenant, "action": action.name, "since_us": to_micros(now - period)},
        )
        spent = 0 if row is None else int(row["units"])
        if spent + proposal.units > units:
            return _Denial(
                "policy_denied",
                "the pre-authorized budget for this period is spent",
                {"policy_reason": "preauthorization_budget_exhausted", "spent": spent},
            )
        return None

    def _check_capacity(self, tx: Transaction, tenant: str, proposal: Proposal) -> _Denial | None:
        key = {"tenant_id": tenant, "pool": proposal.pool}
        limit = tx.one("capacity_limit_lock", key)
        if limit is None:
            return None
        usage = tx.one("capacity_usage", key)
        used = 0 if usage is None else int(usage["held"]) + int(usage["committed"])
        if used + proposal.units > int(limit["limit_units"]):
            return _Denial(
                "capacity_exceeded",
                f"pool {proposal.pool} has {int(limit['limit_units']) - used} units left",
                {"pool": proposal.pool},
            )
        return None

    def _preauthorize(
        self, tx: Transaction, context: Context, proposal: Proposal, version: str, now: datetime
    ) -> Approval:
        approval_id = f"preauth-{new_id()}"
        tx.run(
            "approval_insert",
            {
                "tenant_id": context.tenant_id,
                "approval_id": approval_id,
                "proposal_id": proposal.proposal_id,
                "digest": proposal.digest,
                "decision": "granted",
                "kind": "preauthorization",
                "approver_id": f"policy:{version}",
                "policy_version": version,
                "reason": None,
                "decided_us": to_micros(now),
                "expires_us": to_micros(proposal.expires_at),
            },
        )
        self.ledger.append_event(
            tx,
            tenant_id=context.tenant_id,
            operation_id=proposal.operation_id,
            actor=f"policy:{version}",
            event_type="PreauthorizationApplied",
            evidence_reference=f"approval/{approval_id}",
            details={"approval_id": approval_id, "digest": proposal.digest},
        )
        row = tx.one("approval_get", {"tenant_id": context.tenant_id, "approval_id": approval_id})
        assert row is not None
        return approval_from_row(row)

    # -- dispatch-time recheck and capacity ----------------------------------------------

    def dispatch_guard(self, worker: Context, operation: Operation) -> str | None:
        """The dispatch-time recheck: a reason to release the operation, or ``None``.

        ``worker`` is the dispatching executor's trusted identity in the operation's tenant
        (see :data:`effectledger.executor.DispatchGuard`), never a stand-in for the requester.
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
        if row is None:
            return "digest_mismatch"
        try:
            proposal = proposal_from_row(row)
        except TamperedProposal:
            return "digest_mismatch"
        if proposal.operation_id != operation.operation_id:
            return "digest_mismatch"
        action = self.registry.get(proposal.action)
        if self._now() >= proposal.expires_at:
            return "expired"
        if action.resource_version(worker, proposal.target) != proposal.resource_version:
            return "stale_resource_version"
        return None

    def set_capacity_limit(self, tenant_id: str, pool: str, units: int) -> None:
        """Set the most units a tenant's pool may hold and commit together (trusted admin)."""
        validate_identifier(tenant_id, "tenant_id")
        validate_identifier(pool, "pool")
        if not isinstance(units, int) or units < 0:
            raise InvalidInput("a capacity limit is a non-negative integer")
        now_us = to_micros(self._now())
        self._store.write(
            lambda tx: tx.run(
                "capacity_limit_set",
                {"tenant_id": tenant_id, "pool": pool, "limit_units": units, "now_us": now_us},
            ),
            label="capacity_limit",
        )

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """Held, committed and freed units of the tenant's pool, and its limit."""
        key = {"tenant_id": context.tenant_id, "pool": pool}

        def read(tx: Transaction) -> CapacityUsage:
            usage = tx.one("capacity_usage", key)
            limit = tx.one("capacity_limit_get", key)
            return CapacityUsage(
                pool=pool,
                held=0 if usage is None else int(usage["held"]),
                committed=0 if usage is None else int(usage["committed"]),
                freed=0 if usage is None else int(usage["freed"]),
                limit=None if limit is None else int(limit["limit_units"]),
            )

        result: CapacityUsage = self._store.read(read)
        return result
