"""A worker that claims in batches: up to N READY operations of one destination per claim.

:func:`run_batches` is :meth:`Executor.run_ready` with ``claim_batch`` above 1. Each batch:

1. reads up to N READY operations bound to the executor's destination, after the last one the
   pass has seen (one bounded read of the queue's index, outside any transaction);
2. rechecks each with the dispatch guard (expiry, resource version, the proposal's digest),
   outside any transaction, as a lone dispatch does before its claim (the executor's
   ``batch_guard``, when it has one, reads the batch's proposals at once);
3. claims them in ONE transaction (:func:`effectledger.ledger.batches.claim_batch`): each
   operation still READY at the version rechecked gets its trail and authority checked, its
   attempt row and its ``AttemptPrepared`` event; each the recheck objected to is RELEASED with
   its ``OperationReleased``. Nothing is sent before that transaction commits;
4. sends the claims, at most the adapter's ``concurrent_sends`` at once
   (:func:`effectledger.destinations.concurrent_sends`), from threads kept for the purpose,
   while this thread reads, rechecks and claims the next batch; an adapter that declares
   nothing is sent one claim after another, in this thread, before the next batch is read;
5. records every reply in ONE transaction (:func:`effectledger.ledger.batches.record_batch`):
   on PostgreSQL on the sending threads as soon as the last reply is in (the next batch's
   claim may run meanwhile), otherwise in this thread once the next batch is claimed. The next
   batch's sends start only once this record is done.
   If that transaction fails for the store (busy past ``record_budget``, unreachable, a COMMIT
   that cannot be settled), nothing of it is recorded and every attempt stays IN_PROGRESS with
   its ``recover_after``, for recovery to look up, never to send again; if it fails for one
   operation (a rule refused one record), each reply is recorded alone instead, so only that
   one is left to recovery.

At most two batches are in hand: one being sent, the next claimed. A crash at any point leaves
each operation where a lone perform's crash at the same step leaves it: READY (its claim did
not commit), IN_PROGRESS with its attempt (claimed; sent or not: recovery looks it up by its
key and never sends it again), or recorded. The crash points are ``after_batch_claim``,
``mid_batch_sends``, ``after_batch_replies`` and ``inside_batch_record``
(:mod:`effectledger._failpoints`).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from effectledger._failpoints import crash_point
from effectledger.destinations import concurrent_sends, ensure_matches
from effectledger.errors import (
    CommitUncertain,
    ConstraintViolation,
    EffectLedgerError,
    StorageError,
)
from effectledger.ledger.batches import (
    START,
    ClaimedBatch,
    Ready,
    Reply,
    claim_batch,
    ready_batch,
    record_batch,
)
from effectledger.ledger.validation import recordable
from effectledger.model.operations import (
    DestinationRef,
    DispatchResult,
    Observation,
    OperationState,
    PreparedAttempt,
)
from effectledger.workers.executor import explained

if TYPE_CHECKING:
    from effectledger.workers.executor import Executor

__all__ = ["WALK", "run_batches"]

log = logging.getLogger("effectledger.workers")

_SIDE_BY_SIDE = frozenset({"postgres"})
"""Store dialects whose write transactions run side by side (see :class:`_Sending`)."""

WALK = 4
"""A pass reads at most this many times its ``limit`` of READY operations: operations other
claimers hold, and any left READY by a failed integrity check, are passed over, not reread."""


def run_batches(executor: Executor, *, limit: int, claim_batch: int) -> list[DispatchResult]:
    """Perform up to ``limit`` READY operations of ``executor``'s destination, ``claim_batch``
    per claim transaction (see the module docstring); what was recorded for each one taken.

    An operation another executor took is left out, as :meth:`Executor.run_ready` leaves it.
    With an adapter that takes several submissions at once, the next batch is read, rechecked
    and claimed while the sends of the one before are in flight (two batches at most: one
    being sent, one claimed); its replies are recorded before the next batch's sends start.
    """
    bound = executor._binding()
    width = concurrent_sends(executor.destination)  # a bad declaration claims nothing
    results: list[DispatchResult] = []
    position, seen, taken = START, 0, 0
    sending: _Sending | None = None
    try:
        while taken < limit and seen < WALK * limit:
            size = min(claim_batch, limit - taken)
            batch = ready_batch(executor.ledger, bound, after=position, limit=size)
            if not batch:
                break
            seen += len(batch)
            position = batch[-1].position
            claimed = _claimed(executor, bound, batch)
            results.extend(claimed.released)
            taken += len(claimed.released) + len(claimed.claimed)
            if sending is not None:
                finishing, sending = sending, None
                results.extend(finishing.finish())
            if claimed.claimed:
                sending = _Sending(executor, claimed, width)
            if len(batch) < size:  # the queue holds no more
                break
    finally:
        if sending is not None:  # what was sent is recorded, whatever stopped the pass
            results.extend(sending.finish())
    return results


def _claimed(executor: Executor, bound: DestinationRef, batch: list[Ready]) -> ClaimedBatch:
    """Recheck ``batch`` with the executor's guard, then claim it in one transaction."""
    guard, batch_guard = executor.guard, executor.batch_guard
    if guard is not None or batch_guard is not None:
        # Under this executor's own identity in each operation's tenant, as a lone dispatch.
        checks = [(executor._worker(ready.row["tenant_id"]), ready.operation) for ready in batch]
        if batch_guard is not None:
            reasons = batch_guard(checks)
        else:
            assert guard is not None
            reasons = [guard(worker, operation) for worker, operation in checks]
        batch = [ready.rechecked(reason) for ready, reason in zip(batch, reasons, strict=True)]
    picked: list[tuple[PreparedAttempt, str]] = []
    try:
        return claim_batch(
            executor.ledger, batch, picked, bound_to=bound, executor_id=executor.executor_id
        )
    except CommitUncertain as uncertain:
        return _settled(executor, uncertain, picked)


