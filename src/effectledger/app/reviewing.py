"""The reviewer's desk through :class:`~effectledger.EffectLedger`: the queue, a proposal's
standing, a decision taken only while it still waits, proofs, manual reviews, notifications.

Each function is what one verb of the ledger does; each follows the one access rule
(:mod:`effectledger.app.access`): the queue is a reviewer's view of the tenant, and it offers
each reviewer only the proposals they may decide.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from effectledger.actions.registry import ActionRegistry
from effectledger.app.access import require_reader, require_writer
from effectledger.authority import Authority
from effectledger.authority.pending import QueueFilter, approvals_required, pending_page
from effectledger.authority.review import refusal_of, review_of
from effectledger.errors import ApprovalRefused, InvalidInput
from effectledger.ledger.stored import operation_from_row
from effectledger.model.authority import Approval, Proposal
from effectledger.model.operations import (
    Context,
    Operation,
    from_micros,
    to_micros,
    validate_identifier,
    validate_limit,
)
from effectledger.model.review import (
    DecisionEntry,
    DecisionPage,
    PendingPage,
    PendingProposal,
    ProposalReview,
    QueueOrder,
)
from effectledger.store import Transaction

__all__ = [
    "Notify",
    "announce",
    "decide",
    "decisions",
    "manual_reviews",
    "pending",
    "prove",
    "review",
]

Notify = Callable[[PendingProposal], None]
"""Told of each recorded proposal that needs a person's decision; must return at once."""


def announce(
    notifiers: Iterable[Notify], registry: ActionRegistry, proposal: Proposal, now: datetime
) -> None:
    """Tell ``notifiers`` of ``proposal`` if its policy needs a person's decision.

    A notifier that raises is logged and ignored: a notification never undoes or blocks the
    recorded proposal.
    """
    try:
        action = registry.get(proposal.action)
        required = approvals_required(action.policy, proposal, now)
        if required is None:
            return
        entry = PendingProposal(
            proposal=proposal,
            policy_version=proposal.policy_version,
            approvals_required=required,
            approvals_granted=0,
            expires_at=proposal.expires_at,
            summary=None if action.display is None else action.display.text(proposal.arguments),
        )
        for notify in notifiers:
            notify(entry)
    except Exception:
        logging.getLogger(__name__).exception("notifying %s failed", proposal.proposal_id)


