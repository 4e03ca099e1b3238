"""The SQLite store's connections: a pool that a thread borrows one from for each call.

A thread holds a connection only while a store call runs (a write with its retries, a read, one
autocommit statement, a migration) and gives it back when the call returns; a call made inside
another on the same thread (a read inside a write's body, a batch's members on its leader) is
handed the connection the outer call holds, so it sees exactly what it saw when each thread kept
its own. The most recently returned connection is lent first (its page cache is warm). At most
``size`` idle connections stay open; one given back beyond that is closed. So a host whose
framework runs every tool call on a fresh thread opens no connection per call, and keeps none
per thread that has ended: while calls run, one connection per call in flight; between calls,
``size`` at most.

A connection is never lent in the middle of a transaction (one given back so, after a failed
rollback, is closed), nor after :meth:`Pool.close` (which closes every connection, lent or
idle), nor in a forked child (:meth:`Pool.after_fork` forgets the parent's).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable

__all__ = ["POOL_SIZE", "Pool", "Pooled"]

POOL_SIZE = 8
"""Idle connections a store keeps open by default (``pool_size`` in the URL)."""


class Pooled:
    """One connection and what the store knows of it."""

    __slots__ = ("busy_ms", "connection", "generation", "read_only")

    def __init__(
        self, connection: sqlite3.Connection, *, read_only: bool, busy_ms: int, generation: int
    ) -> None:
        self.connection = connection
        self.read_only = read_only
        """Opened read-only (the file system was mounted read-only): writes are refused."""
        self.busy_ms = busy_ms
        """The busy timeout the connection has now, so setting it again costs no statement."""
        self.generation = generation


class _Held(threading.local):
    """What one thread holds: the connection of its call in progress, and how deep it is."""

    def __init__(self) -> None:
        self.entry: Pooled | None = None
        self.depth = 0


class Pool:
    """The connections of one store in this process: lent per call, kept up to ``size``.

    Lending and taking back touch no lock (a list's ``pop`` and ``append`` are atomic): an
    entry carries the generation it was opened in, and one from before a :meth:`close` or a
    fork is never lent again, whichever list it was found in.
    """

    def __init__(
        self, connect: Callable[[int], Pooled], fresh: Callable[[Pooled], bool], size: int
    ) -> None:
        self._connect = connect
        self._fresh = fresh
        self.size = size
        self._generation = 0
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[Pooled] = []
        self._open: set[Pooled] = set()
        self._held = _Held()
        self._generation += 1

    def borrow(self) -> Pooled:
        """A connection for this thread's call: the one it already holds, or the most recently
        returned one (unless ``fresh`` refuses it: one opened read-only, say), or a new one."""
        held = self._held
        entry = held.entry
        if entry is not None:
            held.depth += 1
            return entry
        generation = self._generation
        while True:
            try:
                entry = self._idle.pop()
            except IndexError:
                entry = self._opened(generation)
                break
            if entry.generation == generation and (not entry.read_only or self._fresh(entry)):
                break
            if entry.generation == generation:
                self._discard(entry)
        held.entry = entry
        held.depth = 1
        return entry

    def _opened(self, generation: int) -> Pooled:
        entry = self._connect(generation)
        with self._lock:
            if entry.generation == self._generation:
                self._open.add(entry)
        return entry

    def give_back(self, entry: Pooled) -> None:
        """The end of the call that borrowed ``entry`` (or of a call inside it)."""
        held = self._held
        if held.depth > 1:
            held.depth -= 1
            return
        held.entry = None
        held.depth = 0
        if entry.generation != self._generation:
            return  # closed by close(), or the parent's in a forked child: never lent again
        if len(self._idle) < self.size and not entry.connection.in_transaction:
            self._idle.append(entry)
            return
        self._discard(entry)

    def _discard(self, entry: Pooled) -> None:
        with self._lock:
            self._open.discard(entry)
        with contextlib.suppress(sqlite3.Error):
            entry.connection.close()

    def count(self) -> int:
        """Connections open now: lent and idle."""
        with self._lock:
            return len(self._open)

    def idle(self) -> int:
        """Connections open and idle now."""
        with self._lock:
            return sum(entry.generation == self._generation for entry in self._idle)

    def close(self) -> None:
        """Close every connection (in any thread); the next call opens a new one."""
        with self._lock:
            connections, self._open, self._idle = self._open, set(), []
            self._generation += 1
        for entry in connections:
            with contextlib.suppress(sqlite3.Error):
                entry.connection.close()

    def after_fork(self) -> None:
        """In a forked child: forget the parent's connections; this process opens its own."""
        self._reset()
