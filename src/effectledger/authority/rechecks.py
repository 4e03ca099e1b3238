"""The dispatch-time recheck (docs/design.md, invariant 7), of one operation or of a batch.

What can go stale after admission is rechecked just before a claim: the stored proposal (its
digest recomputed as it is read, and that it is the operation's), its expiry and the target's
resource version, read under the dispatching worker's own identity. Permission is what admission
stored and is not decided again. :meth:`Authority.dispatch_guard` rechecks one operation;
:func:`dispatch_rechecks` rechecks a worker's batch with one read of all its proposals, each
operation judged by the same :func:`recheck_stored`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from effectledger.actions.registry import ActionRegistry
from effectledger.authority.running import recheck
from effectledger.errors import TamperedProposal
from effectledger.ledger import Ledger
from effectledger.ledger.batches import batch_keys
from effectledger.ledger.stored import proposal_from_row
from effectledger.model.operations import Context, Operation, Row

__all__ = ["dispatch_rechecks", "recheck_stored"]


def recheck_stored(
    worker: Context, operation: Operation, row: Row | None, registry: ActionRegistry, now: datetime
) -> str | None:
    """Why ``operation`` must be released, judged on its stored proposal ``row``, or ``None``."""
    if row is None:
        return "digest_mismatch"
    try:
        proposal = proposal_from_row(row)
    except TamperedProposal:
        return "digest_mismatch"
    if proposal.operation_id != operation.operation_id:
        return "digest_mismatch"
    return recheck(worker, proposal, registry.get(proposal.action), now)


def dispatch_rechecks(
    ledger: Ledger, registry: ActionRegistry, checks: Sequence[tuple[Context, Operation]]
) -> list[str | None]:
    """:meth:`Authority.dispatch_guard` of each ``(worker, operation)``, in order, with one read
    of the proposals of them all (``proposals_for_batch``); ``ledger`` and ``registry`` are the
    authority's."""
    wanted = sorted(
        {(op.tenant_id, op.proposal_id) for _, op in checks if op.proposal_id is not None}
    )
    rows: dict[tuple[str, str], Row] = {}
    if wanted:
        keys = batch_keys(wanted)
        found = ledger.store.read(lambda tx: tx.all("proposals_for_batch", keys))
        rows = {(row["tenant_id"], row["proposal_id"]): row for row in found}
    now = ledger.clock.now()
    return [
        None
        if operation.proposal_id is None
        else recheck_stored(
            worker,
            operation,
            rows.get((operation.tenant_id, operation.proposal_id)),
            registry,
            now,
        )
        for worker, operation in checks
    ]
