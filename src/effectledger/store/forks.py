"""Which process a store's handles belong to, known without a system call on every use.

A forked child must never reuse its parent's handles: SQLite's connections, PostgreSQL's pooled
sockets and the pool's threads, a group committer's queue and lock. Each of those registers
here (:func:`watch`); :func:`os.register_at_fork` runs :meth:`Forked.after_fork` on every
registered object in the child, once, as ``os.fork`` returns there (``multiprocessing``'s fork
start method included), before any of the child's own code. Their hot paths then read what they
hold instead of comparing ``os.getpid()`` on each connection access. A child that ``exec``s at
once (``subprocess``) runs no Python and is not concerned.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["Forked", "watch"]


class Forked(Protocol):
    """An object holding handles that a forked child must not use."""

    def after_fork(self) -> None:
        """Forget (or refuse) the parent's handles: this is the child."""
        ...


_WATCHED: weakref.WeakSet[Forked] = weakref.WeakSet()


def watch(holder: Forked) -> None:
    """Tell ``holder`` in each child forked from now on, for as long as it lives."""
    _WATCHED.add(holder)


def _in_child() -> None:
    for holder in list(_WATCHED):
        holder.after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_in_child)
