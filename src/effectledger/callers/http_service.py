"""What the HTTP API needs from effectledger: a small protocol, and its adapter over the service.

The routes in :mod:`effectledger.callers.http_api` call only the methods of :class:`EffectAPI`,
so any object that offers them can stand behind the API. :class:`ServiceAPI` is that object for
an :class:`~effectledger.service.EffectService`: every call goes to the same service, ledger and
authority the Python API uses, with the same trusted context, so an HTTP caller gets no easier
(and no other) policy than a direct one.

Reads beyond one's own proposals and operations (the tenant's operation list, audit trails,
explanations, capacity, other actors' proposals) are reviewers' views: they need the
``approver`` or ``auditor`` role. Another actor's proposal reads as unknown, like its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Protocol

from effectledger.authority import Approval, CapacityUsage, Correlation, Proposal
from effectledger.errors import NotFound, NotPermitted
from effectledger.model import AuditEvent, Context, DispatchResult, Operation
from effectledger.service import EffectResult, EffectService

__all__ = ["READER_ROLES", "EffectAPI", "ServiceAPI"]

READER_ROLES = frozenset({"approver", "auditor"})
"""Roles that may read a tenant's operations, trails, explanations and capacity."""


class EffectAPI(Protocol):
    """The calls the HTTP API makes; each takes the authenticated context first."""

    def propose(
        self,
        context: Context,
        action: str,
        arguments: Mapping[str, Any],
        *,
        operation_id: str | None,
        correlation: Correlation | None,
    ) -> Proposal:
        """Record a proposal (see :meth:`EffectService.propose`)."""
        ...

    def proposal(self, context: Context, proposal_id: str) -> Proposal:
        """The proposal (digest rechecked) for its proposer or a reviewer, else ``NotFound``."""
        ...

    def approve(
        self, context: Context, proposal_id: str, *, digest: str, expires_in: timedelta
    ) -> Approval:
        """Approve exactly the proposal with ``digest``."""
        ...

    def deny(self, context: Context, proposal_id: str, *, digest: str, reason: str) -> Approval:
        """Deny the proposal with ``digest`` (final)."""
        ...

    def perform(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None,
        tenant_id: str | None,
    ) -> EffectResult:
        """Admit and dispatch once, or report the recorded state; denials are results."""
        ...

    def status(self, context: Context, operation_id: str) -> DispatchResult:
        """The recorded state of the caller's own operation, or ``NotFound``."""
        ...

    def operations(self, context: Context, *, limit: int) -> list[Operation]:
        """The tenant's most recent operations (reviewers only)."""
        ...

    def events(self, context: Context, operation_id: str) -> list[AuditEvent]:
        """The audit trail under an operation id (reviewers only)."""
        ...

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """Held, committed and freed units of a pool (reviewers only)."""
        ...

    def ping(self) -> int:
        """The store's schema version; raises a ``StorageError`` if the store does not answer."""
        ...


def _require_reader(context: Context) -> None:
    if not context.roles & READER_ROLES:
        raise NotPermitted(
            "this view needs the approver or auditor role", needs=sorted(READER_ROLES)
        )


class ServiceAPI:
    """:class:`EffectAPI` over one :class:`EffectService` (and its ledger and authority)."""

    def __init__(self, service: EffectService) -> None:
        self.service = service

    def propose(
        self,
        context: Context,
        action: str,
        arguments: Mapping[str, Any],
        *,
        operation_id: str | None,
        correlation: Correlation | None,
    ) -> Proposal:
        """See :meth:`EffectAPI.propose`."""
        return self.service.propose(
            context, action, arguments, operation_id=operation_id, correlation=correlation
        )

    def proposal(self, context: Context, proposal_id: str) -> Proposal:
        """See :meth:`EffectAPI.proposal`: its proposer's, or a reviewer's, to see."""
        proposal = self.service.authority.get_proposal(context, proposal_id)
        if proposal.proposer_id != context.actor_id and not context.roles & READER_ROLES:
            # Told apart from an unknown id by nothing, as with another requester's status.
            raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
        return proposal

    def approve(
        self, context: Context, proposal_id: str, *, digest: str, expires_in: timedelta
    ) -> Approval:
        """See :meth:`EffectAPI.approve`."""
        return self.service.approve(context, proposal_id, digest=digest, expires_in=expires_in)

    def deny(self, context: Context, proposal_id: str, *, digest: str, reason: str) -> Approval:
        """See :meth:`EffectAPI.deny`."""
        return self.service.deny(context, proposal_id, digest=digest, reason=reason)

    def perform(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None,
        tenant_id: str | None,
    ) -> EffectResult:
        """See :meth:`EffectAPI.perform`."""
        return self.service.perform(
            context, proposal_id, approval_id=approval_id, tenant_id=tenant_id
        )

    def status(self, context: Context, operation_id: str) -> DispatchResult:
        """See :meth:`EffectAPI.status`."""
        return self.service.ledger.status(context, operation_id)

    def operations(self, context: Context, *, limit: int) -> list[Operation]:
        """See :meth:`EffectAPI.operations`."""
        _require_reader(context)
        return self.service.ledger.list_operations(context, limit=limit)

    def events(self, context: Context, operation_id: str) -> list[AuditEvent]:
        """See :meth:`EffectAPI.events`."""
        _require_reader(context)
        return self.service.ledger.events(context, operation_id)

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """See :meth:`EffectAPI.capacity`."""
        _require_reader(context)
        return self.service.authority.capacity(context, pool)

    def ping(self) -> int:
        """See :meth:`EffectAPI.ping`."""
        row = self.service.ledger.store.one("store_ping", {})
        return 0 if row is None or row["schema_version"] is None else int(row["schema_version"])
