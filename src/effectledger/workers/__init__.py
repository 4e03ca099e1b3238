"""The two workers: the executor that performs an admitted operation once, and the recovery
worker that settles an uncertain one by lookup, never by sending again.

:class:`~effectledger.EffectLedger` holds one guarded executor per destination
(:meth:`~effectledger.EffectLedger.executor_for`) and one recovery worker
(:meth:`~effectledger.EffectLedger.recover`); these classes are the lower layer for those who
run them by hand (see docs/scaling.md).
"""

from effectledger.workers.executor import DispatchGuard, ExecutionStep, Executor
from effectledger.workers.recovery import RecoveryReport, RecoveryWorker

__all__ = ["DispatchGuard", "ExecutionStep", "Executor", "RecoveryReport", "RecoveryWorker"]
