"""Reads of the evidence a store holds, for tools that show it: an operation's events and a
tenant's latest signed checkpoint. Nothing here writes.
"""

from __future__ import annotations

from functools import partial

from effectledger.audit.log.log_head import StoredCheckpoint, stored_checkpoint
from effectledger.audit.witnessing.submit import cosigned_note
from effectledger.events.record import event_from_row
from effectledger.model.operations import AuditEvent, validate_identifier
from effectledger.store import Store

__all__ = ["latest_checkpoint", "operation_events"]


def operation_events(store: Store, tenant_id: str, operation_id: str) -> list[AuditEvent]:
    """Every stored event of the tenant's operation, in sequence order (empty if none)."""
    key = {
        "tenant_id": validate_identifier(tenant_id, "tenant_id"),
        "operation_id": validate_identifier(operation_id, "operation_id"),
    }
    rows = store.read(lambda tx: tx.all("events_for_operation", key))
    return [event_from_row(row) for row in rows]


def latest_checkpoint(store: Store, tenant_id: str) -> StoredCheckpoint | None:
    """The tenant's latest signed checkpoint, or ``None`` before its log's first seal.

    Its ``note`` carries the witness cosignatures stored for it (extra signature lines).
    """
    row = store.one(
        "log_checkpoint_latest", {"tenant_id": validate_identifier(tenant_id, "tenant_id")}
    )
    if row is None:
        return None
    return stored_checkpoint({**row, "note": store.read(partial(cosigned_note, row=row))})
