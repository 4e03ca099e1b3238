"""The one place where psycopg's and the pool's errors become effectledger errors."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from effectledger.errors import (
    CommitUncertain,
    ConstraintViolation,
    StorageBusy,
    StorageError,
    StorageFull,
    StorageReadOnly,
)
from effectledger.store import redact

__all__ = ["RETRY_STATES", "Lost", "translate"]

# SQLSTATEs after which re-running the whole transaction is the documented remedy.
RETRY_STATES = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
# lock_not_available, too_many_connections, query_canceled (a write's time budget ran out)
_BUSY_STATES = RETRY_STATES | {"55P03", "53300", "57014"}


class Lost(Exception):
    """The connection broke; ``at_commit`` says whether COMMIT may have reached the server.

    Internal to the PostgreSQL store: :func:`translate` turns it into :class:`CommitUncertain`
    or :class:`StorageError` before it leaves the store.
    """

    def __init__(self, error: psycopg.Error, *, at_commit: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.at_commit = at_commit


def _said(exc: BaseException) -> str:
    """The driver's message on one line: libpq separates its hints with newlines and tabs,
    which an error message (one line on the command line, in a log) shows as escapes."""
    return " ".join(str(exc).split())


def translate(exc: BaseException, label: str, *, attempts: int = 1) -> StorageError:
    """The effectledger error for a driver or pool error raised while running ``label``."""
    if isinstance(exc, Lost):
        if exc.at_commit:
            return CommitUncertain(
                f"{label}: the connection was lost while COMMIT was in flight; the transaction "
                "may or may not have committed",
                label=label,
            )
        return StorageError(
            redact(f"{label}: the connection to PostgreSQL was lost: {_said(exc.error)}")
        )
    if isinstance(exc, PoolTimeout):
        return StorageBusy(f"{label}: no database connection became free in time", label=label)
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate or ""
        if isinstance(exc, psycopg.IntegrityError) or state.startswith("23"):
            return ConstraintViolation(
                redact(f"{label}: the database refused the write: {_said(exc)}")
            )
        if state in _BUSY_STATES:
            return StorageBusy(
                f"{label}: the database stayed contended ({state})", attempts=attempts
            )
        if state == "53100":  # disk_full
            return StorageFull(
                redact(
                    f"{label}: the database server's disk is full; nothing was written: "
                    f"{_said(exc)}"
                ),
                label=label,
            )
        if state == "25006":  # read_only_sql_transaction: a standby, or a read-only server
            return StorageReadOnly(
                redact(
                    f"{label}: the database server only reads; nothing was written: {_said(exc)}"
                ),
                label=label,
            )
        if isinstance(exc, pg_errors.UndefinedTable):
            return StorageError(
                redact(f"{label}: the ledger schema is missing; run migrate: {_said(exc)}")
            )
        return StorageError(redact(f"{label}: {type(exc).__name__}: {_said(exc)}"))
    return StorageError(redact(f"{label}: {type(exc).__name__}: {_said(exc)}"))  # pragma: no cover
