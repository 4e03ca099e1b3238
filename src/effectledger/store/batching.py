"""Group commit: concurrent writes of one store, in one process, share one durable commit.

A write issued while another write of the same store is in progress waits in a queue. The
thread that finds no batch running leads: it takes what is queued (at most ``limit`` writes, no
waiting for more, so a lone write pays nothing), and a batch of one runs as an ordinary write.
With ``by_label`` (PostgreSQL) a batch holds writes of one label only: writes of one kind take
their locks in one order, so two processes' batches cannot hold locks in crossed orders (an
admission's pool lock then a totals row, and a record's totals row, would deadlock).
A batch of several runs in ONE transaction, each body between ``SAVEPOINT`` and ``RELEASE``,
then ONE ``COMMIT``; each caller is answered only after that commit, with its own body's result.

Whatever is not certain to be committed is never reported as done:

* a body that raises is rolled back to its savepoint (the others go on) and, once the batch has
  committed, its caller runs it again as a write of its own: its outcome (a denial, a translated
  driver error, a re-run for ``rerun_on``) is exactly what a lone write would give;
* a batch refused as a whole (busy, a serialization failure, a deadlock, a connection lost
  before ``COMMIT``, an error answering ``COMMIT``) committed nothing: every member runs alone,
  each with its own retry budget (``max_attempts`` runs, and ``budget_s`` less the time it
  already waited);
* a ``COMMIT`` whose answer was lost is :class:`~effectledger.errors.CommitUncertain` for every
  member it held, exactly as for a lone write.

The dialects' batch runners are :mod:`effectledger.store.group_sqlite` and
:mod:`effectledger.store.group_postgres`; a store turns this on with ``group_commit=on``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from effectledger._failpoints import crash_point
from effectledger.errors import InvalidInput, StorageBusy
from effectledger.store import forks

__all__ = [
    "ALONE",
    "BATCH_LIMIT",
    "FAILED",
    "HELD",
    "GroupCommitter",
    "Member",
    "on_off",
]

T = TypeVar("T")
BATCH_LIMIT = 32
"""At most this many writes share one commit (the rest wait for the next batch)."""

WAITING, TAKEN, HELD = "waiting", "taken", "held"
DONE, FAILED, ALONE = "done", "failed", "alone"
"""A member's states: queued; taken into a batch; run in a batch not yet committed; answered
with a value; answered with an error; to be run again by its caller as a write of its own."""
_PENDING = frozenset({WAITING, TAKEN, HELD})

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


def on_off(value: bool | str, field: str = "group_commit") -> bool:
    """``value`` as a switch: a bool, or ``on/off``, ``true/false``, ``yes/no``, ``1/0``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _ON | _OFF:
        return value.lower() in _ON
    raise InvalidInput(f"{field} must be on or off", field=field)


class Member(Generic[T]):
    """One queued write: its body and options, and once answered its value or error."""

    __slots__ = ("body", "budget_s", "error", "label", "rerun_on", "started", "state", "value")

    def __init__(
        self,
        body: Callable[[Any], T],
        label: str,
        budget_s: float | None,
        rerun_on: tuple[type[Exception], ...],
    ) -> None:
        self.body = body
        self.label = label
        self.budget_s = budget_s
        self.rerun_on = rerun_on
        self.started = time.monotonic()
        self.state = WAITING
        self.value: T | None = None
        self.error: BaseException | None = None

    def left_s(self) -> float | None:
        """Seconds of this write's time budget left (``None`` without a budget)."""
        if self.budget_s is None:
            return None
        return self.budget_s - (time.monotonic() - self.started)


class Alone(Protocol):
    """A store's write: while :meth:`GroupCommitter.alone` says so in this thread, one
    transaction of its own, with its retries."""

    def __call__(
        self,
        body: Callable[[Any], T],
        *,
        label: str,
        budget_s: float | None,
        rerun_on: tuple[type[Exception], ...],
    ) -> T: ...


BatchRunner = Callable[[list[Member[Any]]], bool]
"""Runs a batch of two or more members in one transaction. Sets each member's state: ``HELD``
members (with their value) are in the transaction, ``ALONE`` ones are not; answers ``True`` if it
committed; on ``CommitUncertain`` sets the held members ``FAILED`` with it and answers ``True``;
on a batch refused whole sets every member ``ALONE`` and answers ``False``."""


class _Here(threading.local):
    """What one thread of the process is doing: running a write alone (bypassing the queue)."""

    alone = False


