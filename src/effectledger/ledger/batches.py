"""Batches: up to N READY operations of one destination claimed in one transaction, and their
replies recorded in one.

Nothing here is a new rule. A batch claim runs, for each operation, the claim step of
:func:`~effectledger.ledger.claims.claim_row` (fingerprint, admission, destination, trail and
authority checks of invariant 13, trail keys; the attempt row and ``AttemptPrepared``) or the
release of :func:`~effectledger.ledger.claims.release_in` (``OperationReleased``), inside one
transaction that commits before anything is sent. A batch record runs
:func:`~effectledger.ledger.recording.record_in` for each reply, inside one transaction. Each
operation's state change still commits with exactly one event of its own (invariant 3), and the
whole batch commits or nothing of it does.

Locks: on PostgreSQL a claim locks its operations with ``FOR UPDATE SKIP LOCKED``
(``operations_lock_ready_batch``), so concurrent batch claimers skip each other's operations
instead of waiting for them, and no claim waits on an operation row at all. The only rows two
batches can both need are a pool's running capacity totals (moved by triggers when an operation
is released or recorded): releases and records take them in one order, by tenant, pool and
operation, so two batches never hold them in crossed orders. On SQLite ``BEGIN IMMEDIATE``
serializes claimers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from effectledger._failpoints import crash_point
from effectledger.errors import CommitUncertain, ConcurrentModification, IntegrityError
from effectledger.ledger.claims import claim_row, release_in
from effectledger.ledger.recording import record_in
from effectledger.ledger.settings import LedgerParts
from effectledger.ledger.stored import operation_from_row
from effectledger.ledger.trail import key, new_id
from effectledger.ledger.uncertain_commit import landed
from effectledger.model.operations import (
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    PreparedAttempt,
    Row,
)
from effectledger.store import Transaction

__all__ = [
    "START",
    "ClaimedBatch",
    "Prefetched",
    "Ready",
    "Reply",
    "batch_keys",
    "claim_batch",
    "claim_batch_in",
    "ready_batch",
    "record_batch",
    "record_batch_in",
]

log = logging.getLogger("effectledger.ledger")
_SETTLE_PASSES = 2  # as a lone record: writes of one batch whose COMMIT was lost, proven absent


@dataclass(frozen=True, slots=True)
class Ready:
    """A READY operation as read before its batch's claim, and its place in the queue.

    ``release`` is the reason the dispatch-time recheck gave to release it, or ``None`` to
    claim it; the claim goes ahead only if the operation is still at the version read here.
    """

    row: Row
    release: str | None = None

    @property
    def operation(self) -> Operation:
        """The operation as stored (what a dispatch-time recheck looks at)."""
        return operation_from_row(self.row)

    @property
    def position(self) -> Mapping[str, Any]:
        """Its place in the queue: the next read starts after it."""
        row = self.row
        return {
            "after_us": row["created_us"],
            "after_tenant": row["tenant_id"],
            "after_operation": row["operation_id"],
        }

    def rechecked(self, release: str | None) -> Ready:
        """This operation with the dispatch-time recheck's verdict."""
        return Ready(self.row, release)


START: Mapping[str, Any] = MappingProxyType(
    {"after_us": -1, "after_tenant": "", "after_operation": ""}
)
"""The position before every operation of the queue."""


def ready_batch(
    ledger: LedgerParts, destination: DestinationRef, *, after: Mapping[str, Any], limit: int
) -> list[Ready]:
    """Up to ``limit`` READY operations bound to ``destination`` after the queue position
    ``after`` (:data:`START`, or a :attr:`Ready.position`), oldest first; read, not locked."""
    params = {
        "destination_account": destination.account_id,
        "destination_endpoint": destination.endpoint,
        **after,
        "limit": limit,
    }
    rows = ledger.store.read(lambda tx: tx.all("operations_ready_batch", params))
    return [Ready(row) for row in rows]


@dataclass(frozen=True, slots=True)
class ClaimedBatch:
    """What one batch claim committed: the claims to submit and the operations released.

    ``pools`` gives each claim's pool (``""`` for none), the order its record takes locks in.
    """

    claimed: tuple[PreparedAttempt, ...] = ()
    released: tuple[DispatchResult, ...] = ()
    pools: tuple[str, ...] = ()


def _lock_order(row: Row) -> tuple[str, str, str]:
    return (row["tenant_id"], row["pool"] or "", row["operation_id"])