def decisions(
    authority: Authority,
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
    """The tenant's decisions by people, newest first, a page at a time: the desk's history.

    Filter by ``decider``, ``action``, ``outcome`` (``approved`` or ``denied``), time
    (``since`` inclusive, ``until`` exclusive) and ``search`` (a target, proposal id or operation
    id, matched exactly); pass the page's ``next_cursor`` as ``after``. Needs the approver or
    auditor role; pre-authorizations are not decisions and are not listed.
    """
    require_reader(context)
    validate_limit(limit)
    for name, value in (("decider", decider), ("action", action), ("search", search)):
        if value is not None:
            validate_identifier(value, name)
    if outcome not in (None, "approved", "denied"):
        raise InvalidInput("outcome is approved or denied", field="outcome")
    before_us = before_id = None
    if after is not None:
        stamp, _, last = after.partition(".")
        if not stamp.isdigit() or not last:
            raise InvalidInput("after is a page's next_cursor", field="after")
        before_us, before_id = int(stamp), validate_identifier(last, "after")
    rows = authority.ledger.store.read(
        lambda tx: tx.all(
            "decisions_page",
            {
                "tenant_id": context.tenant_id,
                "decider": decider,
                "action": action,
                "decision": {"approved": "granted", "denied": "denied"}.get(outcome or ""),
                "since_us": None if since is None else to_micros(since),
                "until_us": None if until is None else to_micros(until),
                "search": search,
                "before_us": before_us,
                "before_id": before_id,
                "limit": limit + 1,
            },
        )
    )
    entries = tuple(
        DecisionEntry(
            approval_id=row["approval_id"],
            proposal_id=row["proposal_id"],
            operation_id=row["operation_id"],
            action=row["action"],
            target=row["target"],
            proposer_id=row["proposer_id"],
            decider_id=row["approver_id"],
            approved=row["decision"] == "granted",
            reason=row["reason"],
            decided_at=from_micros(int(row["decided_us"])),
        )
        for row in rows[:limit]
    )
    last_row = rows[limit - 1] if len(rows) > limit else None
    cursor = (
        None if last_row is None else f"{int(last_row['decided_us'])}.{last_row['approval_id']}"
    )
    return DecisionPage(entries=entries, next_cursor=cursor)


def pending(
    authority: Authority,
    context: Context,
    *,
    where: QueueFilter,
    order: QueueOrder | str,
    limit: int,
    after: str | None,
) -> PendingPage:
    """The proposals of the tenant that wait for ``context``'s decision, a page at a time.

    Unexpired, not admitted, not denied, and short of the approvals their policy needs; only
    those the action's policy lets ``context`` approve (never its own, unless the policy allows
    it) and that it has not approved yet. ``order`` is ``expiring`` (soonest first) or
    ``newest``; pass the page's ``next_cursor`` as ``after`` for the next one. Each entry says
    why it waits and when it expires. Needs the approver or auditor role.
    """
    require_reader(context)
    return pending_page(
        authority.ledger.store,
        authority.registry,
        context,
        authority.ledger.clock.now(),
        where=where,
        order=order,
        limit=limit,
        after=after,
    )


def review(authority: Authority, context: Context, proposal_id: str) -> ProposalReview:
    """Where the proposal stands for the reviewer ``context``: what its page shows.

    Waiting, approved (every approval it needs), admitted, denied or expired; the approvals still
    needed; whether the target changed since it was proposed; and whether this reviewer may
    decide it. Needs the approver or auditor role.
    """
    require_reader(context)
    proposal = authority.get_proposal(context, proposal_id)
    action = authority.registry.get(proposal.action)
    return review_of(
        authority.ledger.store, action, context, proposal, authority.ledger.clock.now()
    )


def decide(
    authority: Authority,
    context: Context,
    proposal_id: str,
    *,
    digest: str,
    approve: bool,
    reason: str | None,
) -> Approval:
    """Approve or deny the proposal with ``digest`` only while it still waits for this decision.

    Refused with :class:`~effectledger.errors.ApprovalRefused` and a reason when it expired
    (``proposal_expired``), was denied (``proposal_denied``) or admitted (``already_admitted``)
    meanwhile, already has every approval it needs (``proposal_approved``, for an approval), was
    already approved by this reviewer, its target changed (``stale_resource_version``), or the
    reviewer may not decide it (``self_approval``, ``not_an_approver``); the authority then
    checks the digest (``digest_mismatch``), the policy and the expiry again as it records it.
    """
    require_writer(context)
    standing = review(authority, context, proposal_id)  # the version callback runs here, once
    _refuse(standing, approve)
    action = authority.registry.get(standing.proposal.action)

    def still_waiting(tx: Transaction) -> None:
        # Read again under the trail lock the decision holds: racing reviewers see each
        # other's decisions, so a proposal never gets more grants than its policy needs.
        now = authority.ledger.clock.now()
        current = standing.current_resource_version
        _refuse(review_of(tx, action, context, standing.proposal, now, current=current), approve)

    if approve:
        return authority.approve(context, proposal_id, digest=digest, check=still_waiting)
    return authority.deny(
        context, proposal_id, digest=digest, reason=reason or "", check=still_waiting
    )


def _refuse(standing: ProposalReview, approve: bool) -> None:
    refused = refusal_of(standing, granting=approve)
    if refused is not None:
        code, sentence = refused
        raise ApprovalRefused(sentence, reason=code, proposal_id=standing.proposal.proposal_id)


def prove(authority: Authority, context: Context, operation_id: str) -> bytes:
    """A receipt proving the operation's sealed events are in the tenant's signed log.

    The bytes of a ``receipt`` bundle (:func:`effectledger.audit.bundles.receipt.prove_events`): the
    latest signed checkpoint and each sealed event of the operation with its inclusion proof,
    verifiable offline with ``effectledger audit verify --bundle FILE --key KEY``.
    :class:`~effectledger.errors.LogNotSealed` while no checkpoint covers its events yet. Needs
    the approver or auditor role.
    """
    from effectledger.audit.bundles.receipt import prove_events

    require_reader(context)
    events = authority.ledger.events(context, operation_id)
    ids = [event.event_id for event in events]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "receipt"
        prove_events(authority.ledger.store, context.tenant_id, ids, path)
        return path.read_bytes()


def manual_reviews(authority: Authority, context: Context, *, limit: int) -> list[Operation]:
    """The tenant's operations in MANUAL_REVIEW, soonest deadline first (approver or auditor).

    Read from an index of the operations in review alone, however long the history.
    """
    require_reader(context)
    params = {"tenant_id": context.tenant_id, "limit": validate_limit(limit)}
    rows = authority.ledger.store.read(lambda tx: tx.all("operations_in_review", params))
    return [operation_from_row(row) for row in rows]
