"""The long-running worker: dispatch, recovery (with escalation) and sealing, in one process.

:class:`Worker` runs, over one :class:`~effectledger.app.EffectLedger` and the actions and
destinations it declares, three loops, each with its own interval and number of threads:

* **dispatch**: :meth:`EffectLedger.dispatch_ready`, the guarded executor over READY
  operations (the dispatch-time recheck runs before every claim);
* **recovery**: :meth:`EffectLedger.recover`, lookups of due uncertain attempts by their
  persisted key, never a resubmission, and escalation to MANUAL_REVIEW of what the lookups
  cannot settle;
* **sealing**: :meth:`EffectLedger.seal_pending`, every tenant's pending events into its signed
  log (only when a log key is configured).

A loop that finds a full batch goes again at once, otherwise it waits its interval. While the
store does not answer (:class:`~effectledger.errors.StorageError`) a loop backs off, doubling
its wait up to a bound, and resumes when the store returns. :meth:`Worker.stop` (the
``effectledger worker`` command calls it on SIGTERM and SIGINT) lets each thread finish the
operation in hand and start nothing new: an operation is either recorded or left claimed with
its ``recover_after``, which recovery looks up; nothing is half-recorded because every step is
one transaction. Any number of workers on any number of hosts share one PostgreSQL database:
claims are conditional updates and lookups are reserved with ``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

from effectledger.worker.runner import LoopTotals, Worker
from effectledger.worker.settings import WorkerSettings

__all__ = ["LoopTotals", "Worker", "WorkerSettings"]