def _settled(
    executor: Executor, uncertain: CommitUncertain, picked: list[tuple[PreparedAttempt, str]]
) -> ClaimedBatch:
    """The claims of a batch whose COMMIT went unacknowledged that a fresh read proves stored
    (the batch is one transaction: all of them, or none). Nothing is sent on a guess: once a
    read cannot settle a claim, the ones after it are not read, and are left READY for the
    next pass or IN_PROGRESS for recovery."""
    confirmed: list[tuple[PreparedAttempt, str]] = []
    for prepared, pool in picked:
        try:
            found = executor._confirm(
                uncertain, prepared.tenant_id, prepared.operation_id, prepared.attempt_id
            )
        except CommitUncertain:
            log.warning(
                "claims of a batch left unsettled: %d of %d not sent",
                len(picked) - len(confirmed),
                len(picked),
            )
            break
        if found is not None:
            confirmed.append((found, pool))
    return ClaimedBatch(
        claimed=tuple(prepared for prepared, _ in confirmed),
        pools=tuple(pool for _, pool in confirmed),
    )


class _Sending:
    """One committed batch on its way: its sends started, its replies recorded in one
    transaction, and :meth:`finish` waiting for that record.

    An adapter that takes one submission at a time is sent to in the calling thread, one claim
    after another, before this returns; :meth:`finish` records. Otherwise the sends go to the
    executor's sending threads. On a store whose writers run side by side (PostgreSQL), the
    record is queued behind them on the same threads: it runs as soon as the last reply is in,
    while the calling thread claims the next batch. SQLite runs one writer at a time, and a
    record beside the next claim only waited for it (measured slower): :meth:`finish` records.
    """

    def __init__(self, executor: Executor, claimed: ClaimedBatch, width: int) -> None:
        self.executor = executor
        self.claimed = claimed
        for one in claimed.claimed:  # before anything leaves: the adapter is bound where it was
            ensure_matches(executor.destination, one.destination)
        prepared = claimed.claimed
        self._half = _Countdown(len(prepared) // 2)
        self._observations: list[Observation] = []
        self._futures: list[Future[Observation]] = []
        self._recording: Future[list[DispatchResult]] | None = None
        if width == 1:
            for one in prepared:
                self._observations.append(executor._send(one))
                self._half.tick()
            return
        senders = _senders(executor, width)
        self._futures = [senders.submit(self._send, one) for one in prepared]
        if executor.ledger.store.dialect in _SIDE_BY_SIDE:
            # Queued after every send of the batch, and no other batch's sends are queued
            # before it is done: it waits only for sends already running on other threads.
            self._recording = senders.submit(self._record, self._futures)

    def _send(self, prepared: PreparedAttempt) -> Observation:
        observation = self.executor._send(prepared)
        self._half.tick()
        return observation

    def _record(self, futures: list[Future[Observation]]) -> list[DispatchResult]:
        return self._recorded([future.result() for future in futures])

    def _recorded(self, observations: list[Observation]) -> list[DispatchResult]:
        crash_point("after_batch_replies")
        return _recorded(self.executor, self.claimed, observations)

    def finish(self) -> list[DispatchResult]:
        """The batch's recorded results, once every reply is in and recorded."""
        if self._recording is not None:
            return self._recording.result()
        if self._futures:
            return self._record(self._futures)
        return self._recorded(self._observations)


class _Countdown:
    """Fires ``mid_batch_sends`` when the given number of replies are in (never for 0)."""

    def __init__(self, at: int) -> None:
        self._left = at
        self._lock = threading.Lock()

    def tick(self) -> None:
        with self._lock:
            self._left -= 1
            reached = self._left == 0
        if reached:
            crash_point("mid_batch_sends")


def _recorded(
    executor: Executor, claimed: ClaimedBatch, observations: Sequence[Observation]
) -> list[DispatchResult]:
    """Record every reply of a batch in one transaction (see the module docstring)."""
    prepared = claimed.claimed
    replies = []
    for one, observation, pool in zip(prepared, observations, claimed.pools, strict=True):
        recorded, problem, reported = recordable(observation)
        if problem is not None:
            log.warning(
                "unrecordable reply for %s/%s recorded as Unknown: %s",
                one.tenant_id,
                one.operation_id,
                problem,
            )
        replies.append(Reply(one, recorded, problem, reported, pool))
    try:
        results = record_batch(executor.ledger, replies, actor=executor.executor_id)
    except ConstraintViolation as exc:
        results = _each_alone(executor, prepared, observations, exc)
    except StorageError as exc:  # the store did not take the batch: nothing of it is written
        log.warning(
            "results of a batch of %d not recorded (%s); they stay uncertain for recovery",
            len(prepared),
            exc.code,
        )
        results = [
            DispatchResult(
                operation_id=one.operation_id,
                state=OperationState.IN_PROGRESS,
                attempt_id=one.attempt_id,
            )
            for one in prepared
        ]
    except EffectLedgerError as exc:
        results = _each_alone(executor, prepared, observations, exc)
    return [
        explained(result, observation)
        for result, observation in zip(results, observations, strict=True)
    ]


def _each_alone(
    executor: Executor,
    prepared: Sequence[PreparedAttempt],
    observations: Sequence[Observation],
    refused: EffectLedgerError,
) -> list[DispatchResult]:
    """A batch's record refused for one of its operations (a rule, a constraint): each reply
    recorded alone, so only what is refused again is left to recovery."""
    log.warning("a batch's record was refused (%s); recording each reply alone", refused.code)
    return [
        executor._record(one, observation)
        for one, observation in zip(prepared, observations, strict=True)
    ]


_POOLS: weakref.WeakKeyDictionary[Executor, tuple[int, int, ThreadPoolExecutor]] = (
    weakref.WeakKeyDictionary()
)
_POOLS_LOCK = threading.Lock()


def _senders(executor: Executor, width: int) -> ThreadPoolExecutor:
    """The executor's sending threads, ``width`` of them: kept between batches (an adapter may
    keep a connection per thread), made anew in a forked child or when the adapter declares
    another width. A pool replaced is never shut down while a batch may still submit to it:
    dropped, its idle threads end once it is collected."""
    with _POOLS_LOCK:
        held = _POOLS.get(executor)
        if held is not None and held[:2] == (os.getpid(), width):
            return held[2]
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="effectledger-send")
        _POOLS[executor] = (os.getpid(), width, pool)
        return pool