def batch_keys(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The ``keys`` parameter of a batch read (``operations_lock_ready_batch``,
    ``events_for_operations``, ``proposals_for_batch``, ``approvals_for_batch``): a JSON array
    of ``[tenant_id, id]`` pairs, the same text for both dialects."""
    return {"keys": json.dumps([list(pair) for pair in pairs], separators=(",", ":"))}


_MISSING = object()


class Prefetched:
    """A claim transaction whose per-operation reads are answered from rows read for the whole
    batch, in the same transaction, after its operations were locked.

    ``events_for_operation``, ``proposal_get`` and ``approval_get`` of a batch's operations are
    read with one statement each (``events_for_operations``, ``proposals_for_batch``,
    ``approvals_for_batch``: the same columns) instead of one per operation; every other
    statement, and a read of anything not prefetched, goes to the transaction. Nothing a claim
    writes changes what was prefetched: an operation's trail is read before its own step, and
    proposals and approvals are never written by a claim.
    """

    __slots__ = ("_answers", "_tx")

    def __init__(self, tx: Transaction, rows: Sequence[Row]) -> None:
        self._tx = tx
        self._answers: dict[tuple[str, str, str], Any] = {}
        trails = [(row["tenant_id"], row["operation_id"]) for row in rows]
        for trail in trails:
            self._answers["events_for_operation", *trail] = []
        if trails:
            for event in tx.all("events_for_operations", batch_keys(trails)):
                trail = (event["tenant_id"], event["operation_id"])
                self._answers["events_for_operation", *trail].append(event)
        for query, batch, column in (
            ("proposal_get", "proposals_for_batch", "proposal_id"),
            ("approval_get", "approvals_for_batch", "approval_id"),
        ):
            wanted = sorted({(row["tenant_id"], row[column]) for row in rows if row[column]})
            if wanted:
                for found in tx.all(batch, batch_keys(wanted)):
                    self._answers[query, found["tenant_id"], found[column]] = found

    def _answer(self, name: str, params: Mapping[str, Any]) -> Any:
        if name == "events_for_operation":
            return self._answers.get((name, params["tenant_id"], params["operation_id"]), _MISSING)
        if name == "proposal_get":
            return self._answers.get((name, params["tenant_id"], params["proposal_id"]), _MISSING)
        if name == "approval_get":
            return self._answers.get((name, params["tenant_id"], params["approval_id"]), _MISSING)
        return _MISSING

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """The prefetched row, else the transaction's."""
        found = self._answer(name, params)
        return self._tx.one(name, params) if found is _MISSING else found

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        """The prefetched rows, else the transaction's."""
        found = self._answer(name, params)
        return self._tx.all(name, params) if found is _MISSING else list(found)

    def run(self, name: str, params: Mapping[str, Any]) -> int:
        """The transaction's."""
        return self._tx.run(name, params)

    def queue(self, name: str, params: Mapping[str, Any]) -> None:
        """The transaction's."""
        self._tx.queue(name, params)


def claim_batch_in(
    tx: Transaction,
    ledger: LedgerParts,
    batch: Sequence[Ready],
    picked: list[tuple[PreparedAttempt, str]],
    *,
    bound_to: DestinationRef,
    executor_id: str,
) -> ClaimedBatch:
    """Claim or release each operation of ``batch`` in ``tx``, as one claim or release would.

    The batch's operations are locked first, in one statement (``FOR UPDATE SKIP LOCKED`` on
    PostgreSQL); the trails, proposals and approvals their checks read are then read in one
    statement each (:class:`Prefetched`). An operation another executor holds or has taken, or
    that moved on since it was read and rechecked, is left alone (the next pass reads it
    again). One whose integrity check fails is left READY and logged, never claimed, as
    :meth:`Ledger.claim_next` does. The claims made are put in ``picked`` with their pools, so
    a lost COMMIT can be settled by reading them back.
    """
    picked.clear()
    wanted = {(ready.row["tenant_id"], ready.row["operation_id"]): ready for ready in batch}
    locked = [
        row
        for row in tx.all("operations_lock_ready_batch", batch_keys(list(wanted)))
        if int(row["version"]) == int(wanted[row["tenant_id"], row["operation_id"]].row["version"])
    ]
    claiming = [
        row for row in locked if wanted[row["tenant_id"], row["operation_id"]].release is None
    ]
    reads = Prefetched(tx, claiming) if claiming else tx
    stale: list[tuple[Row, str]] = []
    for row in locked:
        reason = wanted[row["tenant_id"], row["operation_id"]].release
        if reason is not None:
            stale.append((row, reason))
            continue
        try:
            prepared = claim_row(
                reads, ledger, row, attempt_id=new_id(), executor_id=executor_id, bound_to=bound_to
            )
        except IntegrityError as exc:  # raised before anything of it is written
            log.error("not claiming %s/%s: %s", row["tenant_id"], row["operation_id"], exc)
            continue
        if prepared is not None:
            picked.append((prepared, row["pool"] or ""))
    released = []
    for row, reason in sorted(stale, key=lambda item: _lock_order(item[0])):
        # The release's event names the requester, as a lone release does.
        scope = Context(tenant_id=row["tenant_id"], actor_id=row["requester_id"])
        result, mine = release_in(
            tx,
            ledger,
            scope,
            row["operation_id"],
            reason=reason,
            expected_version=int(row["version"]),
        )
        if mine:
            released.append(result)
    return ClaimedBatch(
        claimed=tuple(prepared for prepared, _ in picked),
        released=tuple(released),
        pools=tuple(pool for _, pool in picked),
    )


def claim_batch(
    ledger: LedgerParts,
    batch: Sequence[Ready],
    picked: list[tuple[PreparedAttempt, str]],
    *,
    bound_to: DestinationRef,
    executor_id: str,
) -> ClaimedBatch:
    """:func:`claim_batch_in` in one transaction of its own; only a returned claim may be sent.

    If the COMMIT's acknowledgement is lost, :class:`CommitUncertain` is raised and ``picked``
    holds the claims it carried: each is settled with :meth:`Ledger.committed_claim`.
    """
    claimed = ledger.store.write(
        lambda tx: claim_batch_in(
            tx, ledger, batch, picked, bound_to=bound_to, executor_id=executor_id
        ),
        label="claim_batch",
        # A row that moved between its lock and its step (it cannot, locked) rolls the batch
        # back; run again, the moved row is passed over by its version.
        rerun_on=(ConcurrentModification,),
    )
    if claimed.claimed:
        crash_point("after_batch_claim")
    return claimed


@dataclass(frozen=True, slots=True)
class Reply:
    """One claim's reply, as the ledger records it (:func:`~effectledger.ledger.validation.
    recordable`): ``problem`` and ``reported`` say why an Unknown stands in for what came back.

    ``pool`` orders the batch's locks (see the module docstring).
    """

    attempt: PreparedAttempt
    observation: Observation
    problem: str | None = None
    reported: object = None
    pool: str = ""


def record_batch_in(
    tx: Transaction,
    ledger: LedgerParts,
    replies: Sequence[Reply],
    written: dict[int, tuple[str | None, DispatchResult]],
    *,
    actor: str,
) -> list[DispatchResult]:
    """Record each reply in ``tx`` as a lone record does; the recorded states, in order.

    Records are written by tenant, pool and operation (the order of their capacity locks).
    ``written`` gets, for each reply's index, the hash of the event written for it (``None``
    if the very observation was recorded already) and its result, so a lost COMMIT can be read
    back.
    """
    written.clear()
    order = sorted(
        range(len(replies)),
        key=lambda index: (
            replies[index].attempt.tenant_id,
            replies[index].pool,
            replies[index].attempt.operation_id,
        ),
    )
    half = len(replies) // 2
    for done, index in enumerate(order, start=1):
        reply = replies[index]
        one: list[tuple[str, DispatchResult]] = []
        result = record_in(
            tx,
            ledger,
            reply.attempt,
            reply.observation,
            one,
            actor=actor,
            reconciled=False,
            problem=reply.problem,
            reported=reply.reported,
        )
        written[index] = (one[0][0] if one else None, result)
        if done == half:
            crash_point("inside_batch_record")
    return [written[index][1] for index in range(len(replies))]


def record_batch(
    ledger: LedgerParts, replies: Sequence[Reply], *, actor: str
) -> list[DispatchResult]:
    """Record every reply of one batch in one transaction; the recorded states, in order.

    As :meth:`Ledger.record` does for one: a row that moved on is read again and decided again
    (the whole batch runs again, on the write's one budget, ``settings.record_budget``), and a
    lost COMMIT acknowledgement is settled by looking for an event it carried once its
    operation settles (the batch is one transaction: one event found, all are stored). Raises
    what the store raises; nothing of the batch is recorded then, and each attempt stays
    unresolved for recovery to look up once its ``recover_after`` is due.
    """
    written: dict[int, tuple[str | None, DispatchResult]] = {}
    budget = ledger.settings.record_budget
    deadline = None if budget is None else time.monotonic() + budget.total_seconds()
    for settling in range(_SETTLE_PASSES):
        left = None if deadline is None else deadline - time.monotonic()
        try:
            return ledger.store.write(
                lambda tx: record_batch_in(tx, ledger, replies, written, actor=actor),
                label="record_batch",
                budget_s=left,
                rerun_on=(ConcurrentModification,),
            )
        except CommitUncertain as uncertain:
            if len(written) != len(replies):  # pragma: no cover - the body ran to its end
                raise
            results = [written[index][1] for index in range(len(replies))]
            carried = [
                (index, event_hash)
                for index, (event_hash, _) in sorted(written.items())
                if event_hash is not None
            ]
            if not carried:  # nothing was written: every reply was recorded before
                return results
            index, event_hash = carried[0]
            attempt = replies[index].attempt
            operation = key(attempt.tenant_id, attempt.operation_id)
            if landed(ledger.store, uncertain, operation, [event_hash]):
                return results
            if settling + 1 == _SETTLE_PASSES or (
                deadline is not None and time.monotonic() >= deadline
            ):
                raise
    raise AssertionError("unreachable")  # pragma: no cover