class GroupCommitter:
    """The queue of one store's writes in this process, and the batches that commit them."""

    def __init__(
        self,
        alone: Alone,
        run_batch: BatchRunner,
        *,
        limit: int = BATCH_LIMIT,
        by_label: bool = False,
    ) -> None:
        if limit < 1:
            raise InvalidInput("a batch holds at least one write", field="limit")
        self._alone = alone
        self._run_batch = run_batch
        self.limit = limit
        self.by_label = by_label
        """Batch only writes of one label (one kind of transaction) together."""
        self._reset()
        forks.watch(self)

    def after_fork(self) -> None:
        """In a forked child: the parent's queue and lock are not this process's."""
        self._reset()

    def alone(self) -> bool:
        """Whether this thread is running a write alone (the store then bypasses the queue)."""
        return self._here.alone

    def _reset(self) -> None:
        self._here = _Here()
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._queue: list[Member[Any]] = []
        self._leading = False
        self.batches = 0
        """Batches of two or more committed so far (for tests and benchmarks)."""
        self.grouped = 0
        """Writes answered from those batches."""

    def write(
        self,
        body: Callable[[Any], T],
        label: str,
        budget_s: float | None,
        rerun_on: tuple[type[Exception], ...],
    ) -> T:
        """Run ``body`` in the next batch (see the module); answer after its commit."""
        with self._lock:
            solo = not self._leading and not self._queue
            if solo:
                self._leading = True
        if solo:  # no write in progress nor queued: a batch of one, led at once, nothing queued
            try:
                return self._run_solo(body, label, budget_s, rerun_on)
            finally:
                with self._lock:
                    self._leading = False
                    queued = bool(self._queue)
                if queued:  # those who queued meanwhile wait for the lead
                    with self._condition:
                        self._condition.notify_all()
        member: Member[T] = Member(body, label, budget_s, rerun_on)
        condition = self._condition
        with condition:
            self._queue.append(member)
        while True:
            with condition:
                while member.state in _PENDING and (self._leading or member.state != WAITING):
                    if not self._wait(member):
                        self._queue.remove(member)
                        raise StorageBusy(
                            f"{label}: the write's time budget ran out while it was queued",
                            attempts=0,
                        )
                if member.state not in _PENDING:
                    break
                self._leading = True  # a waiting member and nobody leading: lead
                batch = self._take()
                for taken in batch:
                    taken.state = TAKEN
            try:
                self._lead(batch)
            finally:
                with condition:
                    self._leading = False
                    for other in batch:
                        if other.state in _PENDING:  # the leader was interrupted: run alone
                            other.state = ALONE
                    condition.notify_all()
        return self._answer(member)

    def _take(self) -> list[Member[Any]]:
        """The next batch, out of the queue: the oldest writes (of the oldest one's label)."""
        queue = self._queue
        if not self.by_label:
            batch, queue[: self.limit] = queue[: self.limit], []
            return batch
        label = queue[0].label
        batch = [member for member in queue if member.label == label][: self.limit]
        taken = {id(member) for member in batch}
        queue[:] = [member for member in queue if id(member) not in taken]
        return batch

    def _wait(self, member: Member[Any]) -> bool:
        """Wait for a change; ``False`` if the budget ran out while the member was queued."""
        left = member.left_s()
        if left is None or member.state != WAITING:  # no budget, or in a batch: wait it out
            self._condition.wait()
            return True
        if left > 0:
            self._condition.wait(left)
            left = member.left_s()
        return member.state != WAITING or left is None or left > 0

    def _lead(self, batch: list[Member[Any]]) -> None:
        if len(batch) == 1:  # nothing to share: an ordinary write, while the others queue
            self._settle_alone(batch[0])
            return
        committed = self._run_batch(batch)
        if committed:
            crash_point("after_group_commit")
            held = [member for member in batch if member.state == HELD]
            for member in held:
                member.state = DONE
            if held:
                self.batches += 1
                self.grouped += len(held)

    def _settle_alone(self, member: Member[Any]) -> None:
        try:
            member.value = self._run_alone(member)
            member.state = DONE
        except Exception as exc:
            member.error = exc
            member.state = FAILED

    def _run_solo(
        self,
        body: Callable[[Any], T],
        label: str,
        budget_s: float | None,
        rerun_on: tuple[type[Exception], ...],
    ) -> T:
        here = self._here
        here.alone = True
        try:
            return self._alone(body, label=label, budget_s=budget_s, rerun_on=rerun_on)
        finally:
            here.alone = False

    def _run_alone(self, member: Member[T]) -> T:
        left = member.left_s()
        self._here.alone = True
        try:
            return self._alone(
                member.body,
                label=member.label,
                budget_s=None if left is None else max(0.0, left),
                rerun_on=member.rerun_on,
            )
        finally:
            self._here.alone = False

    def _answer(self, member: Member[T]) -> T:
        if member.state == ALONE:
            return self._run_alone(member)
        if member.state == FAILED:
            assert member.error is not None
            raise member.error
        return member.value  # type: ignore[return-value]
