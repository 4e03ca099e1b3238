"""The long-running worker: dispatch, recovery (with escalation) and sealing, in one process.

:class:`Worker` runs, over one :class:`~effectledger.EffectLedger` and the actions and
destinations it declares, three loops, each with its own interval and number of threads:

* **dispatch**: :meth:`EffectLedger.dispatch_ready`, the guarded executor over READY
  operations (the dispatch-time recheck runs before every claim), claiming up to
  ``claim_batch`` operations of one destination per transaction, sending them together within
  the adapter's ``concurrent_sends`` and recording their replies in one transaction
  (:mod:`effectledger.workers.batches`);
* **recovery**: :meth:`EffectLedger.recover`, lookups of due uncertain attempts by their
  persisted key, never a resubmission, and escalation to MANUAL_REVIEW of what the lookups
  cannot settle;
* **sealing**: :meth:`EffectLedger.seal_pending`, every tenant's pending events into its signed
  log (only when a log key is configured).

A loop that finds a full batch goes again at once, otherwise it waits its interval. While the
store does not answer (:class:`~effectledger.errors.StorageError`) a loop backs off, doubling
its wait up to a bound, and resumes when the store returns. :meth:`Worker.stop` (the
``effectledger worker`` command calls it on SIGTERM and SIGINT) lets each thread finish the
pass in hand and start nothing new: an operation is either recorded or left claimed with
its ``recover_after``, which recovery looks up; nothing is half-recorded because every step is
one transaction. Any number of workers on any number of hosts share one PostgreSQL database:
claims are conditional updates, batch claims and lookups skip what another worker holds
(``FOR UPDATE SKIP LOCKED``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from effectledger.errors import (
    AuditVerificationFailed,
    CommitUncertain,
    EffectLedgerError,
    LogKeyInvalid,
    StorageBusy,
    StorageError,
    StorageFull,
    StorageReadOnly,
)
from effectledger.model.operations import DispatchResult
from effectledger.workers.recovery import RecoveryReport
from effectledger.workers.settings import WorkerSettings

if TYPE_CHECKING:
    from effectledger.audit.sealing.sealer import SealReport

__all__ = ["LoopTotals", "Passes", "Worker"]


class Passes(Protocol):
    """The three passes a worker runs: what :class:`~effectledger.EffectLedger` offers."""

    def dispatch_ready(self, *, limit: int = 100, claim_batch: int = 1) -> list[DispatchResult]:
        """Perform up to ``limit`` READY operations once each, rechecked, ``claim_batch`` of
        one destination claimed per transaction."""
        ...

    def recover(self, *, limit: int = 100) -> RecoveryReport:
        """Look up up to ``limit`` due uncertain attempts, escalating what cannot settle."""
        ...

    def seal_pending(
        self, *, witnesses: Iterable[str] = (), memory: str | None = None
    ) -> list[SealReport]:
        """Seal every tenant's pending events, cosigned by the ``URL=KEY`` witnesses, checked
        against the sealer ``memory`` file (``None``: the ledger's own)."""
        ...


log = logging.getLogger("effectledger.workers")

_STORE_DOWN = frozenset(
    {
        StorageError.code,
        StorageBusy.code,
        CommitUncertain.code,
        StorageFull.code,
        StorageReadOnly.code,
    }
)
"""Failure codes of a recovery pass that mean the store did not answer (back off)."""

Wait = Callable[[float], bool]
"""Waits up to that many seconds; ``True`` when the worker is stopping (``Event.wait``)."""


@dataclass(slots=True)
class LoopTotals:
    """What one loop has done since the worker started (all its threads together).

    ``items``: operations dispatched, lookups reserved (or escalations) and events sealed;
    ``store_down``: passes the store did not answer; ``errors``: other failed passes;
    ``resolved`` / ``escalated``: recovery's settled and escalated operations.
    """

    passes: int = 0
    items: int = 0
    store_down: int = 0
    errors: int = 0
    resolved: int = 0
    escalated: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add ``counts`` to the named totals."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        """The totals as plain data."""
        with self._lock:
            return {
                "passes": self.passes,
                "items": self.items,
                "store_down": self.store_down,
                "errors": self.errors,
                "resolved": self.resolved,
                "escalated": self.escalated,
            }


@dataclass(frozen=True, slots=True)
class _Loop:
    name: str
    step: Callable[[], int]
    interval: float
    threads: int


class _SealingOff(Exception):
    """No log key is configured: the sealing loop ends, the others go on."""


class Worker:
    """Dispatch, recovery and sealing loops over one ledger (see the package docstring).

    ``wait`` replaces the stop event's wait between passes (tests give one that records the
    waits and moves an injected clock instead of sleeping); it returns ``True`` to stop.
    """

    def __init__(
        self,
        ledger: Passes,
        settings: WorkerSettings | None = None,
        *,
        wait: Wait | None = None,
    ) -> None:
        self.ledger = ledger
        self.settings = settings or WorkerSettings()
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._threads: list[threading.Thread] = []
        self.totals = {name: LoopTotals() for name in ("dispatch", "recovery", "seal")}

    # -- the passes ----------------------------------------------------------------------

    def dispatch_pass(self) -> int:
        """One pass of the guarded executor; the number of operations taken."""
        taken = len(
            self.ledger.dispatch_ready(
                limit=self.settings.batch, claim_batch=self.settings.claim_batch
            )
        )
        if taken:
            log.info("dispatch: %d operation(s) taken", taken)
        return taken

    def recovery_pass(self) -> int:
        """One recovery pass (lookups and escalations); the number of attempts it reserved."""
        report = self.ledger.recover(limit=self.settings.batch)
        down = [code for *_, code in report.failed if code in _STORE_DOWN]
        if down and not report.due:
            raise StorageError(f"the store did not answer the recovery pass ({down[0]})")
        self.totals["recovery"].add(resolved=len(report.resolved), escalated=len(report.escalated))
        if report.due or report.failed:
            log.info(
                "recovery: due %d, looked up %d, resolved %d, still unknown %d, escalated %d, "
                "failed %d",
                report.due,
                report.looked_up,
                len(report.resolved),
                len(report.still_unknown),
                len(report.escalated),
                len(report.failed),
            )
        return report.due

    def seal_pass(self) -> int:
        """One sealing pass over every tenant; the number of events sealed."""
        try:
            reports = self.ledger.seal_pending(
                witnesses=self.settings.seal_witnesses, memory=self.settings.sealer_memory
            )
        except LogKeyInvalid as exc:
            raise _SealingOff(exc.message) from exc
        sealed = sum(report.sealed for report in reports)
        if sealed:
            log.info("seal: %d event(s) sealed", sealed)
        return sealed

    def loops(self) -> list[_Loop]:
        """The loops this worker runs, by its settings (a loop with no threads is off)."""
        s = self.settings
        loops = [
            _Loop("dispatch", self.dispatch_pass, s.dispatch_interval, s.dispatch_threads),
            _Loop("recovery", self.recovery_pass, s.recovery_interval, s.recovery_threads),
        ]
        if s.seal_interval is not None:
            loops.append(_Loop("seal", self.seal_pass, s.seal_interval, 1))
        return [loop for loop in loops if loop.threads > 0]

    def run_once(self) -> dict[str, int]:
        """One pass of each loop in this thread, in order; what each took. Raises what fails."""
        done: dict[str, int] = {}
        for loop in self.loops():
            try:
                done[loop.name] = loop.step()
            except _SealingOff as off:
                log.info("seal: off (%s)", off)
            else:
                self.totals[loop.name].add(passes=1, items=done[loop.name])
        return done

    # -- running and stopping ------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def start(self) -> None:
        """Start every loop's threads in the background (``serve --worker``)."""
        if self._threads:
            raise RuntimeError("this worker has started already")
        for loop in self.loops():
            for index in range(loop.threads):
                thread = threading.Thread(
                    target=self._run_loop, args=(loop,), name=f"{loop.name}-{index}", daemon=True
                )
                self._threads.append(thread)
        shown = (f"{loop.name} every {loop.interval:g}s x{loop.threads}" for loop in self.loops())
        log.info("worker started: %s", ", ".join(shown))
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Ask every loop to finish the operation in hand and start nothing new."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the loops to end; ``True`` when all have."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in self._threads)

    def run(self) -> None:
        """Run the loops until :meth:`stop` (from a signal handler or another thread)."""
        self.start()
        # Waiting in slices keeps the main thread responsive to signals.
        while not self._stop.wait(0.5):
            if not any(thread.is_alive() for thread in self._threads):
                break
        self.join()
        log.info("worker stopped")

    def _run_loop(self, loop: _Loop) -> None:
        totals = self.totals[loop.name]
        failures = 0
        while not self._stop.is_set():
            try:
                taken = loop.step()
            except _SealingOff as off:
                log.info("%s: off (%s)", loop.name, off)
                return
            except StorageError as exc:
                totals.add(store_down=1)
                delay = min(self.settings.backoff_initial * 2**failures, self.settings.backoff_max)
                failures += 1
                log.warning(
                    "%s: the store does not answer [%s]; retrying in %gs",
                    loop.name,
                    exc.code,
                    delay,
                )
                if self._wait(delay):
                    return
                continue
            except AuditVerificationFailed as exc:
                totals.add(errors=1)
                # The log or an event does not verify: nothing was signed, and nothing will be
                # until an operator looks (docs/operating.md, "When the sealer refuses").
                log.error(
                    '%s: refused to sign [%s/%s]: %s (docs/operating.md, "When the sealer '
                    'refuses")',
                    loop.name,
                    exc.code,
                    exc.details.get("reason"),
                    exc.message,
                )
                if self._wait(loop.interval):
                    return
                continue
            except EffectLedgerError as exc:
                totals.add(errors=1)
                log.warning("%s: pass failed [%s]: %s", loop.name, exc.code, exc.message)
                if self._wait(loop.interval):
                    return
                continue
            except Exception as exc:  # a loop never dies of one bad pass
                totals.add(errors=1)
                # Only the type: an exception's text may carry payload or secrets.
                log.error("%s: pass raised %s", loop.name, type(exc).__name__)
                if self._wait(loop.interval):
                    return
                continue
            if failures:
                log.info("%s: the store answers again after %d failed passes", loop.name, failures)
                failures = 0
            totals.add(passes=1, items=taken)
            if taken >= self.settings.batch:
                continue  # a full batch: more may be waiting
            if self._wait(loop.interval):
                return
