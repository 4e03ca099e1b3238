"""Reading back a write whose COMMIT acknowledgement was lost."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from effectledger.errors import CommitUncertain, StorageError
from effectledger.store import Store, Transaction

__all__ = ["landed"]

log = logging.getLogger("effectledger.ledger")


def _present(tx: Transaction, operation: Mapping[str, str], event_hashes: list[str]) -> set[str]:
    tx.one("operation_settle", operation)
    return {
        found
        for found in event_hashes
        if tx.one("event_present", {**operation, "event_hash": found})
    }


def landed(
    store: Store, uncertain: CommitUncertain, operation: Mapping[str, str], event_hashes: list[str]
) -> set[str]:
    """Which of the events a write computed are stored, once its operation has settled.

    For a write whose COMMIT acknowledgement was lost: waits (as :meth:`Ledger.committed_claim`
    does) until no transaction that changed the operation is open, then looks the events up.
    If even that fails, the original :class:`CommitUncertain` is raised.
    """
    log.warning("%s: COMMIT unacknowledged, reading back", uncertain.details.get("label"))
    try:
        found: set[str] = store.write(
            lambda tx: _present(tx, operation, event_hashes), label="settle"
        )
    except StorageError as exc:
        raise uncertain from exc
    return found
