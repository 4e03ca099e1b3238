"""Reconciliation: the recovery queue of unanswered attempts, escalation and retry.

Recovery reserves the lookup of a due attempt (``ReconciliationStarted``), escalates an operation
whose inconclusive lookups are used up to MANUAL_REVIEW (``ManualReviewAssigned``), and the
explicit retry policy moves a RETRY_PENDING operation back to READY (``RetryAuthorized``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from effectledger._failpoints import crash_point
from effectledger.errors import CommitUncertain, InvalidTransition, NotFound, TamperedOperation
from effectledger.ledger.integrity import check_lookup_key
from effectledger.ledger.settings import DueWork, LedgerParts, LedgerSettings, micros
from effectledger.ledger.stored import attempt_from_row, result_from_row
from effectledger.ledger.trail import key, now_us, write_transition
from effectledger.ledger.uncertain_commit import landed
from effectledger.model.operations import (
    Attempt,
    Context,
    DestinationRef,
    DispatchResult,
    OperationState,
    Row,
    to_micros,
    validate_identifier,
    validate_limit,
)
from effectledger.model.states import EventType
from effectledger.store import Store, Transaction

log = logging.getLogger("effectledger.ledger")

__all__ = [
    "Reserved",
    "authorize_retry",
    "authorize_retry_in",
    "escalate",
    "escalate_in",
    "escalate_row",
    "needs_review",
    "reserve_due",
    "reserve_due_in",
    "reserve_in",
    "reserve_lookup",
    "spent",
]

_Result = TypeVar("_Result")
_Written = TypeVar("_Written")

_RECOVERABLE_STATES = (OperationState.IN_PROGRESS.value, OperationState.OUTCOME_UNKNOWN.value)

Reserved = tuple[str, str, str, Attempt | None]
"""``(tenant, operation, event hash, attempt)`` a reservation wrote (no attempt: escalated)."""


def spent(settings: LedgerSettings, row: Row) -> bool:
    """Whether inconclusive lookups have used up the budget of the unresolved ``row``."""
    return (
        row["state"] in _RECOVERABLE_STATES
        and int(row["inconclusive_lookups"]) >= settings.max_inconclusive_lookups
    )


def reserve_in(
    tx: Transaction,
    ledger: LedgerParts,
    tenant_id: str,
    operation_id: str,
    attempt_id: str,
    written: list[Reserved],
    *,
    actor: str,
) -> Attempt | None:
    """Reserve one lookup of a due attempt, or ``None`` if it is not due or not active.

    The reservation is put in ``written``, so a lost COMMIT can be read back.
    """
    written.clear()
    operation = key(tenant_id, operation_id)
    attempt_key = {**operation, "attempt_id": attempt_id}
    row = tx.one("operation_get", operation)
    attempt = tx.one("attempt_get", attempt_key)
    at_us = now_us(ledger.clock)
    if (
        row is None
        or attempt is None
        or row["state"] not in _RECOVERABLE_STATES
        or row["active_attempt_id"] != attempt_id
        or int(attempt["recover_after_us"]) > at_us
    ):
        return None
    # The destination is asked only about the request the authenticated admission made.
    check_lookup_key(tx, row, attempt, keys=ledger.settings.trail_keys)
    next_us = at_us + micros(ledger.settings.lookup_interval)
    tx.run("attempt_reschedule", {**attempt_key, "recover_after_us": next_us})
    updated = write_transition(
        tx,
        row,
        actor=actor,
        event_type=EventType.RECONCILIATION_STARTED,
        now_us=at_us,
        keys=ledger.settings.trail_keys,
        attempt_id=attempt_id,
        details={"next_check_us": next_us},
    )
    reserved = attempt_from_row({**dict(attempt), "recover_after_us": next_us})
    written.append((tenant_id, operation_id, updated["last_event_hash"], reserved))
    return reserved


def reserve_due_in(
    tx: Transaction,
    ledger: LedgerParts,
    destination: DestinationRef,
    written: list[Reserved],
    *,
    limit: int,
    actor: str,
) -> DueWork:
    """Reserve the lookups of up to ``limit`` due attempts bound to ``destination``.

    An operation whose inconclusive lookups are used up is escalated instead. Every
    reservation and escalation is put in ``written``, so a lost COMMIT can be read back.
    """
    written.clear()
    lookups: list[Attempt] = []
    escalated: list[tuple[str, str]] = []
    due = tx.all(
        "attempts_due_lock",
        {
            "now_us": now_us(ledger.clock),
            "limit": limit,
            "destination_account": destination.account_id,
            "destination_endpoint": destination.endpoint,
        },
    )
    one: list[Reserved] = []
    for item in due:
        tenant_id, operation_id = item["tenant_id"], item["operation_id"]
        row = tx.one("operation_get", key(tenant_id, operation_id))
        if row is not None and spent(ledger.settings, row):
            updated = escalate_row(tx, ledger, row, reason="inconclusive_lookups", actor=actor)
            escalated.append((tenant_id, operation_id))
            written.append((tenant_id, operation_id, updated["last_event_hash"], None))
            continue
        try:
            attempt = reserve_in(
                tx, ledger, tenant_id, operation_id, item["attempt_id"], one, actor=actor
            )
        except TamperedOperation as exc:  # nothing written for it: the others go on
            log.error(
                "not looking up %s/%s: %s (%s)",
                tenant_id,
                operation_id,
                exc.code,
                exc.details.get("reason"),
            )
            continue
        if attempt is not None:
            lookups.append(attempt)
            written.extend(one)
    return DueWork(lookups=tuple(lookups), escalated=tuple(escalated))


def _write_reading_back(
    ledger: LedgerParts,
    step: Callable[..., _Result],
    settle: Callable[[CommitUncertain, list[_Written]], _Result],
    *,
    label: str,
    **arguments: Any,
) -> _Result:
    """Run ``step`` in its own transaction; if its COMMIT is not acknowledged, ``settle`` it.

    ``step`` puts what it wrote in its ``written`` list, so ``settle`` can read it back once the
    operations settle and say what the unacknowledged transaction stored after all.
    """
    written: list[_Written] = []
    body = functools.partial(step, ledger=ledger, written=written, **arguments)
    try:
        return ledger.store.write(body, label=label)
    except CommitUncertain as uncertain:
        return settle(uncertain, written)


def reserve_lookup(
    ledger: LedgerParts,
    tenant_id: str,
    operation_id: str,
    attempt_id: str,
    *,
    actor: str,
) -> Attempt | None:
    """Reserve one lookup in its own transaction (see :meth:`Ledger.reserve_lookup`)."""

    def settle(uncertain: CommitUncertain, written: list[Reserved]) -> Attempt | None:
        if not written:  # pragma: no cover - the body ran to its end before COMMIT
            raise uncertain
        *_, event_hash, attempt = written[0]
        if not landed(ledger.store, uncertain, key(tenant_id, operation_id), [event_hash]):
            return None  # not reserved: still due, for this or another worker
        return attempt

    attempt = _write_reading_back(
        ledger,
        reserve_in,
        settle,
        label="reserve_lookup",
        tenant_id=tenant_id,
        operation_id=operation_id,
        attempt_id=attempt_id,
        actor=actor,
    )
    if attempt is not None:
        crash_point("after_reserve")
    return attempt


def reserve_due(
    ledger: LedgerParts,
    destination: DestinationRef,
    *,
    limit: int,
    actor: str,
) -> DueWork:
    """Reserve due lookups in one transaction (see :meth:`Ledger.reserve_due`)."""
    work = _write_reading_back(
        ledger,
        reserve_due_in,
        functools.partial(_reserved_after_all, ledger.store),
        label="reserve_due",
        destination=destination,
        limit=validate_limit(limit),
        actor=actor,
    )
    if work.lookups:
        crash_point("after_reserve")
    return work


def _reserved_after_all(
    store: Store, uncertain: CommitUncertain, written: list[Reserved]
) -> DueWork:
    """What an unacknowledged :func:`reserve_due` stored, read back operation by operation."""
    lookups: list[Attempt] = []
    escalated: list[tuple[str, str]] = []
    for tenant_id, operation_id, event_hash, attempt in written:
        if not landed(store, uncertain, key(tenant_id, operation_id), [event_hash]):
            continue
        if attempt is None:
            escalated.append((tenant_id, operation_id))
        else:
            lookups.append(attempt)
    return DueWork(lookups=tuple(lookups), escalated=tuple(escalated))


def escalate_row(
    tx: Transaction,
    ledger: LedgerParts,
    row: Row,
    *,
    reason: str,
    actor: str,
    owner: str | None = None,
) -> dict[str, Any]:
    """The escalation step on an unresolved row read in this transaction."""
    owner = validate_identifier(owner or ledger.settings.review_owner, "owner")
    now = ledger.clock.now()
    deadline_us = to_micros(now + ledger.settings.review_deadline)
    return write_transition(
        tx,
        row,
        actor=actor,
        event_type=EventType.MANUAL_REVIEW_ASSIGNED,
        now_us=to_micros(now),
        keys=ledger.settings.trail_keys,
        attempt_id=row["active_attempt_id"],
        details={"owner": owner, "deadline_us": deadline_us, "reason": reason},
        state=OperationState.MANUAL_REVIEW.value,
        review_owner=owner,
        review_deadline_us=deadline_us,
    )


def escalate_in(
    tx: Transaction,
    ledger: LedgerParts,
    tenant_id: str,
    operation_id: str,
    written: list[tuple[str, DispatchResult]],
    *,
    reason: str,
    owner: str,
    actor: str,
) -> DispatchResult:
    """Escalate an unresolved operation; one that is not unresolved is returned as it is."""
    written.clear()
    row = tx.one("operation_get", key(tenant_id, operation_id))
    if row is None:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    if row["state"] not in _RECOVERABLE_STATES:
        return result_from_row(row)
    updated = escalate_row(tx, ledger, row, reason=reason, owner=owner, actor=actor)
    written.append((updated["last_event_hash"], result_from_row(updated)))
    return written[0][1]


def escalate(
    ledger: LedgerParts,
    tenant_id: str,
    operation_id: str,
    *,
    reason: str,
    owner: str | None,
    actor: str,
) -> DispatchResult:
    """Escalate in its own transaction (see :meth:`Ledger.escalate`).

    ``owner`` defaults to the settings' review owner.
    """
    arguments: dict[str, Any] = {
        "tenant_id": tenant_id,
        "operation_id": operation_id,
        "reason": reason,
        "owner": validate_identifier(owner or ledger.settings.review_owner, "owner"),
        "actor": actor,
    }

    def settle(
        uncertain: CommitUncertain, written: list[tuple[str, DispatchResult]]
    ) -> DispatchResult:
        if not written:  # pragma: no cover - the body ran to its end before COMMIT
            raise uncertain
        event_hash, result = written[0]
        if landed(ledger.store, uncertain, key(tenant_id, operation_id), [event_hash]):
            return result
        # Not stored: escalate again; a state settled meanwhile is returned as it is.
        return ledger.store.write(
            functools.partial(escalate_in, ledger=ledger, written=[], **arguments),
            label="escalate",
        )

    return _write_reading_back(ledger, escalate_in, settle, label="escalate", **arguments)


def needs_review(ledger: LedgerParts, tenant_id: str, operation_id: str) -> bool:
    """Whether inconclusive lookups have used up the budget for this operation."""
    row = ledger.store.one("operation_get", key(tenant_id, operation_id))
    return row is not None and spent(ledger.settings, row)


def authorize_retry(
    ledger: LedgerParts, context: Context, operation_id: str, *, max_retries: int
) -> DispatchResult:
    """Authorize a retry in its own transaction (see :meth:`Ledger.authorize_retry`)."""
    return ledger.store.write(
        lambda tx: authorize_retry_in(tx, ledger, context, operation_id, max_retries=max_retries),
        label="authorize_retry",
    )


def authorize_retry_in(
    tx: Transaction, ledger: LedgerParts, context: Context, operation_id: str, *, max_retries: int
) -> DispatchResult:
    """Move a RETRY_PENDING operation back to READY within ``max_retries``."""
    row = tx.one("operation_get", key(context.tenant_id, operation_id))
    if row is None:
        raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
    if row["state"] != OperationState.RETRY_PENDING.value:
        raise InvalidTransition(
            f"only a RETRY_PENDING operation can be retried; {operation_id} is {row['state']}",
            operation_id=operation_id,
            state=row["state"],
        )
    used = int(row["retries_authorized"])
    if used >= max_retries:
        raise InvalidTransition(
            f"operation {operation_id} has used its {max_retries} retries",
            operation_id=operation_id,
            reason="retry_budget_exhausted",
        )
    updated = write_transition(
        tx,
        row,
        actor=context.actor_id,
        event_type=EventType.RETRY_AUTHORIZED,
        now_us=now_us(ledger.clock),
        keys=ledger.settings.trail_keys,
        attempt_id=row["active_attempt_id"],
        details={"retry": used + 1, "max_retries": max_retries},
        state=OperationState.READY.value,
        retries_authorized=used + 1,
    )
    return result_from_row(updated)
