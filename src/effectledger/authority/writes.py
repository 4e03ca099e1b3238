"""How the authority's transactions are run: locks first, and one re-run on a racing winner."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from effectledger.errors import ConcurrentModification, ConstraintViolation
from effectledger.store import Store, Transaction

__all__ = ["write"]

T = TypeVar("T")


def write(store: Store, body: Callable[[Transaction], T], label: str) -> T:
    """Run ``body`` in one transaction of ``store``, again on fresh rows if a racer won.

    Every body takes its locks first, so contention waits instead of failing; a racing writer
    that still wins (a key another transaction inserted first, a moved version) is answered by
    re-running the body on fresh rows, never by leaking its text. The re-runs are the store's
    own, on its one retry budget.
    """
    return store.write(body, label=label, rerun_on=(ConstraintViolation, ConcurrentModification))
