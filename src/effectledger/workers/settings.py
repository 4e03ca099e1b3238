"""How often and with how many threads each loop of the :class:`~.runner.Worker` runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from effectledger.errors import InvalidInput

__all__ = ["CLAIM_BATCH", "WorkerSettings"]

CLAIM_BATCH = 32
"""The dispatch loop's default claim batch (docs/scaling.md, "Claiming in batches", has the
figures it was chosen from)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """Intervals in seconds, thread counts and batch sizes of the worker's loops.

    ``dispatch_interval`` / ``recovery_interval`` / ``seal_interval``: how long a loop waits
    after a pass that did not fill its batch (``seal_interval=None`` turns sealing off).
    ``dispatch_threads`` / ``recovery_threads``: threads per loop (sealing runs in one).
    ``seal_witnesses``: ``URL=KEY`` of each witness that cosigns the checkpoints (none).
    ``sealer_memory``: the file where the sealer keeps the last tree it signed per log
    (``None``: the ledger's own, ``sealer-memory.json`` in its key directory).
    ``batch``: operations a pass takes at most. ``claim_batch``: READY operations of one
    destination the dispatch loop claims in one transaction, sends together (within the
    adapter's ``concurrent_sends``) and records in one transaction; 1 claims, sends and records
    each operation on its own (:mod:`effectledger.workers.batches`). ``backoff_initial`` /
    ``backoff_max``: the first and the longest wait while the store does not answer (doubling
    in between).
    """

    dispatch_interval: float = 1.0
    dispatch_threads: int = 1
    recovery_interval: float = 5.0
    recovery_threads: int = 1
    seal_interval: float | None = 30.0
    seal_witnesses: tuple[str, ...] = ()
    sealer_memory: str | None = None
    batch: int = 100
    claim_batch: int = CLAIM_BATCH
    backoff_initial: float = 0.5
    backoff_max: float = 30.0

    def __post_init__(self) -> None:
        for name in ("dispatch_interval", "recovery_interval", "backoff_initial", "backoff_max"):
            _positive(name, getattr(self, name))
        if self.seal_interval is not None:
            _positive("seal_interval", self.seal_interval)
        if not isinstance(self.seal_witnesses, tuple) or not all(
            isinstance(witness, str) and "=" in witness for witness in self.seal_witnesses
        ):
            raise InvalidInput(
                "seal_witnesses must be a tuple of URL=KEY strings", field="seal_witnesses"
            )
        if self.sealer_memory is not None and (
            not isinstance(self.sealer_memory, str) or not self.sealer_memory.strip()
        ):
            raise InvalidInput("sealer_memory must be a file path", field="sealer_memory")
        for name in ("dispatch_threads", "recovery_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 256:
                raise InvalidInput(f"{name} must be a whole number from 0 to 256", field=name)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int):
            raise InvalidInput("batch must be a whole number", field="batch")
        if not 1 <= self.batch <= 10_000:
            raise InvalidInput("batch must be from 1 to 10000", field="batch")
        if isinstance(self.claim_batch, bool) or not isinstance(self.claim_batch, int):
            raise InvalidInput("claim_batch must be a whole number", field="claim_batch")
        if not 1 <= self.claim_batch <= 10_000:
            raise InvalidInput("claim_batch must be from 1 to 10000", field="claim_batch")
        if self.backoff_max < self.backoff_initial:
            raise InvalidInput("backoff_max must not be below backoff_initial", field="backoff_max")


def _positive(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidInput(f"{name} must be a number of seconds greater than 0", field=name)
