"""The trusted worker's passes over the whole ledger, and the sealing steps they share.

:meth:`~effectledger.EffectLedger.dispatch_ready`, :meth:`~effectledger.EffectLedger.recover`
and :meth:`~effectledger.EffectLedger.seal_pending` are what ``effectledger worker`` runs
(:class:`~effectledger.workers.Worker`); :meth:`~effectledger.EffectLedger.seal` seals one
tenant. Each reports what it did to OpenTelemetry (:mod:`effectledger.telemetry`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from effectledger import telemetry
from effectledger.app.declaring import Declarations
from effectledger.clock import Clock
from effectledger.events.authentication import TrailKeys
from effectledger.ledger import traces
from effectledger.model.operations import DispatchResult, validate_limit
from effectledger.store import Store

if TYPE_CHECKING:
    from effectledger.audit.bundles.export import ExportReport
    from effectledger.audit.keys.signers import Signer
    from effectledger.audit.sealing.sealer import LogSealer, SealReport

__all__ = ["dispatch_ready", "export", "seal", "seal_pending"]


def dispatch_ready(
    declared: Declarations, *, limit: int, claim_batch: int = 1
) -> list[DispatchResult]:
    """One pass of the guarded executors over READY operations, ``limit`` at most in all.

    Each operation admitted for a declared destination is rechecked (the dispatch-time recheck)
    and performed once; any number of processes may run this against one database, and a
    racing claim wins cleanly. ``claim_batch``: operations of one destination claimed in one
    transaction (:mod:`effectledger.workers.batches`; 1, one claim per transaction).
    """
    limit = validate_limit(limit)
    claim_batch = validate_limit(claim_batch, "claim_batch")
    results: list[DispatchResult] = []
    for executor in list(declared.executors.values()):
        left = limit - len(results)
        if left <= 0:
            break
        results.extend(executor.run_ready(limit=left, claim_batch=claim_batch))
    return results


def _sealer(
    store: Store,
    signer: Signer | None,
    clock: Clock,
    *,
    trail_keys: TrailKeys | None,
    memory: Path | None,
    witnesses: Iterable[str] = (),
) -> LogSealer:
    """The ledger's sealer: its log key (``signer`` else ``$EFFECTLEDGER_LOG_KEY``), its trail
    keys (only authentic events are sealed) and its memory file, if it has one."""
    from effectledger.audit.keys.files import load_signer
    from effectledger.audit.sealing.memory import SealerMemory
    from effectledger.audit.sealing.sealer import LogSealer

    return LogSealer(
        store,
        signer or load_signer(),
        clock=clock,
        memory=None if memory is None else SealerMemory(memory),
        witnesses=tuple(witnesses),
        trail_keys=trail_keys,
    )


def seal(
    store: Store,
    signer: Signer | None,
    clock: Clock,
    tenant_id: str,
    *,
    trail_keys: TrailKeys | None = None,
    memory: Path | None = None,
) -> SealReport:
    """Seal one tenant's pending events (``signer`` else ``$EFFECTLEDGER_LOG_KEY``), checking
    each event's tag with ``trail_keys`` and the log against the sealer ``memory`` file."""
    with telemetry.span("seal", tenant_id=tenant_id) as span:
        sealer = _sealer(store, signer, clock, trail_keys=trail_keys, memory=memory)
        report = sealer.seal(tenant_id)
        span.set(sealed=report.sealed, pending=report.pending)
        if span.recording:  # the traces the sealed events' operations were admitted in
            span.link(traces.sealed(store, tenant_id, report.size - report.sealed, report.size))
    telemetry.count("sealed_events", report.sealed)
    return report


def seal_pending(
    store: Store,
    signer: Signer | None,
    clock: Clock,
    witnesses: Iterable[str] = (),
    *,
    trail_keys: TrailKeys | None = None,
    memory: Path | None = None,
) -> list[SealReport]:
    """Seal every tenant's pending events, one report each; ``URL=KEY`` witnesses cosign (with
    ``trail_keys`` and ``memory`` as for :func:`seal`)."""
    with telemetry.span("seal") as span:
        sealer = _sealer(
            store, signer, clock, trail_keys=trail_keys, memory=memory, witnesses=witnesses
        )
        reports = sealer.seal_all()
        sealed = sum(report.sealed for report in reports)
        span.set(sealed=sealed, tenants=len(reports))
        if span.recording:
            span.link(
                parent
                for r in reports
                for parent in traces.sealed(store, r.tenant_id, r.size - r.sealed, r.size)
            )
    telemetry.count("sealed_events", sealed)
    return reports


def export(
    store: Store, clock: Clock, tenant_id: str, path: str | Path, exporter_id: str | None
) -> ExportReport:
    """Append the tenant's sealed log to the evidence bundle at ``path``, resumably."""
    from effectledger.audit.bundles.export import export_log

    return export_log(store, tenant_id, path, exporter_id=exporter_id, clock=clock)
