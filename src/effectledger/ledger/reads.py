"""What the ledger holds, read without writing: operations, their attempts and their trails.

Every read is scoped by the trusted context's tenant; another tenant's operation is reported as
not found, never described.
"""

from __future__ import annotations

from effectledger.errors import NotFound
from effectledger.events.record import event_from_row
from effectledger.ledger.stored import attempt_from_row, operation_from_row
from effectledger.ledger.trail import key
from effectledger.ledger.validation import checked_context
from effectledger.model.operations import (
    Attempt,
    AuditEvent,
    Context,
    DestinationRef,
    DispatchResult,
    Operation,
    OperationState,
    validate_identifier,
    validate_limit,
)
from effectledger.store import Store

__all__ = [
    "attempts",
    "events",
    "get",
    "list_operations",
    "ready_operations",
    "status",
]


def get(store: Store, context: Context, operation_id: str) -> Operation:
    """The operation as stored, if it belongs to the context's tenant."""
    checked_context(context)
    validate_identifier(operation_id, "operation_id")
    row = store.one("operation_get", key(context.tenant_id, operation_id))
    if row is None:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    return operation_from_row(row)


def status(store: Store, context: Context, operation_id: str) -> DispatchResult:
    """The recorded state of an operation the context's actor requested (else ``not_found``)."""
    checked_context(context)
    validate_identifier(operation_id, "operation_id")
    row = store.one("operation_status", key(context.tenant_id, operation_id))
    if row is None or row["requester_id"] != context.actor_id:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    return DispatchResult(
        operation_id=operation_id,
        state=OperationState(row["state"]),
        provider_reference=row["provider_reference"],
        attempt_id=row["active_attempt_id"],
    )


def list_operations(store: Store, context: Context, *, limit: int = 100) -> list[Operation]:
    """The tenant's most recent operations, newest first (``limit``: 1 to 10,000)."""
    checked_context(context)
    limit = validate_limit(limit)
    rows = store.read(
        lambda tx: tx.all("operations_list", {"tenant_id": context.tenant_id, "limit": limit})
    )
    return [operation_from_row(row) for row in rows]


def attempts(store: Store, context: Context, operation_id: str) -> list[Attempt]:
    """Every attempt of one of the tenant's operations, oldest first."""
    get(store, context, operation_id)  # validates the context and the id
    rows = store.read(
        lambda tx: tx.all("attempts_for_operation", key(context.tenant_id, operation_id))
    )
    return [attempt_from_row(row) for row in rows]


def events(store: Store, context: Context, operation_id: str) -> list[AuditEvent]:
    """The audit trail under an operation id in sequence order (``not_found`` if empty)."""
    checked_context(context)
    validate_identifier(operation_id, "operation_id")
    rows = store.read(
        lambda tx: tx.all("events_for_operation", key(context.tenant_id, operation_id))
    )
    if not rows:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    return [event_from_row(row) for row in rows]


def ready_operations(
    store: Store, destination: DestinationRef, *, limit: int = 100
) -> list[tuple[str, str, str]]:
    """``(tenant, operation, requester)`` of READY operations bound to ``destination``."""
    rows = store.read(
        lambda tx: tx.all(
            "operations_ready",
            {
                "destination_account": destination.account_id,
                "destination_endpoint": destination.endpoint,
                "limit": limit,
            },
        )
    )
    return [(row["tenant_id"], row["operation_id"], row["requester_id"]) for row in rows]
