"""One retry budget for a store's transaction: how many runs, and until when.

Both stores re-run a transaction that the database refused for a reason that re-running cures
(a busy SQLite file, a PostgreSQL serialization failure or deadlock, a connection lost before
``COMMIT`` was sent). Every re-run of one call draws on one :class:`RetryBudget`: at most
``max_attempts`` runs in all, and with a time budget none starts once it is spent. The ledger's
own steps never loop around a store call, so a call's body runs at most ``max_attempts`` times.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from effectledger.errors import StorageBusy

__all__ = ["RetryBudget"]


class RetryBudget:
    """At most ``max_attempts`` runs of one transaction, none started after the time budget."""

    __slots__ = ("attempt", "deadline", "label", "max_attempts")

    def __init__(self, label: str, max_attempts: int, budget_s: float | None = None) -> None:
        self.label = label
        self.max_attempts = max_attempts
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self.attempt = 0

    def attempts(self) -> Iterator[int]:
        """Yield 1, 2, ... for each run; raise :class:`StorageBusy` once the time is spent."""
        for attempt in range(1, self.max_attempts + 1):
            if self.deadline is not None and self.left_s() <= 0:
                raise StorageBusy(
                    f"{self.label}: the write's time budget ran out", attempts=attempt - 1
                )
            self.attempt = attempt
            yield attempt

    def left_s(self) -> float:
        """Seconds of the time budget left (infinite without one; negative once spent)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - time.monotonic()

    def may_retry(self, pause_s: float = 0.0) -> bool:
        """Whether another run is allowed after pausing ``pause_s`` seconds."""
        if self.attempt >= self.max_attempts:
            return False
        return self.deadline is None or pause_s < self.left_s()
