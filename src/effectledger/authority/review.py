"""One proposal's standing for a reviewer, and a decision taken only while it still waits.

The reviewer's page shows a proposal with a digest; by the time the reviewer decides, the
proposal may have expired, been decided by someone else, been admitted, or its target may have
changed. :func:`review_of` reads where it stands; :func:`refusal_of` names why a decision on it
would be refused, before the approval or denial itself is attempted (which checks the digest,
the policy and the expiry again under its lock).
"""

from __future__ import annotations

from datetime import datetime

from effectledger.actions import Action
from effectledger.authority.pending import approvals_required
from effectledger.model import Context
from effectledger.model.authority import Proposal
from effectledger.model.operations import to_micros
from effectledger.model.review import ProposalReview, ReviewState
from effectledger.store import Store, Transaction

__all__ = ["refusal_of", "review_of"]


_ASK = object()


def review_of(
    source: Store | Transaction,
    action: Action,
    reviewer: Context,
    proposal: Proposal,
    now: datetime,
    *,
    current: str | object | None = _ASK,
) -> ProposalReview:
    """Where ``proposal`` stands for ``reviewer`` at ``now`` (one read, plus the version read).

    ``source`` is the store, or a decision's own transaction (then the standing is read under
    the trail lock the decision holds). ``current``, when given, is the target's version read
    before, so no application callback runs inside a transaction.
    """
    row = source.one(
        "proposal_review",
        {
            "tenant_id": proposal.tenant_id,
            "operation_id": proposal.operation_id,
            "proposal_id": proposal.proposal_id,
            "digest": proposal.digest,
            "reviewer_id": reviewer.actor_id,
            "now_us": to_micros(now),
        },
    )
    assert row is not None  # a SELECT of scalar subqueries returns one row
    required = approvals_required(action.policy, proposal, now) or 1
    granted = int(row["approvers"])
    if row["admitted"]:
        state = ReviewState.ADMITTED
    elif row["denied_by"] is not None:
        state = ReviewState.DENIED
    elif now >= proposal.expires_at:
        state = ReviewState.EXPIRED
    elif granted >= required:
        state = ReviewState.APPROVED
    else:
        state = ReviewState.WAITING
    if current is _ASK:
        try:
            current = action.resource_version(reviewer, proposal.target)
        except Exception:  # an application callback: its failure must not hide the page
            current = None
    return ProposalReview(
        proposal=proposal,
        state=state,
        approvals_required=required,
        approvals_granted=granted,
        reviewer_approved=bool(row["reviewer_approved"]),
        denied_by=row["denied_by"],
        denial_reason=row["denial_reason"],
        current_resource_version=current if isinstance(current, str) else None,
        refusal=action.policy.may_approve(reviewer, proposal),
        read_at=now,
    )


def refusal_of(review: ProposalReview, *, granting: bool) -> tuple[str, str] | None:
    """``(reason, sentence)`` when a decision on the reviewed proposal must be refused
    (:meth:`~effectledger.model.review.ProposalReview.refusal_to`)."""
    return review.refusal_to(granting=granting)
