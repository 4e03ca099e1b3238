"""Clocks: every function that depends on time takes one, so tests move time instead of sleeping."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Something that tells the current time as an aware UTC datetime."""

    def now(self) -> datetime:
        """The current time."""
        ...


class SystemClock:
    """The machine's wall clock."""

    def now(self) -> datetime:
        """``datetime.now(UTC)``."""
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to: for tests, demos and simulations."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The time this clock was last set or advanced to."""
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by ``delta`` (a timedelta or seconds) and return the new time."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        if step < timedelta(0):
            raise ValueError("a clock does not run backwards")
        with self._lock:
            self._now += step
            return self._now
