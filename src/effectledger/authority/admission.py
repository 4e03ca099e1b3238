"""Admission: the one transaction that turns authority into an operation, or refuses it.

Plain functions over an open transaction, called by :meth:`effectledger.authority.Authority.admit`.
Every total that gates an admission is read and written under one lock (docs/design.md, invariant
15): the operation's trail first (so concurrent admissions of one proposal serialize, and the exact
replay finds the winner's operation), then the action's pre-authorization budget, then the pool's
capacity, always in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from effectledger.actions.policy import Decision, Tier
from effectledger.actions.registry import Action
from effectledger.ledger import (
    Ledger,
    TrailHead,
    append_event,
    draft_checked,
    insert_operation_row,
    lock_scope,
    lock_trail,
    new_id,
    trail_head,
)
from effectledger.ledger.stored import approval_from_row, operation_from_row
from effectledger.ledger.validation import reference as checked_reference
from effectledger.model.authority import Approval, Proposal
from effectledger.model.operations import (
    Command,
    Context,
    Operation,
    PreparedAttempt,
    Row,
    to_micros,
)
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = ["Admission", "AdmissionRequest", "Denial", "admit_proposal"]


@dataclass(slots=True)
class Denial:
    """Why an admission was refused: a stable reason code, a message, non-secret details."""

    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Admission:
    """The operation admitted for a proposal; ``replayed`` when an earlier call admitted it.

    ``claim`` is the committed claim when the admission also claimed the operation in its own
    transaction (only this call may submit it), else ``None``.
    """

    operation: Operation
    replayed: bool
    claim: PreparedAttempt | None = None
    # What this call's admission inserted and consumed, for a claim in the same transaction.
    row: Row | None = field(default=None, repr=False, compare=False)
    approvals: tuple[Approval, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What one admission decides on: who asks, for which proposal of which action, presenting
    which approval (``None``: none), and the target's resource version as the application read
    it just before the transaction."""

    context: Context
    proposal: Proposal
    action: Action
    approval_id: str | None
    current_version: str


def admit_proposal(
    tx: Transaction, ledger: Ledger, request: AdmissionRequest, now: datetime
) -> Admission | Denial:
    """Admit the request's proposal in ``tx``, or refuse it and append its ``AdmissionDenied``."""
    context, proposal = request.context, request.proposal
    lock_trail(tx, context.tenant_id, proposal.operation_id)
    outcome = _decide(tx, ledger, request, now)
    if isinstance(outcome, Denial):
        append_event(
            tx,
            ledger,
            tenant_id=context.tenant_id,
            operation_id=proposal.operation_id,
            actor=context.actor_id,
            event_type=EventType.ADMISSION_DENIED,
            details={"reason": outcome.reason},
        )
    return outcome


def _decide(
    tx: Transaction, ledger: Ledger, request: AdmissionRequest, now: datetime
) -> Admission | Denial:
    context, proposal, action = request.context, request.proposal, request.action
    approval_id, current_version = request.approval_id, request.current_version
    tenant = context.tenant_id
    if context.actor_id != proposal.proposer_id:
        return Denial("actor_mismatch", "only the proposer's own context may admit it")
    # Whether it was admitted, the proposal's denial, the presented approval and its
    # consumption, and the trail's head: one read.
    authority = tx.one(
        "admission_approval",
        {
            "tenant_id": tenant,
            "operation_id": proposal.operation_id,
            "proposal_id": proposal.proposal_id,
            "approval_id": approval_id,
        },
    )
    if authority is None or authority["admitted"]:
        existing = tx.one(
            "operation_get", {"tenant_id": tenant, "operation_id": proposal.operation_id}
        )
        if existing is not None:
            if existing["proposal_id"] == proposal.proposal_id:
                # The proposer's perform of an admitted proposal is a replay, whichever approval
                # it presents (a racing approver's, say): nothing is spent, the recorded state
                # answers.
                return Admission(operation=operation_from_row(existing), replayed=True)
            return Denial("approval_consumed", "this proposal was admitted with other authority")
    if authority is not None and authority["denied_by"] is not None:
        denial = tx.one(
            "proposal_denial", {"tenant_id": tenant, "proposal_id": proposal.proposal_id}
        )
        return Denial(
            "approval_denied",
            "an approver denied this proposal: a denial is final",
            {
                "denied_by": authority["denied_by"],
                "denial_note": None if denial is None else denial["reason"],
            },
        )
    if now >= proposal.expires_at:
        return Denial("expired", "the proposal has expired")
    if current_version != proposal.resource_version:
        return Denial(
            "stale_resource_version",
            "the target changed since the proposal was made",
            {"proposed": proposal.resource_version, "current": current_version},
        )
    decision = action.policy.decide(context, proposal, now)
    if not decision.allowed or decision.tier is None:
        return Denial(
            "policy_denied",
            "policy does not allow this effect",
            {"policy_reason": decision.reason or "denied"},
        )
    approvals: list[Approval] = []
    if decision.tier is Tier.APPROVAL_REQUIRED or approval_id is not None:
        found = _approvals(tx, tenant, proposal, approval_id, authority, decision, now)
        if isinstance(found, Denial):
            return found
        approvals = found
    elif decision.tier is Tier.PREAUTHORIZED:
        spent = _check_budget(tx, tenant, proposal, action, now)
        if spent is not None:
            return spent
    over = _check_capacity(tx, tenant, proposal)
    if over is not None:
        return over
    # The trail's head as read above, unless this admission appends to the trail first.
    head: TrailHead | None = None if authority is None else trail_head(authority)
    if not approvals and decision.tier is Tier.PREAUTHORIZED:
        approvals = [_preauthorize(tx, ledger, context, proposal, decision.policy_version, now)]
        head = None
    if approvals:  # an approval id the ledger stored: a reference as it is
        reference = f"approval/{approvals[0].approval_id}"
    else:  # the application's policy version: checked as any reference
        reference = f"policy/{decision.policy_version}/{decision.tier.value}"
        checked_reference(reference, "admission_reference")
    # The proposal's values were checked when it was proposed, and its digest recomputed when
    # it was read: not checked again.
    draft = draft_checked(
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
        approval_id=approvals[0].approval_id if approvals else None,
        pool=proposal.pool,
        units=proposal.units,
    )
    row, _ = insert_operation_row(tx, ledger, draft, head=head)  # the trail is held: id free
    for approval in approvals:
        tx.run(
            "consumption_insert",
            {
                "tenant_id": tenant,
                "approval_id": approval.approval_id,
                "operation_id": proposal.operation_id,
                "now_us": to_micros(now),
            },
        )
    return Admission(
        operation=operation_from_row(row), replayed=False, row=row, approvals=tuple(approvals)
    )


