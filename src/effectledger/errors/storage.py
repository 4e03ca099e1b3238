"""Errors of the store: failure, contention, refused writes, an unacknowledged commit."""

from __future__ import annotations

from effectledger.errors.base import EffectLedgerError


class StorageError(EffectLedgerError):
    """The store failed; the transaction that was running rolled back."""

    code = "storage"
    status = 503


class StorageBusy(StorageError):
    """The store stayed locked through every bounded retry; nothing was written."""

    code = "storage_busy"


class ConstraintViolation(StorageError):
    """The database refused a write (a key, foreign key, check or append-only trigger)."""

    code = "constraint_violation"
    status = 409


class CommitUncertain(StorageError):
    """A COMMIT was sent but its acknowledgement was lost; the outcome must be checked."""

    code = "commit_uncertain"
