"""What a reviewer's desk reads through :class:`~effectledger.app.EffectLedger`: the queue.

:class:`ReviewerViews` is mixed into ``EffectLedger``; its methods follow the one access rule
(:mod:`effectledger.access`): the queue is a reviewer's view of the tenant, and it offers each
reviewer only the proposals they may decide.
"""

from __future__ import annotations

from datetime import datetime

from effectledger.access import require_reader
from effectledger.actions import ActionRegistry
from effectledger.authority.pending import QueueFilter, pending_page
from effectledger.ledger import Ledger
from effectledger.model import Context
from effectledger.queue import PendingPage, QueueOrder
from effectledger.store import Store

__all__ = ["ReviewerViews"]


class ReviewerViews:
    """The queue of proposals waiting for a decision (part of ``EffectLedger``)."""

    store: Store
    ledger: Ledger
    registry: ActionRegistry

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
