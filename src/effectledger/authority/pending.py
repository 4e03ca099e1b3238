"""The reviewer's queue: the proposals of a tenant that still wait for this reviewer's decision.

A proposal waits while it is unexpired, not admitted and not denied, and fewer distinct
approvers than its policy needs have granted its digest. The queue shows a reviewer only what
they may decide: the action's policy must let them approve it (not their own proposal, unless
the policy allows it; an approver role), and they must not have approved it already.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from effectledger.actions import ActionRegistry
from effectledger.actions.policy import Policy, Tier
from effectledger.errors import InvalidInput, NotFound, TamperedProposal
from effectledger.ledger.stored import proposal_from_row
from effectledger.model import Context
from effectledger.model.authority import Proposal
from effectledger.model.operations import to_micros, validate_identifier
from effectledger.model.review import CURSOR_PATTERN, PendingPage, PendingProposal, QueueOrder
from effectledger.store import Row, Store, Transaction

__all__ = ["MAX_PAGE", "QueueFilter", "approvals_required", "pending_page"]

MAX_PAGE = 500
_LAST = 2**63 - 1
_SCANS = 20  # batches read per page before handing the reviewer a cursor to continue
_CURSOR = re.compile(CURSOR_PATTERN.removeprefix("^").removesuffix("$"))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueFilter:
    """What a reviewer narrows the queue to; ``None`` matches everything."""

    action: str | None = None
    pool: str | None = None
    proposer_id: str | None = None
    expiring_before: datetime | None = None

    def params(self) -> dict[str, object]:
        """The filter as the queue query's parameters (an empty string matches every value)."""
        before = self.expiring_before
        if before is not None and (not isinstance(before, datetime) or before.tzinfo is None):
            raise InvalidInput("expiring_before must be an aware datetime", field="expiring_before")
        return {
            "action": _identifier(self.action, "action"),
            "pool": _identifier(self.pool, "pool"),
            "proposer_id": _identifier(self.proposer_id, "proposer_id"),
            "expiring_before": _LAST if before is None else to_micros(before),
        }


def pending_page(
    store: Store,
    registry: ActionRegistry,
    reviewer: Context,
    now: datetime,
    *,
    where: QueueFilter,
    order: QueueOrder | str,
    limit: int,
    after: str | None,
) -> PendingPage:
    """One page of ``reviewer``'s queue (see the module docstring), with its cursor."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_PAGE}", field="limit")
    try:
        order = QueueOrder(order)
    except ValueError:
        raise InvalidInput("order must be 'expiring' or 'newest'", field="order") from None
    now_us = to_micros(now)
    cursor = _cursor(after, order)
    query = (
        "proposals_pending_expiring" if order is QueueOrder.EXPIRING else "proposals_pending_newest"
    )
    params = {
        **where.params(),
        "tenant_id": reviewer.tenant_id,
        "reviewer_id": reviewer.actor_id,
        "now_us": now_us,
        "limit": limit,
    }
    entries: list[PendingProposal] = []
    more = True
    for _ in range(_SCANS):
        bound = {**params, "after_us": cursor[0], "after_id": cursor[1]}
        rows = store.read(functools.partial(_rows, query=query, params=bound))
        for index, row in enumerate(rows):
            key = "expires_us" if order is QueueOrder.EXPIRING else "created_us"
            cursor = (int(row[key]), str(row["proposal_id"]))
            entry = _entry(registry, reviewer, row, now)
            if entry is not None:
                entries.append(entry)
                if len(entries) == limit:
                    more = index < len(rows) - 1 or len(rows) == limit
                    break
        if len(entries) == limit:
            break
        if len(rows) < limit:
            more = False
            break
    return PendingPage(
        entries=tuple(entries),
        next_cursor=f"{cursor[0]}.{cursor[1]}" if more else None,
        order=order,
        read_at=now,
    )


def _rows(tx: Transaction, *, query: str, params: Mapping[str, object]) -> list[Row]:
    return list(tx.all(query, params))


def _entry(
    registry: ActionRegistry, reviewer: Context, row: Row, now: datetime
) -> PendingProposal | None:
    """The queue entry of ``row`` if ``reviewer`` may still decide it, else ``None``."""
    if row["reviewer_approved"]:
        return None
    try:
        action = registry.get(row["action"])
        proposal = proposal_from_row(row)
    except (NotFound, TamperedProposal):
        # An action this application no longer declares, or an edited row: nobody can approve
        # it here (admission would refuse it), so it is not offered for a decision.
        return None
    policy = action.policy
    if policy.may_approve(reviewer, proposal) is not None:
        return None
    required = approvals_required(policy, proposal, now)
    granted = int(row["approvers"])
    if required is None or granted >= required:
        return None  # no person needed, or every approval it needs is recorded
    return PendingProposal(
        proposal=proposal,
        policy_version=proposal.policy_version,
        approvals_required=required,
        approvals_granted=granted,
        expires_at=proposal.expires_at,
        summary=None if action.display is None else action.display.text(proposal.arguments),
    )


def approvals_required(policy: Policy, proposal: Proposal, now: datetime) -> int | None:
    """How many approvers the policy asks of this proposal (``None``: it needs no person).

    The proposer's roles are not recorded, so the policy is asked as for a proposer without
    roles; a policy that refuses such a proposer is shown as needing one approver, and
    admission decides under the proposer's own roles.
    """
    proposer = Context(tenant_id=proposal.tenant_id, actor_id=proposal.proposer_id)
    decision = policy.decide(proposer, proposal, now)
    if decision.allowed and decision.tier is not Tier.APPROVAL_REQUIRED:
        return None  # read-only or pre-authorized: admission needs no reviewer
    return int(decision.approvals_required) if decision.allowed else 1


def _cursor(after: str | None, order: QueueOrder) -> tuple[int, str]:
    if after is None:
        return (0, "") if order is QueueOrder.EXPIRING else (_LAST, "")
    match = _CURSOR.fullmatch(after) if isinstance(after, str) else None
    if match is None:
        raise InvalidInput("after must be a cursor the queue returned", field="after")
    return int(match[1]), match[2]


def _identifier(value: str | None, field: str) -> str:
    return "" if value is None else validate_identifier(value, field)
