"""The awaitable twin of :class:`~effectledger.EffectLedger`.

Every method of the sync object that touches the ledger has a twin here with the same name and
signature that runs the whole call in a worker thread, so an event loop never blocks on the database
or a destination. Every call is shielded: cancelling the awaiting task does not stop the call, which
finishes and records its outcome; :meth:`AsyncEffectLedger.close` waits for such calls before it
closes the store. Declaring actions (``action``, ``register``) and looking up an executor
(``executor_for``) are not I/O and stay synchronous. A test checks that the two surfaces cannot
drift.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from effectledger.app.connecting import connect
from effectledger.app.ledger import EffectLedger
from effectledger.app.refs import ActionRef, OperationRef, ProposalRef
from effectledger.clock import Clock
from effectledger.destinations import Destination
from effectledger.ledger import LedgerSettings
from effectledger.ledger.summary import LedgerSummary
from effectledger.model.authority import Approval, CapacityUsage, Correlation, Proposal
from effectledger.model.operations import (
    AuditEvent,
    Context,
    DispatchResult,
    Observation,
    Operation,
)
from effectledger.model.results import EffectResult
from effectledger.model.review import DecisionPage, PendingPage, ProposalReview, QueueOrder
from effectledger.workers.recovery import RecoveryReport

if TYPE_CHECKING:
    from effectledger.audit.bundles.export import ExportReport
    from effectledger.audit.explain import Sentence
    from effectledger.audit.keys.signers import Signer
    from effectledger.audit.sealing.sealer import SealReport

__all__ = ["SYNC_ONLY", "AsyncEffectLedger", "connect_async"]

T = TypeVar("T")

SYNC_ONLY = frozenset({"action", "register", "executor_for", "notify_with"})
"""Methods of :class:`EffectLedger` that declare or look up rather than do (no I/O)."""


async def connect_async(
    url: str | None = None,
    *,
    migrate: bool = True,
    clock: Clock | None = None,
    settings: LedgerSettings | None = None,
    destinations: Iterable[Destination] = (),
    signer: Signer | None = None,
    keys: Literal["find"] | None = "find",
    key_dir: str | os.PathLike[str] | None = None,
    **store_options: Any,
) -> AsyncEffectLedger:
    """:func:`~effectledger.connect`, opened in a worker thread, as an awaitable object."""
    opened = await asyncio.to_thread(
        functools.partial(
            connect,
            url,
            migrate=migrate,
            clock=clock,
            settings=settings,
            destinations=destinations,
            signer=signer,
            keys=keys,
            key_dir=key_dir,
            **store_options,
        )
    )
    return AsyncEffectLedger(opened)


class AsyncEffectLedger:
    """Awaitable twins of :class:`EffectLedger`'s methods over one sync object (``.sync``)."""

    def __init__(self, sync: EffectLedger) -> None:
        self.sync = sync
        self.action = sync.action
        self.register = sync.register
        self.executor_for = sync.executor_for
        self.notify_with = sync.notify_with
        self._running: set[asyncio.Future[Any]] = set()

    async def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # The thread is not interrupted by a cancellation: shielding keeps the outcome recorded,
        # and the set keeps the task alive (and awaited by close()) after the caller left.
        task = asyncio.ensure_future(asyncio.to_thread(functools.partial(method, *args, **kwargs)))
        self._running.add(task)
        task.add_done_callback(_settled(self._running))
        return await asyncio.shield(task)

    async def propose(
        self,
        context: Context,
        action: ActionRef,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        /,
        *,
        operation_id: str | None = None,
        correlation: Correlation | None = None,
        stated_reason: str | None = None,
        **fields: Any,
    ) -> Proposal:
        """:meth:`EffectLedger.propose`, awaitable."""
        return await self._call(
            self.sync.propose,
            context,
            action,
            arguments,
            operation_id=operation_id,
            correlation=correlation,
            stated_reason=stated_reason,
            **fields,
        )

    async def proposal(self, context: Context, proposal_id: str) -> Proposal:
        """:meth:`EffectLedger.proposal`, awaitable."""
        return await self._call(self.sync.proposal, context, proposal_id)

    async def proposal_for(self, context: Context, operation: OperationRef) -> Proposal:
        """:meth:`EffectLedger.proposal_for`, awaitable."""
        return await self._call(self.sync.proposal_for, context, operation)

    async def pending(
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
        """:meth:`EffectLedger.pending`, awaitable."""
        return await self._call(
            self.sync.pending,
            context,
            action=action,
            pool=pool,
            proposer=proposer,
            expiring_before=expiring_before,
            order=order,
            limit=limit,
            after=after,
        )

    async def decisions(
        self,
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
        """:meth:`EffectLedger.decisions`, awaitable."""
        return await self._call(
            self.sync.decisions,
            context,
            decider=decider,
            action=action,
            outcome=outcome,
            search=search,
            since=since,
            until=until,
            limit=limit,
            after=after,
        )

    async def manual_reviews(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """:meth:`EffectLedger.manual_reviews`, awaitable."""
        return await self._call(self.sync.manual_reviews, context, limit=limit)

    async def prove(self, context: Context, operation_id: str) -> bytes:
        """:meth:`EffectLedger.prove`, awaitable."""
        return await self._call(self.sync.prove, context, operation_id)

    async def review(self, context: Context, proposal_id: str) -> ProposalReview:
        """:meth:`EffectLedger.review`, awaitable."""
        return await self._call(self.sync.review, context, proposal_id)

    async def decide(
        self,
        context: Context,
        proposal_id: str,
        *,
        digest: str,
        approve: bool,
        reason: str | None = None,
    ) -> Approval:
        """:meth:`EffectLedger.decide`, awaitable."""
        return await self._call(
            self.sync.decide, context, proposal_id, digest=digest, approve=approve, reason=reason
        )

    async def approve(
        self,
        approver: Context,
        proposal: ProposalRef,
        /,
        *,
        digest: str | None = None,
        expires_in: timedelta = timedelta(hours=1),
    ) -> Approval:
        """:meth:`EffectLedger.approve`, awaitable."""
        return await self._call(
            self.sync.approve, approver, proposal, digest=digest, expires_in=expires_in
        )

    async def deny(
        self, approver: Context, proposal: ProposalRef, /, *, reason: str, digest: str | None = None
    ) -> Approval:
        """:meth:`EffectLedger.deny`, awaitable."""
        return await self._call(self.sync.deny, approver, proposal, reason=reason, digest=digest)

    async def perform(
        self,
        context: Context,
        proposal: ProposalRef,
        /,
        *,
        approval: Approval | str | None = None,
        tenant_id: str | None = None,
    ) -> EffectResult:
        """:meth:`EffectLedger.perform`, awaitable; a cancelled caller never loses the outcome."""
        return await self._call(
            self.sync.perform, context, proposal, approval=approval, tenant_id=tenant_id
        )

    async def dispatch(self, context: Context, operation: OperationRef) -> DispatchResult:
        """:meth:`EffectLedger.dispatch`, awaitable."""
        return await self._call(self.sync.dispatch, context, operation)

    async def status(self, context: Context, operation: OperationRef) -> DispatchResult:
        """:meth:`EffectLedger.status`, awaitable."""
        return await self._call(self.sync.status, context, operation)

    async def operation(self, context: Context, operation: OperationRef) -> Operation:
        """:meth:`EffectLedger.operation`, awaitable."""
        return await self._call(self.sync.operation, context, operation)

    async def operations(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """:meth:`EffectLedger.operations`, awaitable."""
        return await self._call(self.sync.operations, context, limit=limit)

    async def events(self, context: Context, operation: OperationRef) -> list[AuditEvent]:
        """:meth:`EffectLedger.events`, awaitable."""
        return await self._call(self.sync.events, context, operation)

    async def summary(self, context: Context) -> LedgerSummary:
        """:meth:`EffectLedger.summary`, awaitable."""
        return await self._call(self.sync.summary, context)

    async def explain(self, context: Context, operation: OperationRef) -> list[Sentence]:
        """:meth:`EffectLedger.explain`, awaitable."""
        return await self._call(self.sync.explain, context, operation)

    async def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """:meth:`EffectLedger.capacity`, awaitable."""
        return await self._call(self.sync.capacity, context, pool)

    async def set_capacity_limit(self, context: Context, pool: str, units: int) -> CapacityUsage:
        """:meth:`EffectLedger.set_capacity_limit`, awaitable."""
        return await self._call(self.sync.set_capacity_limit, context, pool, units)

    async def authorize_retry(
        self, context: Context, operation: OperationRef, *, max_retries: int = 1
    ) -> DispatchResult:
        """:meth:`EffectLedger.authorize_retry`, awaitable."""
        return await self._call(
            self.sync.authorize_retry, context, operation, max_retries=max_retries
        )

    async def escalate(
        self, context: Context, operation: OperationRef, *, reason: str, owner: str | None = None
    ) -> DispatchResult:
        """:meth:`EffectLedger.escalate`, awaitable."""
        return await self._call(self.sync.escalate, context, operation, reason=reason, owner=owner)

    async def resolve(
        self, context: Context, operation: OperationRef, observation: Observation
    ) -> DispatchResult:
        """:meth:`EffectLedger.resolve`, awaitable."""
        return await self._call(self.sync.resolve, context, operation, observation)

    async def reconcile(self, context: Context, operation: OperationRef) -> EffectResult:
        """:meth:`EffectLedger.reconcile`, awaitable."""
        return await self._call(self.sync.reconcile, context, operation)

    async def dispatch_ready(
        self, *, limit: int = 100, claim_batch: int = 1
    ) -> list[DispatchResult]:
        """:meth:`EffectLedger.dispatch_ready`, awaitable."""
        return await self._call(self.sync.dispatch_ready, limit=limit, claim_batch=claim_batch)

    async def recover(self, *, limit: int = 100) -> RecoveryReport:
        """:meth:`EffectLedger.recover`, awaitable."""
        return await self._call(self.sync.recover, limit=limit)

    async def seal(self, context: Context) -> SealReport:
        """:meth:`EffectLedger.seal`, awaitable."""
        return await self._call(self.sync.seal, context)

    async def seal_pending(
        self, *, witnesses: Iterable[str] = (), memory: str | os.PathLike[str] | None = None
    ) -> list[SealReport]:
        """:meth:`EffectLedger.seal_pending`, awaitable."""
        return await self._call(
            functools.partial(self.sync.seal_pending, witnesses=witnesses, memory=memory)
        )

    async def export(
        self, context: Context, path: str | Path, *, exporter_id: str | None = None
    ) -> ExportReport:
        """:meth:`EffectLedger.export`, awaitable."""
        return await self._call(self.sync.export, context, path, exporter_id=exporter_id)

    async def ping(self) -> int:
        """:meth:`EffectLedger.ping`, awaitable."""
        return await self._call(self.sync.ping)

    async def close(self) -> None:
        """Wait for calls still running (cancelled callers included), then close the store."""
        while self._running:
            await asyncio.wait(set(self._running))
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncEffectLedger:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _settled(running: set[asyncio.Future[Any]]) -> Callable[[asyncio.Future[Any]], None]:
    def done(task: asyncio.Future[Any]) -> None:
        running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here: a caller that left cannot, and it is in the ledger

    return done
