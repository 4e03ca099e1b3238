"""What the SQLite store makes of SQLite's refusals, and of a file system mounted read-only.

A busy or locked file is :class:`~effectledger.errors.StorageBusy` (the store retries it), a
refused constraint :class:`~effectledger.errors.ConstraintViolation`, a full disk
:class:`~effectledger.errors.StorageFull` and a file that cannot be written
:class:`~effectledger.errors.StorageReadOnly`. On a file system mounted read-only the ledger's
file is opened read-only as it stands, through a WAL left behind if there is one.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from effectledger.errors import (
    ConstraintViolation,
    StorageBusy,
    StorageError,
    StorageFull,
    StorageReadOnly,
)
from effectledger.store.hashes import SQLITE_TYPE, packed_or_text, unpack_hash

__all__ = [
    "MAX_ATTEMPTS",
    "OPEN_OPTIONS",
    "connect",
    "is_busy",
    "on_read_only_fs",
    "open_read_only",
    "translate",
]

_BUSY_CODES = frozenset({5, 6, 261, 262, 517})  # SQLITE_BUSY, SQLITE_LOCKED and extended codes
MAX_ATTEMPTS = 3
OPEN_OPTIONS: dict[str, Any] = {
    "isolation_level": None,  # the store issues BEGIN IMMEDIATE / COMMIT itself
    "check_same_thread": False,
    "timeout": 0,
    "detect_types": sqlite3.PARSE_DECLTYPES,  # hash columns (DIGEST) read back as strings
}
"""How every connection to a ledger file opens (``sqlite3.connect`` keywords)."""


def connect(target: str | Path, **options: Any) -> sqlite3.Connection:
    """A connection to a ledger file, opened as every connection of the store is."""
    connection: sqlite3.Connection = sqlite3.connect(target, **OPEN_OPTIONS, **options)
    # Migration 15 packs the hash columns written as text before it.
    connection.create_function("effectledger_pack_hash", 1, packed_or_text, deterministic=True)
    return connection


sqlite3.register_converter(SQLITE_TYPE, unpack_hash)
_SQLITE_READONLY = 8  # primary result codes (the low byte of an extended code)
_SQLITE_FULL = 13


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the file (a retry may pass)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def translate(exc: sqlite3.Error, label: str, *, attempts: int = MAX_ATTEMPTS) -> StorageError:
    """The store's error for SQLite's ``exc`` during ``label``."""
    if isinstance(exc, sqlite3.IntegrityError):
        return ConstraintViolation(f"{label}: the database refused the write: {exc}")
    if is_busy(exc):
        return StorageBusy(f"{label}: the database stayed locked", attempts=attempts)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary == _SQLITE_FULL:
        return StorageFull(
            f"{label}: the disk holding the ledger is full; nothing was written", label=label
        )
    if primary == _SQLITE_READONLY:
        return StorageReadOnly(
            f"{label}: the ledger file cannot be written; nothing was written", label=label
        )
    return StorageError(f"{label}: {type(exc).__name__}: {exc}")


def on_read_only_fs(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def open_read_only(path: Path) -> sqlite3.Connection:
    """The ledger file on a read-only mount, opened read-only as it stands.

    Nobody can write the file through this mount, so SQLite may read it without the WAL index
    it can no longer create: reads answer, writes are refused. A WAL left behind (a process
    that did not close) holds commits: the file is read through it.
    """
    wal = Path(f"{path}-wal")
    kept = wal.is_file() and wal.stat().st_size > 0
    uri = path.absolute().as_uri() + ("?mode=ro" if kept else "?mode=ro&immutable=1")
    return connect(uri, uri=True)
