"""Claims: a READY operation becomes one attempt to submit, or is released without one.

A claim checks the stored command against its fingerprint, its admission and its trail
(:func:`~effectledger.ledger.integrity.check_dispatchable`), writes the attempt and moves the
operation to IN_PROGRESS with ``AttemptPrepared``, all in one transaction. Only a committed
claim may be submitted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from effectledger.errors import (
    CommitUncertain,
    ConcurrentModification,
    DestinationMismatch,
    IntegrityError,
    MissingAdmission,
    NotFound,
    TamperedCommand,
)
from effectledger.ledger.integrity import authorized_command, check_dispatchable
from effectledger.ledger.settings import LedgerParts, micros
from effectledger.ledger.stored import destination_from_row, result_from_row
from effectledger.ledger.trail import key, new_id, now_us, write_transition
from effectledger.model.authority import Approval, Proposal
from effectledger.model.canonical import COMMAND_VERSION, digest_bytes
from effectledger.model.operations import (
    Context,
    DestinationRef,
    DispatchResult,
    OperationState,
    PreparedAttempt,
    Row,
)
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = [
    "claim_admitted",
    "claim_in",
    "claim_locked",
    "claim_next",
    "claim_next_in",
    "claim_or_status",
    "claim_row",
    "committed_claim_in",
    "release_in",
]

log = logging.getLogger("effectledger.ledger")
_IN_PROGRESS = OperationState.IN_PROGRESS.value  # looked up once: ``.value`` is two calls
_CLAIM_PASSES = 8  # READY rows failing their integrity check that one pool claim passes over


def claim_row(
    tx: Transaction,
    ledger: LedgerParts,
    row: Row,
    *,
    attempt_id: str,
    executor_id: str,
    bound_to: DestinationRef | None = None,
    proposal: Proposal | None = None,
    approvals: Sequence[Approval] = (),
    admitted_here: bool = False,
) -> PreparedAttempt | None:
    """The claim step on a READY row: checks, attempt, state change, event.

    ``proposal`` and ``approvals`` are what an admission in this same transaction read and
    checked (:func:`claim_admitted`); the dispatch checks use them instead of reading them again.
    ``admitted_here``: that admission also wrote ``row``, from ``proposal``'s own values (its
    command encoded and fingerprinted once, by it): the checks of the row's command against its
    fingerprint and against the proposal are skipped, since nothing but this transaction could
    have written either. The trail is read and verified all the same: the proposal's and the
    approval's events come from the database.

    ``row`` is read (and locked) in this transaction, or read just before it: the state
    change is guarded by the row's version either way, so a row that changed since is not
    claimed (:class:`ConcurrentModification`, and the transaction must roll back). Raises an
    :class:`IntegrityError` before writing anything if the stored command no longer hashes
    to its fingerprint or the admission reference is missing, and
    :class:`DestinationMismatch` if ``bound_to`` is not the operation's destination.
    """
    operation_id = row["operation_id"]
    if row["state"] != OperationState.READY:  # a StrEnum equals its value
        return None
    if not admitted_here:
        # The stored bytes themselves must still hash to the admitted fingerprint.
        command = row["command_json"].encode()
        if digest_bytes("command", command, version=COMMAND_VERSION) != row["fingerprint"]:
            raise TamperedCommand(
                f"the stored command of {operation_id} does not match its fingerprint",
                operation_id=operation_id,
            )
        if not str(row["admission_reference"] or "").strip():
            raise MissingAdmission(
                f"operation {operation_id} has no admission reference",
                operation_id=operation_id,
            )
    destination = destination_from_row(row)
    # The records' equality, field by field (no call): exactly the same type, account and
    # endpoint, compared case-sensitively.
    if bound_to is not None and (
        type(bound_to) is not DestinationRef
        or bound_to.account_id != destination.account_id
        or bound_to.endpoint != destination.endpoint
    ):
        raise DestinationMismatch(
            "the destination adapter is not bound to the operation's account and endpoint",
            operation_id=operation_id,
        )
    approved_digest = check_dispatchable(
        tx,
        row,
        proposal=proposal,
        approvals=approvals,
        keys=ledger.settings.trail_keys,
        admitted_here=admitted_here,
    )
    at_us = now_us(ledger.clock)
    tx.run(
        "attempt_insert",
        {
            "tenant_id": row["tenant_id"],
            "operation_id": operation_id,
            "attempt_id": attempt_id,
            "executor_id": executor_id,
            "destination_account": destination.account_id,
            "destination_endpoint": destination.endpoint,
            "idempotency_key": row["idempotency_key"],
            "now_us": at_us,
            "recover_after_us": at_us + micros(ledger.settings.recover_after),
        },
    )
    write_transition(
        tx,
        row,
        actor=executor_id,
        event_type=EventType.ATTEMPT_PREPARED,
        now_us=at_us,
        keys=ledger.settings.trail_keys,
        attempt_id=attempt_id,
        state=_IN_PROGRESS,
        active_attempt_id=attempt_id,
    )
    return PreparedAttempt(
        tenant_id=row["tenant_id"],
        operation_id=operation_id,
        attempt_id=attempt_id,
        command=authorized_command(row, approved_digest),
        idempotency_key=row["idempotency_key"],
        destination=destination,
    )


def _locked(tx: Transaction, context: Context, operation_id: str) -> Row:
    """The operation, locked, if the context's actor requested it (else ``not_found``)."""
    row = tx.one("operation_lock", key(context.tenant_id, operation_id))
    if row is None or row["requester_id"] != context.actor_id:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    return row


