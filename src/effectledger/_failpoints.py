"""Named crash points for the fault harness.

When the environment variable ``EFFECTLEDGER_CRASH_AT`` names a point, the process kills itself
with SIGKILL on reaching it: no ``finally`` block, no atexit hook, no flushed buffer runs, exactly
like a power cut of the process. In normal runs the variable is unset and a point costs one
comparison. The names are those of docs/design.md, "Transactions", and ``export_after_write`` of
the evidence exporter (after a line is written, before its position is saved), and
``after_group_commit`` of a group commit (after a batch of two or more writes committed, before
any of their callers is answered: :mod:`effectledger.store.batching`). A worker that claims in
batches (:mod:`effectledger.workers.batches`) has four of its own: ``after_batch_claim`` (the
batch's claims committed, nothing sent), ``mid_batch_sends`` (half of the batch's replies in,
the rest in flight or not sent), ``after_batch_replies`` (every reply in, none recorded) and
``inside_batch_record`` (half of the batch's records written in its open transaction).
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_POINTS", "crash_point"]

CRASH_POINTS = (
    "after_admit",
    "after_claim",
    "destination_committed",
    "after_reply",
    "inside_record",
    "after_reserve",
    "after_lookup",
    "export_after_write",
    "after_group_commit",
    "after_batch_claim",
    "mid_batch_sends",
    "after_batch_replies",
    "inside_batch_record",
)

_ARMED = os.environ.get("EFFECTLEDGER_CRASH_AT") or None


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if the harness armed ``name``; otherwise do nothing."""
    if _ARMED is not None and name == _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
