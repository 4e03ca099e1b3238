"""Policy tiers, chosen by trusted code from the actual proposal, never by the model.

A policy answers three questions about a concrete proposal:

* :meth:`Policy.decide` - may this requester have this effect at all, and under which tier:
  ``read-only`` (no approval), ``preauthorized`` (a bounded standing decision covers it) or
  ``approval-required`` (a person must approve this exact digest);
* :meth:`Policy.may_approve` - may this approver approve it (self-approval only where allowed);
* :meth:`Policy.budget` - for pre-authorization, how many units one period may spend.

:class:`RulePolicy` covers the common cases with plain Python values; a team that keeps policies
outside code can implement the same protocol over a policy engine.
"""

from __future__ import annotations

import enum
from collections.abc import Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from effectledger.model.operations import Context, DestinationRef

if TYPE_CHECKING:
    from effectledger.model.authority import Proposal

__all__ = ["Decision", "Policy", "Preauthorization", "RulePolicy", "Tier"]


class Tier(enum.StrEnum):
    """How much authority an action needs beyond the requester's own."""

    READ_ONLY = "read-only"
    PREAUTHORIZED = "preauthorized"
    APPROVAL_REQUIRED = "approval-required"


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A policy's answer for one proposal: ``tier`` when allowed, ``reason`` when not.

    ``approvals_required``: for ``approval-required``, how many distinct approvers must have
    approved the digest before it is admitted (all their approvals are consumed together).
    """

    allowed: bool
    tier: Tier | None
    policy_version: str
    reason: str | None = None
    approvals_required: int = 1

    @classmethod
    def deny(cls, policy_version: str, reason: str) -> Decision:
        """A refusal with a short, stable explanation."""
        return cls(allowed=False, tier=None, policy_version=policy_version, reason=reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class Preauthorization:
    """A bounded standing decision: what may happen without a person approving each one.

    Every bound that is set must hold: units per operation, allowed targets and destinations,
    the window it is valid in, and a budget of units per period across the tenant.
    """

    max_units_per_operation: int
    budget_units: int | None = None
    budget_period: timedelta = timedelta(days=1)
    allowed_targets: Set[str] | None = None
    allowed_destinations: Set[DestinationRef] | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None

    def covers(self, proposal: Proposal, now: datetime) -> str | None:
        """``None`` if the proposal is within every bound, else the bound it breaks."""
        if proposal.units > self.max_units_per_operation:
            return "units_over_preauthorized_limit"
        if self.allowed_targets is not None and proposal.target not in self.allowed_targets:
            return "target_not_preauthorized"
        if (
            self.allowed_destinations is not None
            and proposal.destination not in self.allowed_destinations
        ):
            return "destination_not_preauthorized"
        if self.valid_from is not None and now < self.valid_from:
            return "preauthorization_not_yet_valid"
        if self.valid_until is not None and now >= self.valid_until:
            return "preauthorization_expired"
        return None


class Policy(Protocol):
    """What trusted code consults for every proposal; ``version`` is recorded with decisions."""

    @property
    def version(self) -> str:
        """The policy version recorded on proposals, approvals and operations."""
        ...

    def decide(self, requester: Context, proposal: Proposal, now: datetime) -> Decision:
        """Whether ``requester`` may have this effect, and under which tier."""
        ...

    def may_approve(self, approver: Context, proposal: Proposal) -> str | None:
        """``None`` if ``approver`` may approve this proposal, else a reason code."""
        ...

    def budget(self) -> tuple[int, timedelta] | None:
        """The pre-authorization budget ``(units, period)``, or ``None`` for no budget."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RulePolicy:
    """A policy of plain rules.

    ``proposer_roles``: roles allowed to request the action (``None``: any actor of the tenant).
    ``approver_roles``: roles allowed to approve. ``allow_self_approval``: whether a proposer
    may approve their own proposal. ``max_units``: a hard ceiling no approval can lift.
    ``read_only``: the action has no consequential effect and needs no approval.
    ``preauthorization``: the bounds within which no person needs to approve.
    ``approvals_required``: distinct approvers needed where a person must approve.
    """

    version: str
    proposer_roles: Set[str] | None = None
    approver_roles: Set[str] = field(default_factory=lambda: frozenset({"approver"}))
    allow_self_approval: bool = False
    max_units: int | None = None
    read_only: bool = False
    preauthorization: Preauthorization | None = None
    approvals_required: int = 1

    def __post_init__(self) -> None:
        if (
            not isinstance(self.approvals_required, int)
            or isinstance(self.approvals_required, bool)
            or not 1 <= self.approvals_required <= 16
        ):
            raise ValueError("approvals_required must be an integer from 1 to 16")

    def decide(self, requester: Context, proposal: Proposal, now: datetime) -> Decision:
        """Deny outside the role or ceiling; else read-only, pre-authorized, or approval."""
        if self.proposer_roles is not None and not (requester.roles & set(self.proposer_roles)):
            return Decision.deny(self.version, "requester_role_not_allowed")
        if self.max_units is not None and proposal.units > self.max_units:
            return Decision.deny(self.version, "units_over_policy_ceiling")
        if self.read_only:
            return Decision(allowed=True, tier=Tier.READ_ONLY, policy_version=self.version)
        if (
            self.preauthorization is not None
            and self.preauthorization.covers(proposal, now) is None
        ):
            return Decision(allowed=True, tier=Tier.PREAUTHORIZED, policy_version=self.version)
        return Decision(
            allowed=True,
            tier=Tier.APPROVAL_REQUIRED,
            policy_version=self.version,
            approvals_required=self.approvals_required,
        )

    def may_approve(self, approver: Context, proposal: Proposal) -> str | None:
        """Approvers need an approver role; self-approval only when allowed."""
        if approver.actor_id == proposal.proposer_id and not self.allow_self_approval:
            return "self_approval"
        if not (approver.roles & set(self.approver_roles)):
            return "not_an_approver"
        return None

    def budget(self) -> tuple[int, timedelta] | None:
        """The pre-authorization budget, if one is set."""
        if self.preauthorization is None or self.preauthorization.budget_units is None:
            return None
        return self.preauthorization.budget_units, self.preauthorization.budget_period