def claim_locked(
    tx: Transaction,
    ledger: LedgerParts,
    context: Context,
    operation_id: str,
    *,
    attempt_id: str,
    executor_id: str,
    bound_to: DestinationRef | None,
    expected_version: int | None,
) -> PreparedAttempt | None:
    """Lock the operation and claim it if it is READY (at ``expected_version``, when given)."""
    row = _locked(tx, context, operation_id)
    if row["state"] != OperationState.READY:  # a StrEnum equals its value
        return None
    if expected_version is not None and int(row["version"]) != expected_version:
        return None
    return claim_row(
        tx, ledger, row, attempt_id=attempt_id, executor_id=executor_id, bound_to=bound_to
    )


def claim_in(
    tx: Transaction,
    ledger: LedgerParts,
    context: Context,
    operation_id: str,
    *,
    attempt_id: str,
    executor_id: str,
    bound_to: DestinationRef | None = None,
) -> PreparedAttempt | None:
    """The claim of :meth:`Ledger.claim`, inside a caller's ``tx`` (an admission that claims).

    Nothing may be submitted before ``tx`` commits; a ``CommitUncertain`` from that commit is
    settled with :meth:`Ledger.committed_claim` under ``attempt_id``.
    """
    row = _locked(tx, context, operation_id)
    return claim_row(
        tx, ledger, row, attempt_id=attempt_id, executor_id=executor_id, bound_to=bound_to
    )


def claim_admitted(
    tx: Transaction,
    ledger: LedgerParts,
    row: Row,
    *,
    proposal: Proposal,
    approvals: Sequence[Approval],
    attempt_id: str,
    executor_id: str,
) -> PreparedAttempt | None:
    """Claim the operation that ``proposal``'s admission inserted as ``row`` earlier in ``tx``.

    The row, the proposal and the approvals come from that admission, so none is read again and
    the row's command is not checked again (``admitted_here`` of :func:`claim_row`); the trail
    is read and verified as for every claim. Nothing may be submitted before ``tx``
    commits (see :func:`claim_in`).
    """
    return claim_row(
        tx,
        ledger,
        row,
        attempt_id=attempt_id,
        executor_id=executor_id,
        bound_to=proposal.destination,
        proposal=proposal,
        approvals=approvals,
        admitted_here=True,
    )


def claim_or_status(
    ledger: LedgerParts,
    context: Context,
    operation_id: str,
    *,
    executor_id: str,
    bound_to: DestinationRef | None,
) -> PreparedAttempt | DispatchResult | None:
    """The claim of a READY operation read once outside any transaction, or its state.

    ``None`` when another executor's claim came first (the caller reads the status then).
    """
    row = ledger.store.one("operation_dispatch", key(context.tenant_id, operation_id))
    if row is None or row["requester_id"] != context.actor_id:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    if row["state"] != OperationState.READY:  # a StrEnum equals its value
        return result_from_row(row)
    attempt_id = new_id()
    try:
        return ledger.store.write(
            lambda tx: claim_row(
                tx, ledger, row, attempt_id=attempt_id, executor_id=executor_id, bound_to=bound_to
            ),
            label="claim",
        )
    except ConcurrentModification:
        return None
    except CommitUncertain as exc:
        raise _naming(exc, context.tenant_id, operation_id, attempt_id) from exc


