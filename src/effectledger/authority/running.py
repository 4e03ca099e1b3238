"""Admission on a proposal, run as one transaction, and its recheck at dispatch time.

The decision itself (actor, expiry, resource version, policy, approvals, budget, capacity) is
:func:`effectledger.authority.admission.admit_proposal`; this module runs it, claims at once when
asked, settles a lost COMMIT, and rechecks what can go stale before an admitted operation is sent.
"""

from __future__ import annotations

import functools
from datetime import datetime

from effectledger._failpoints import crash_point
from effectledger.actions.registry import Action
from effectledger.authority.admission import Admission, AdmissionRequest, Denial, admit_proposal
from effectledger.authority.writes import write
from effectledger.errors import AdmissionDenied, CommitUncertain, NotFound, StorageError
from effectledger.ledger import Ledger, append_event, claim_admitted, new_id
from effectledger.model.authority import Proposal
from effectledger.model.operations import Context
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = ["admit_and_claim_in", "deny_tampered_in", "recheck", "run_admission"]

_SETTLE_PASSES = 2  # admissions whose COMMIT was lost before reaching the server


def deny_tampered_in(tx: Transaction, ledger: Ledger, context: Context, operation_id: str) -> None:
    """Record the ``AdmissionDenied`` of a proposal whose stored digest no longer matches."""
    append_event(
        tx,
        ledger,
        tenant_id=context.tenant_id,
        operation_id=operation_id,
        actor=context.actor_id,
        event_type=EventType.ADMISSION_DENIED,
        details={"reason": "digest_mismatch"},
    )


def admit_and_claim_in(
    tx: Transaction,
    ledger: Ledger,
    request: AdmissionRequest,
    *,
    claim: bool,
    attempt_id: str,
    executor_id: str,
) -> Admission | Denial:
    """Admit the request's proposal in ``tx`` and, with ``claim``, claim what it admitted under
    ``attempt_id`` in the same transaction (a replay or a denial claims nothing)."""
    admitted = admit_proposal(tx, ledger, request, ledger.clock.now())
    if not claim or isinstance(admitted, Denial) or admitted.replayed or admitted.row is None:
        return admitted
    prepared = claim_admitted(
        tx,
        ledger,
        admitted.row,
        proposal=request.proposal,
        approvals=admitted.approvals,
        attempt_id=attempt_id,
        executor_id=executor_id,
    )
    return Admission(operation=admitted.operation, replayed=False, claim=prepared)


def run_admission(
    ledger: Ledger,
    body: functools.partial[Admission | Denial],
    context: Context,
    proposal: Proposal,
    *,
    claim: bool,
) -> Admission:
    """Run the admission ``body`` (:func:`admit_and_claim_in` lacking the transaction and the
    attempt id) as one transaction, settle a lost COMMIT, and raise a denial."""
    outcome: Admission | Denial | None = None
    for _ in range(_SETTLE_PASSES):
        attempt_id = new_id()
        try:
            outcome = write(ledger.store, functools.partial(body, attempt_id=attempt_id), "admit")
        except CommitUncertain as exc:
            if not claim:
                raise
            outcome = _settle(ledger, context, proposal, attempt_id, exc)
        if outcome is not None:
            break
    if outcome is None:  # pragma: no cover - two admissions proven absent in a row
        raise CommitUncertain("the admission could not be confirmed; try again")
    if isinstance(outcome, Denial):
        raise AdmissionDenied(outcome.message, reason=outcome.reason, **outcome.details)
    if outcome.claim is not None:
        crash_point("after_claim")
    return outcome


def _settle(
    ledger: Ledger,
    context: Context,
    proposal: Proposal,
    attempt_id: str,
    uncertain: CommitUncertain,
) -> Admission | None:
    """An admission-and-claim whose COMMIT went unacknowledged, as a fresh read settles it.

    The committed claim if it landed; the operation (claimed by nobody yet, or by another
    call) if only someone's admission did; ``None`` if nothing was admitted, so the
    admission can simply run again. Raises ``uncertain`` when even that cannot be read.
    """
    try:
        prepared = ledger.committed_claim(context.tenant_id, proposal.operation_id, attempt_id)
        operation = ledger.get(context, proposal.operation_id)
    except NotFound:
        return None
    except StorageError as exc:
        raise uncertain from exc
    return Admission(operation=operation, replayed=prepared is None, claim=prepared)


def recheck(worker: Context, proposal: Proposal, action: Action, now: datetime) -> str | None:
    """What went stale since an operation was admitted on ``proposal``, or ``None``."""
    if now >= proposal.expires_at:
        return "expired"
    if action.resource_version(worker, proposal.target) != proposal.resource_version:
        return "stale_resource_version"
    return None
