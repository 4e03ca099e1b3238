"""What a reviewer's desk reads through :class:`~effectledger.app.EffectLedger`: the queue.

:class:`ReviewerViews` is mixed into ``EffectLedger``; its methods follow the one access rule
(:mod:`effectledger.access`): the queue is a reviewer's view of the tenant, and it offers each
reviewer only the proposals they may decide.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from effectledger.access import require_reader
from effectledger.actions import ActionRegistry
from effectledger.authority.pending import QueueFilter, approvals_required, pending_page
from effectledger.authority.review import refusal_of, review_of
from effectledger.errors import ApprovalRefused
from effectledger.ledger import Ledger
from effectledger.model import Context, Operation, validate_limit
from effectledger.proposals import Approval, Proposal
from effectledger.review_queue import PendingPage, PendingProposal, ProposalReview, QueueOrder
from effectledger.rows import operation_from_row
from effectledger.service import EffectService
from effectledger.store import Store

__all__ = ["Notify", "ReviewerViews"]

Notify = Callable[[PendingProposal], None]
"""Told of each recorded proposal that needs a person's decision; must return at once."""


class ReviewerViews:
    """The queue of proposals waiting for a decision (part of ``EffectLedger``)."""

    store: Store
    ledger: Ledger
    registry: ActionRegistry
    service: EffectService
    _notifiers: tuple[Notify, ...] = ()

    def notify_with(self, notifier: Notify) -> None:
        """Tell ``notifier`` of every proposal that needs a decision, once it is recorded.

        :class:`~effectledger.callers.notify.WebhookNotifier` posts them to webhooks. A
        notifier that raises is logged and ignored: the proposal stands.
        """
        self._notifiers = (*self._notifiers, notifier)

    def _proposed(self, proposal: Proposal) -> None:
        """Announce ``proposal`` to the notifiers if its policy needs a person's decision."""
        if not self._notifiers:
            return
        try:
            action = self.registry.get(proposal.action)
            required = approvals_required(action.policy, proposal, self.ledger.clock.now())
            if required is None:
                return
            entry = PendingProposal(
                proposal=proposal,
                policy_version=proposal.policy_version,
                approvals_required=required,
                approvals_granted=0,
                expires_at=proposal.expires_at,
            )
            for notify in self._notifiers:
                notify(entry)
        except Exception:  # a notification never undoes or blocks the recorded proposal
            logging.getLogger(__name__).exception("notifying %s failed", proposal.proposal_id)

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
        """The proposals of the tenant that wait for ``context``'s decision, a page at a time.

        Unexpired, not admitted, not denied, and short of the approvals their policy needs;
        only those the action's policy lets ``context`` approve (never its own, unless the
        policy allows it) and that it has not approved yet. Filter by ``action``, ``pool``,
        ``proposer`` and ``expiring_before``; ``order`` is ``expiring`` (soonest first) or
        ``newest``; pass the page's ``next_cursor`` as ``after`` for the next one. Each entry
        says why it waits and when it expires. Needs the approver or auditor role.
        """
        require_reader(context)
        return pending_page(
            self.store,
            self.registry,
            context,
            self.ledger.clock.now(),
            where=QueueFilter(
                action=action, pool=pool, proposer_id=proposer, expiring_before=expiring_before
            ),
            order=order,
            limit=limit,
            after=after,
        )

    def review(self, context: Context, proposal_id: str) -> ProposalReview:
        """Where the proposal stands for the reviewer ``context``: what its page shows.

        Waiting, approved (every approval it needs), admitted, denied or expired; the approvals
        still needed; whether the target changed since it was proposed; and whether this
        reviewer may decide it. Needs the approver or auditor role.
        """
        require_reader(context)
        proposal = self.service.authority.get_proposal(context, proposal_id)
        action = self.registry.get(proposal.action)
        return review_of(self.store, action, context, proposal, self.ledger.clock.now())

    def decide(
        self,
        context: Context,
        proposal_id: str,
        *,
        digest: str,
        approve: bool,
        reason: str | None = None,
    ) -> Approval:
        """Approve or deny the proposal with ``digest`` only while it still waits for this decision.

        What a reviewer's page calls. Refused with :class:`ApprovalRefused` and a reason when it
        expired (``proposal_expired``), was denied (``proposal_denied``) or admitted
        (``proposal_admitted``) meanwhile, already has every approval it needs
        (``proposal_approved``, for an approval), was already approved by this reviewer, its
        target changed (``stale_resource_version``), or the reviewer may not decide it
        (``self_approval``, ``not_an_approver``); the ledger then checks the digest
        (``digest_mismatch``), the policy and the expiry again as it records the decision.
        """
        review = self.review(context, proposal_id)
        refused = refusal_of(review, granting=approve)
        if refused is not None:
            code, sentence = refused
            raise ApprovalRefused(sentence, reason=code, proposal_id=review.proposal.proposal_id)
        if approve:
            return self.service.approve(context, proposal_id, digest=digest)
        return self.service.deny(context, proposal_id, digest=digest, reason=reason or "")

    def prove(self, context: Context, operation_id: str) -> bytes:
        """A receipt proving the operation's sealed events are in the tenant's signed log.

        The bytes of a ``receipt`` bundle (:func:`effectledger.audit.receipt.prove_events`):
        the latest signed checkpoint and each sealed event of the operation with its inclusion
        proof, verifiable offline with ``effectledger audit verify --bundle FILE --key KEY``.
        :class:`~effectledger.errors.LogNotSealed` while no checkpoint covers its events yet.
        Needs the approver or auditor role.
        """
        from effectledger.audit.receipt import prove_events

        require_reader(context)
        events = self.ledger.events(context, operation_id)
        ids = [event.event_id for event in events]
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "receipt"
            prove_events(self.store, context.tenant_id, ids, path)
            return path.read_bytes()

    def manual_reviews(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """The tenant's operations in MANUAL_REVIEW, soonest deadline first (approver or auditor).

        Read from an index of the operations in review alone, however long the history.
        """
        require_reader(context)
        params = {"tenant_id": context.tenant_id, "limit": validate_limit(limit)}
        rows = self.store.read(lambda tx: tx.all("operations_in_review", params))
        return [operation_from_row(row) for row in rows]
