"""The workers: the executor that performs an admitted operation once, the recovery worker that
settles an uncertain one by lookup (never by sending again), and the long-running process that
runs their passes with the sealer (:class:`Worker`, what ``effectledger worker`` runs).

:class:`~effectledger.EffectLedger` holds one guarded executor per destination
(:meth:`~effectledger.EffectLedger.executor_for`) and runs recovery
(:meth:`~effectledger.EffectLedger.recover`); these classes are the lower layer for those who
run them by hand (see docs/scaling.md and docs/operating.md).
"""

from effectledger.workers.executor import DispatchGuard, ExecutionStep, Executor
from effectledger.workers.process import LoopTotals, Passes, Worker
from effectledger.workers.recovery import RecoveryReport, RecoveryWorker
from effectledger.workers.settings import WorkerSettings

__all__ = [
    "DispatchGuard",
    "ExecutionStep",
    "Executor",
    "LoopTotals",
    "Passes",
    "RecoveryReport",
    "RecoveryWorker",
    "Worker",
    "WorkerSettings",
]
