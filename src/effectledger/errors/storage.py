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


class StorageFull(StorageError):
    """The store has no room left (a full disk or quota); the transaction rolled back whole.

    Nothing of the refused write is kept; reads still answer. Free space and the same call
    succeeds: a worker backs off and resumes by itself.
    """

    code = "storage_full"


class StorageReadOnly(StorageError):
    """The store only reads (a read-only file system or server); nothing was written.

    Reads still answer. Once the store is writable again the same call succeeds.
    """

    code = "storage_read_only"
