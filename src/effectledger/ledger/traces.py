"""The trace an operation was admitted in, kept for the later spans that link to it.

Telemetry, not the ledger (migration 17): while a tracer provider records, an admission stores
the W3C traceparent of the span it ran in (:func:`keep_admitted`, in the admission's own
transaction); the executor's submit, recovery's lookup, escalation, resolution and the seal read
it back (:func:`admitted`, :func:`sealed`) to link their spans to it. Nothing is written or read
when tracing is off. An admission's trace is also kept in this process for a while, so a perform
that submits right after its admission reads nothing to find it. A read that fails (a lost
connection, say) gives no link: the span, and the submit or seal it wraps, go on without it.
"""

from __future__ import annotations

import logging

from effectledger import telemetry
from effectledger.errors import StorageError
from effectledger.store import Store, Transaction

__all__ = ["admitted", "keep_admitted", "sealed"]

_RECENT: dict[tuple[str, str], str] = {}
"""Traces of this process's recent admissions, by (tenant, operation)."""
_RECENT_MAX = 4096
_log = logging.getLogger("effectledger.telemetry")


def keep_admitted(tx: Transaction, tenant_id: str, operation_id: str) -> None:
    """In an admission's transaction: keep the trace it runs in, if tracing records."""
    parent = telemetry.traceparent()
    if parent is None:
        return
    params = {"tenant_id": tenant_id, "operation_id": operation_id, "traceparent": parent}
    tx.queue("operation_trace_insert", params)
    if len(_RECENT) >= _RECENT_MAX:
        _RECENT.clear()
    _RECENT[(tenant_id, operation_id)] = parent


def admitted(store: Store, tenant_id: str, operation_id: str) -> tuple[str, ...]:
    """The traceparent the operation was admitted in (none if it was admitted untraced)."""
    known = _RECENT.get((tenant_id, operation_id))
    if known is not None:
        return (known,)
    params = {"tenant_id": tenant_id, "operation_id": operation_id}
    try:
        row = store.read(lambda tx: tx.one("operation_trace_get", params))
    except StorageError as exc:  # a link is telemetry: the span goes on without it
        _log.debug("no admission trace for %s: %s", operation_id, exc)
        return ()
    return () if row is None else (str(row["traceparent"]),)


def sealed(store: Store, tenant_id: str, first: int, end: int) -> tuple[str, ...]:
    """The admission traces of the operations whose events took log positions [first, end)."""
    if end <= first:
        return ()
    params = {"tenant_id": tenant_id, "first": first, "end": end, "limit": telemetry.MAX_LINKS}
    try:
        rows = store.read(lambda tx: tx.all("sealed_traces", params))
    except StorageError as exc:  # links are telemetry: the seal's span goes on without them
        _log.debug("no admission traces for %s's seal: %s", tenant_id, exc)
        return ()
    return tuple(str(row["traceparent"]) for row in rows)
