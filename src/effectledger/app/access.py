"""Who may read what beyond their own: the one rule every caller applies to the tenant's views.

An actor always sees its own proposals and the state of its own operations. Everything wider
(the tenant's operation list, any operation's audit trail and explanation, capacity, another
actor's proposal or operation) is a reviewer's view: it needs a role in :data:`READER_ROLES`.
The rule lives here, under :class:`~effectledger.EffectLedger`, so the Python API, the
function tools, MCP and the HTTP API refuse the same calls with the same stable code,
``not_permitted`` (:class:`~effectledger.errors.NotPermitted`, HTTP 403). Another actor's
proposal or operation reads as unknown (``not_found``), as its status does, so an id
reveals nothing.

Roles that only read never write: a context whose every role is in :data:`READ_ONLY_ROLES`
(an ``auditor``-only key, say) may not propose, decide, perform, retry, escalate or resolve
(``not_permitted``), through any caller.
"""

from __future__ import annotations

from effectledger.errors import NotFound, NotPermitted
from effectledger.model.authority import Proposal
from effectledger.model.operations import Context, Operation

__all__ = [
    "READER_ROLES",
    "READ_ONLY_ROLES",
    "is_reader",
    "require_reader",
    "require_writer",
    "visible_operation",
    "visible_proposal",
]

READER_ROLES = frozenset({"approver", "auditor"})
"""Roles that may read a tenant's operations, trails, explanations and capacity."""


def is_reader(context: Context) -> bool:
    """True when ``context`` holds a role that may read the tenant's views."""
    return not READER_ROLES.isdisjoint(context.roles)


READ_ONLY_ROLES = frozenset({"auditor"})
"""Roles that only read: a context holding nothing else writes nothing."""


def require_writer(context: Context) -> None:
    """Refuse a write to a context whose roles only read (``not_permitted``)."""
    if context.roles and context.roles <= READ_ONLY_ROLES:
        raise NotPermitted(
            "the auditor role only reads: it cannot propose, decide or perform",
            roles=sorted(context.roles),
        )


def require_reader(context: Context) -> None:
    """Refuse a tenant-wide view to a context without a reader role (``not_permitted``)."""
    if READER_ROLES.isdisjoint(context.roles):
        raise NotPermitted(
            "this view needs the approver or auditor role", needs=sorted(READER_ROLES)
        )


def visible_proposal(context: Context, proposal: Proposal) -> Proposal:
    """The proposal if ``context`` proposed it or is a reader, else ``NotFound``."""
    if proposal.proposer_id != context.actor_id and not is_reader(context):
        raise NotFound(f"no proposal {proposal.proposal_id}", proposal_id=proposal.proposal_id)
    return proposal


def visible_operation(context: Context, operation: Operation) -> Operation:
    """The operation if ``context`` requested it, owns its review or reads; else ``NotFound``."""
    owner = operation.review_owner
    if (
        operation.requester_id != context.actor_id
        and not is_reader(context)
        and (owner is None or (owner != context.actor_id and owner not in context.roles))
    ):
        raise NotFound(
            f"no operation {operation.operation_id}", operation_id=operation.operation_id
        )
    return operation