def _approvals(
    tx: Transaction,
    tenant: str,
    proposal: Proposal,
    approval_id: str | None,
    authority: Row | None,
    decision: Decision,
    now: datetime,
) -> list[Approval] | Denial:
    """The approvals this admission consumes: the one presented first, then co-approvers.

    ``authority`` is the ``admission_approval`` row: the presented approval's columns (all
    ``NULL`` when there is no such approval) and whether it was consumed.
    """
    if approval_id is None:
        return Denial("approval_missing", "this effect needs an approval of its digest")
    if authority is None or authority["approval_id"] is None:
        return Denial("approval_missing", "no such approval for this tenant")
    if authority["consumed"]:
        return Denial("approval_consumed", "the approval was already used")
    presented = approval_from_row(authority)
    if presented.proposal_id != proposal.proposal_id or presented.digest != proposal.digest:
        return Denial("digest_mismatch", "the approval covers another proposal")
    if not presented.granted:
        return Denial(
            "approval_denied",
            "the approver denied this proposal",
            {"denied_by": presented.approver_id, "denial_note": presented.reason},
        )
    if now >= presented.expires_at:
        return Denial("expired", "the approval has expired")
    chosen = [presented]
    if decision.tier is Tier.APPROVAL_REQUIRED and decision.approvals_required > 1:
        approvers = {presented.approver_id}
        for other in tx.all(
            "proposal_grants", {"tenant_id": tenant, "proposal_id": proposal.proposal_id}
        ):
            candidate = approval_from_row(other)
            if (
                candidate.approver_id not in approvers
                and candidate.digest == proposal.digest
                and now < candidate.expires_at
            ):
                approvers.add(candidate.approver_id)
                chosen.append(candidate)
        if len(approvers) < decision.approvals_required:
            return Denial(
                "approval_missing",
                f"this effect needs {decision.approvals_required} distinct approvers; "
                f"{len(approvers)} approved",
                {"approvers": len(approvers), "required": decision.approvals_required},
            )
        chosen = chosen[: decision.approvals_required]
    return chosen


def _check_budget(
    tx: Transaction, tenant: str, proposal: Proposal, action: Action, now: datetime
) -> Denial | None:
    budget = action.policy.budget()
    if budget is None:
        return None
    units, period = budget
    lock_scope(tx, tenant, f"budget:{action.name}")
    row = tx.one(
        "preauthorized_units_since",
        {"tenant_id": tenant, "action": action.name, "since_us": to_micros(now - period)},
    )
    spent = 0 if row is None else int(row["units"])
    if spent + proposal.units > units:
        return Denial(
            "policy_denied",
            "the pre-authorized budget for this period is spent",
            {"policy_reason": "preauthorization_budget_exhausted", "spent": spent},
        )
    return None


def _check_capacity(tx: Transaction, tenant: str, proposal: Proposal) -> Denial | None:
    key = {"tenant_id": tenant, "pool": proposal.pool}
    lock_scope(tx, tenant, f"pool:{proposal.pool}")
    limit = tx.one("capacity_limit_get", key)
    if limit is None:
        return None
    usage = tx.one("capacity_usage", key)
    used = 0 if usage is None else int(usage["held"]) + int(usage["committed"])
    if used + proposal.units > int(limit["limit_units"]):
        return Denial(
            "capacity_exceeded",
            f"pool {proposal.pool} has {int(limit['limit_units']) - used} units left",
            {"pool": proposal.pool},
        )
    return None


def _preauthorize(
    tx: Transaction,
    ledger: Ledger,
    context: Context,
    proposal: Proposal,
    version: str,
    now: datetime,
) -> Approval:
    approval_id = f"preauth-{new_id()}"
    append_event(
        tx,
        ledger,
        tenant_id=context.tenant_id,
        operation_id=proposal.operation_id,
        actor=f"policy:{version}",
        event_type=EventType.PREAUTHORIZATION_APPLIED,
        evidence_reference=f"approval/{approval_id}",
        details={"approval_id": approval_id, "digest": proposal.digest},
    )
    row = {
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
    }
    tx.run("approval_insert", row)
    return approval_from_row(row)