def _naming(
    uncertain: CommitUncertain, tenant_id: str, operation_id: str, attempt_id: str
) -> CommitUncertain:
    """``uncertain`` naming the claim it is about, so the caller can settle it by reading."""
    return CommitUncertain(
        uncertain.message, tenant_id=tenant_id, operation_id=operation_id, attempt_id=attempt_id
    )


def claim_next_in(
    tx: Transaction,
    ledger: LedgerParts,
    destination: DestinationRef,
    picked: list[Row],
    *,
    attempt_id: str,
    executor_id: str,
) -> PreparedAttempt | None:
    """Claim the oldest READY operation bound to ``destination`` that passes its checks.

    The row claimed is put in ``picked``, so a lost COMMIT can name it. An operation that
    fails its integrity check is left READY and logged, never claimed.
    """
    picked.clear()
    start = {
        "destination_account": destination.account_id,
        "destination_endpoint": destination.endpoint,
        "after_us": -1,
        "after_tenant": "",
        "after_operation": "",
    }
    position = start
    for _ in range(_CLAIM_PASSES):
        row = tx.one("operations_ready_lock", position)
        if row is None:
            return None
        try:
            prepared = claim_row(tx, ledger, row, attempt_id=attempt_id, executor_id=executor_id)
        except IntegrityError as exc:  # raised before anything is written
            log.error("not claiming %s/%s: %s", row["tenant_id"], row["operation_id"], exc)
            position = {
                **start,
                "after_us": row["created_us"],
                "after_tenant": row["tenant_id"],
                "after_operation": row["operation_id"],
            }
            continue
        picked.append(row)
        return prepared
    return None


def claim_next(
    ledger: LedgerParts,
    destination: DestinationRef,
    *,
    attempt_id: str,
    executor_id: str,
) -> PreparedAttempt | None:
    """:func:`claim_next_in` in its own transaction; a lost COMMIT names the operation picked."""
    picked: list[Row] = []
    try:
        return ledger.store.write(
            lambda tx: claim_next_in(
                tx, ledger, destination, picked, attempt_id=attempt_id, executor_id=executor_id
            ),
            label="claim_next",
        )
    except CommitUncertain as exc:
        if not picked:
            raise
        raise _naming(exc, picked[0]["tenant_id"], picked[0]["operation_id"], attempt_id) from exc


def release_in(
    tx: Transaction,
    ledger: LedgerParts,
    context: Context,
    operation_id: str,
    *,
    reason: str,
    expected_version: int,
) -> tuple[DispatchResult, bool]:
    """Release a READY operation at ``expected_version``; its state and whether it was released."""
    row = tx.one("operation_get", key(context.tenant_id, operation_id))
    if row is None or row["requester_id"] != context.actor_id:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    stale = int(row["version"]) != expected_version
    if row["state"] != OperationState.READY or stale:
        return result_from_row(row), False
    updated = write_transition(
        tx,
        row,
        actor=context.actor_id,
        event_type=EventType.OPERATION_RELEASED,
        now_us=now_us(ledger.clock),
        keys=ledger.settings.trail_keys,
        details={"reason": reason},
        state=OperationState.RELEASED.value,
    )
    return result_from_row(updated), True


def committed_claim_in(
    tx: Transaction, tenant_id: str, operation_id: str, attempt_id: str
) -> PreparedAttempt | None:
    """The claim made under ``attempt_id`` once the operation settled, if it awaits submission."""
    operation = key(tenant_id, operation_id)
    tx.one("operation_settle", operation)
    attempt = tx.one("attempt_get", {**operation, "attempt_id": attempt_id})
    row = tx.one("operation_get", operation)
    if (
        attempt is None
        or row is None
        or row["active_attempt_id"] != attempt_id
        or row["state"] != OperationState.IN_PROGRESS.value
    ):
        return None
    proposal = None
    if row["proposal_id"] is not None:
        proposal = tx.one(
            "proposal_get", {"tenant_id": tenant_id, "proposal_id": row["proposal_id"]}
        )
    return PreparedAttempt(
        tenant_id=tenant_id,
        operation_id=operation_id,
        attempt_id=attempt_id,
        command=authorized_command(row, None if proposal is None else proposal["digest"]),
        idempotency_key=attempt["idempotency_key"],
        destination=DestinationRef(
            account_id=attempt["destination_account"],
            endpoint=attempt["destination_endpoint"],
        ),
    )
