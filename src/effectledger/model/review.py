"""The reviewer's queue as records: a proposal that waits for a decision, and a page of them.

:meth:`effectledger.app.EffectLedger.pending` returns a :class:`PendingPage`; every caller (HTTP,
MCP, the command line, the reviewer's pages) shows the same entries, each saying why it waits
and when it expires.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from effectledger.model.authority import Proposal

__all__ = [
    "CURSOR_PATTERN",
    "DecisionEntry",
    "DecisionPage",
    "PendingPage",
    "PendingProposal",
    "QueueOrder",
    "expiry_phrase",
]


CURSOR_PATTERN = r"^(\d{1,19})\.([A-Za-z0-9][A-Za-z0-9._:@-]{0,127})$"
"""What a queue page's ``next_cursor`` looks like (the HTTP API's schema states the same)."""


class QueueOrder(enum.StrEnum):
    """The order of the queue: soonest-expiring first, or newest first."""

    EXPIRING = "expiring"
    NEWEST = "newest"


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingProposal:
    """A proposal no decision has closed yet, as a reviewer is shown it in the queue.

    ``approvals_required`` distinct approvers must grant its digest; ``approvals_granted``
    already have (grants still live). ``expires_at`` is the proposal's expiry: past it no
    approval is taken and its admission is denied ``expired``, so the proposer must propose
    again and a reviewer decide the new proposal.
    """

    proposal: Proposal
    policy_version: str
    approvals_required: int
    approvals_granted: int
    expires_at: datetime
    summary: str | None = None
    """The action's declared one-line summary of the arguments (``Refund 7.00 GBP on order
    ord-1001``), exact: reveal it before showing it; ``None`` when the action declares none."""

    @property
    def approvals_remaining(self) -> int:
        """How many more distinct approvers must grant the digest before it can be admitted."""
        return max(self.approvals_required - self.approvals_granted, 0)

    @property
    def waits_for(self) -> str:
        """Why the proposal waits, in one sentence."""
        needed = self.approvals_remaining
        approvers = "approver" if self.approvals_required == 1 else "distinct approvers"
        if needed == 0:
            return (
                f"policy {self.policy_version} needs {self.approvals_required} {approvers}; "
                "all have approved, so it waits for the proposer to perform it"
            )
        return (
            f"policy {self.policy_version} needs {self.approvals_required} {approvers}; "
            f"{self.approvals_granted} approved, {needed} more needed"
        )

    def expires_in(self, now: datetime) -> timedelta:
        """Time left before expiry at ``now`` (zero once expired)."""
        return max(self.expires_at - now, timedelta(0))

    def to_dict(self, now: datetime) -> dict[str, Any]:
        """The JSON every caller returns for this entry (the proposal nested as it is shown)."""
        proposal = self.proposal
        return {
            "proposal_id": proposal.proposal_id,
            "operation_id": proposal.operation_id,
            "action": proposal.action,
            "contract_version": proposal.contract_version,
            "proposer_id": proposal.proposer_id,
            "target": proposal.target,
            "arguments": dict(proposal.arguments),
            "units": proposal.units,
            "pool": proposal.pool,
            "digest": proposal.digest,
            "created_at": proposal.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "expires_in_seconds": int(self.expires_in(now).total_seconds()),
            "expires": expiry_phrase(self.expires_at, now),
            "policy_version": self.policy_version,
            "approvals_required": self.approvals_required,
            "approvals_granted": self.approvals_granted,
            "approvals_remaining": self.approvals_remaining,
            "waits_for": self.waits_for,
            "summary": self.summary,
            "stated_reason": proposal.stated_reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingPage:
    """One page of the queue; ``next_cursor`` continues it (``None``: nothing more)."""

    entries: tuple[PendingProposal, ...]
    next_cursor: str | None
    order: QueueOrder
    read_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """The JSON of the page: its entries, the cursor and when it was read."""
        return {
            "state": "pending",
            "order": self.order.value,
            "read_at": self.read_at.isoformat(),
            "next_cursor": self.next_cursor,
            "proposals": [entry.to_dict(self.read_at) for entry in self.entries],
        }


def expiry_phrase(expires_at: datetime, now: datetime) -> str:
    """``expires in 14 min 3 s (at 2026-...)`` or ``expired 2 min ago``: what every page says."""
    left = expires_at - now
    at = expires_at.replace(microsecond=0).isoformat()
    if left <= timedelta(0):
        return f"expired {_span(-left)} ago (at {at}): a new proposal needs a new decision"
    return f"expires in {_span(left)} (at {at})"


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"


class ReviewState(enum.StrEnum):
    """Where a proposal stands for a reviewer."""

    WAITING = "waiting"
    """Unexpired, undecided, short of the approvals its policy needs."""
    APPROVED = "approved"
    """Enough distinct approvers granted its digest; it waits for the proposer to perform it."""
    ADMITTED = "admitted"
    """Its operation exists: the decision was spent, the effect is under way or done."""
    DENIED = "denied"
    """A reviewer denied it: final."""
    EXPIRED = "expired"
    """Past its expiry without admission: nobody can approve it any more."""


_NEXT = {
    ReviewState.WAITING: "it waits for a decision",
    ReviewState.APPROVED: (
        "it has every approval it needs and waits for the proposer to perform it; no further "
        "decision is needed"
    ),
    ReviewState.ADMITTED: (
        "it was admitted: its approval is spent and its operation decides what happens next; "
        "no decision can change it"
    ),
    ReviewState.DENIED: "it was denied, and a denial is final: a new decision needs a new proposal",
    ReviewState.EXPIRED: (
        "it expired before it was admitted: the agent must propose again, and a reviewer decide "
        "the new proposal"
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalReview:
    """One proposal as its page shows it to a reviewer: its standing and what they may do.

    ``current_resource_version`` is the target's version read now (``None`` when it could not be
    read); when it differs from the proposal's, the proposal is stale and admission would deny
    it. ``refusal`` is why this reviewer may not decide it (``self_approval``,
    ``not_an_approver``), or ``None``.
    """

    proposal: Proposal
    state: ReviewState
    approvals_required: int
    approvals_granted: int
    reviewer_approved: bool
    denied_by: str | None
    denial_reason: str | None
    current_resource_version: str | None
    refusal: str | None
    read_at: datetime

    @property
    def approvals_remaining(self) -> int:
        """How many more distinct approvers must grant the digest."""
        return max(self.approvals_required - self.approvals_granted, 0)

    @property
    def stale(self) -> bool:
        """True when the target changed since the proposal was made."""
        current = self.current_resource_version
        return current is not None and current != self.proposal.resource_version

    def refusal_to(self, *, granting: bool) -> tuple[str, str] | None:
        """``(reason, sentence)`` when this reviewer's approval (``granting``) or denial of the
        proposal must be refused now, else ``None``: the page offers only decisions it would
        take. A proposal admitted is refused ``already_admitted``, as the authority refuses it.
        """
        if self.refusal is not None:
            return self.refusal, _REFUSALS.get(self.refusal, self.refusal)
        if self.state is not ReviewState.WAITING and not (
            self.state is ReviewState.APPROVED and not granting
        ):
            code = (
                "already_admitted"
                if self.state is ReviewState.ADMITTED
                else f"proposal_{self.state.value}"
            )
            return code, f"This proposal is {self.state.value}: {self.standing}."
        if granting and self.reviewer_approved:
            return "already_approved", "You approved this proposal already; another approver must."
        if granting and self.stale:
            return "stale_resource_version", f"Not approved: {self.standing}."
        return None

    @property
    def standing(self) -> str:
        """Where the proposal stands and what a new decision needs, in one sentence."""
        if self.state is ReviewState.WAITING and self.stale:
            return (
                f"its target changed (version {self.proposal.resource_version} is now "
                f"{self.current_resource_version}): admission would deny it, so the agent must "
                "propose again against the current version"
            )
        if self.state is ReviewState.DENIED:
            return f"it was denied by {self.denied_by} ({self.denial_reason}); {_NEXT[self.state]}"
        return _NEXT[self.state]


_REFUSALS = {
    "self_approval": "You proposed this yourself; its policy needs another person to approve it.",
    "not_an_approver": "Your roles do not include one this action's policy lets approve it.",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionEntry:
    """One decision a person made, as the desk's history lists it."""

    approval_id: str
    proposal_id: str
    operation_id: str
    action: str
    target: str
    proposer_id: str
    decider_id: str
    approved: bool
    reason: str | None
    decided_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionPage:
    """One page of the history, newest first; ``next_cursor`` continues it (``None``: done)."""

    entries: tuple[DecisionEntry, ...]
    next_cursor: str | None
