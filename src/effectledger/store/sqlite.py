"""The SQLite store: one file, WAL, ``BEGIN IMMEDIATE`` for every write, bounded busy retries.

Python's ``sqlite3`` is opened with ``isolation_level=None`` so the store issues ``BEGIN
IMMEDIATE`` / ``COMMIT`` itself: a deferred transaction that later writes is what produces
unrecoverable ``SQLITE_BUSY`` under contention. Each thread gets its own connection.

A full disk raises :class:`~effectledger.errors.StorageFull` and a file that cannot be written
:class:`~effectledger.errors.StorageReadOnly`; the transaction rolls back whole. On a file
system mounted read-only the file is opened read-only as it stands (through a WAL left behind,
if any): reads answer, every write raises ``StorageReadOnly``, and once the file system is
writable again each thread's next call reconnects normally.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from effectledger.errors import (
    ConstraintViolation,
    InvalidInput,
    NotFound,
    StorageBusy,
    StorageError,
    StorageFull,
    StorageReadOnly,
)
from effectledger.model.operations import Row
from effectledger.sql import SYNCHRONOUS_LEVELS, fill, load_queries, load_statements, migrations
from effectledger.store.hashes import SQLITE_TYPE, pack_row, packed_or_text, storable, unpack_hash
from effectledger.store.retry import RetryBudget

__all__ = ["SQLiteStore"]

T = TypeVar("T")
_BUSY_CODES = frozenset({5, 6, 261, 262, 517})  # SQLITE_BUSY, SQLITE_LOCKED and extended codes
MAX_ATTEMPTS = 3
_SQLITE_READONLY = 8  # primary result codes (the low byte of an extended code)
_SQLITE_FULL = 13
_DECLTYPES = sqlite3.PARSE_DECLTYPES
# Hash columns (declared ``DIGEST BLOB``) read back as their strings: effectledger.store.hashes.
sqlite3.register_converter(SQLITE_TYPE, unpack_hash)
CACHE_KIB = 65536
"""Each connection's page cache (``PRAGMA cache_size``), in KiB: 64 MiB holds the inner pages
of every index of a ledger of millions of operations, where SQLite's own default is 2 MiB
(docs/scaling.md, "A long history"). Memory is taken as pages are read, per connection (one
per thread): ``cache_kib`` in the URL sets it."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def _translate(exc: sqlite3.Error, label: str, *, attempts: int = MAX_ATTEMPTS) -> StorageError:
    if isinstance(exc, sqlite3.IntegrityError):
        return ConstraintViolation(f"{label}: the database refused the write: {exc}")
    if _is_busy(exc):
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


def _on_read_only_fs(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class _Transaction:
    __slots__ = ("_compound", "_connection", "_queries")

    def tables(self) -> _Tables:
        """Whole-table access to this transaction, for moving a ledger to another store."""
        return _Tables(self._connection)

    def __init__(
        self,
        connection: sqlite3.Connection,
        queries: Mapping[str, str],
        compound: Mapping[str, tuple[str, ...]],
    ) -> None:
        self._connection = connection
        self._queries = queries
        self._compound = compound

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        params = storable(params)
        steps = self._compound.get(name)
        if steps is None:
            row: Row | None = self._connection.execute(self._queries[name], params).fetchone()
            return row
        # A query of several statements answers with its first one, run to its end first.
        rows = self._connection.execute(steps[0], params).fetchall()
        for statement in steps[1:]:
            self._connection.execute(statement, params)
        return rows[0] if rows else None

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        params = storable(params)
        return list(self._connection.execute(self._queries[name], params).fetchall())

    def run(self, name: str, params: Mapping[str, Any]) -> int:
        params = storable(params)
        steps = self._compound.get(name)
        if steps is None:
            return self._connection.execute(self._queries[name], params).rowcount
        count = 0
        for statement in steps:  # a query of several statements counts its last one
            count = self._connection.execute(statement, params).rowcount
        return count

    def queue(self, name: str, params: Mapping[str, Any]) -> None:
        self.run(name, params)  # in process: nothing to save by waiting


_COPY = load_statements("sqlite", "copy.sql")


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)  # names checked by store.copying


class _Tables:
    """Whole-table reads and writes for moving a ledger (:mod:`effectledger.store.copying`)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def tables(self) -> list[str]:
        return [str(row[0]) for row in self._connection.execute(_COPY["copy_tables"])]

    def columns(self, table: str) -> list[str]:
        rows = self._connection.execute(_COPY["copy_columns"], {"table": table})
        return [str(row[0]) for row in rows]

    def count(self, table: str) -> int:
        row = self._connection.execute(_COPY["copy_count"].format(table=_quoted([table])))
        return int(row.fetchone()[0])

    def page(
        self,
        table: str,
        columns: Sequence[str],
        order: Sequence[str],
        after: Sequence[Any] | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        names = {"table": _quoted([table]), "columns": _quoted(columns), "order": _quoted(order)}
        params: dict[str, Any] = {"limit": limit}
        if after is None:
            statement = _COPY["copy_first"].format(**names)
        else:
            marks = ", ".join(f":k{index}" for index in range(len(after)))
            statement = _COPY["copy_after"].format(after=marks, **names)
            params.update({f"k{index}": value for index, value in enumerate(after)})
        return [tuple(row) for row in self._connection.execute(statement, params)]

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        statement = _COPY["copy_insert"].format(
            table=_quoted([table]),
            columns=_quoted(columns),
            values=", ".join("?" for _ in columns),
        )
        self._connection.executemany(statement, [pack_row(columns, row) for row in rows])

    def clear(self, table: str) -> None:
        self._connection.execute(_COPY["copy_clear"].format(table=_quoted([table])))


class SQLiteStore:
    """A ledger in one SQLite file; safe to share between threads and processes."""

    dialect = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
        cache_kib: int = CACHE_KIB,
        max_attempts: int = MAX_ATTEMPTS,
        migrate: bool = True,
        create: bool = True,
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_LEVELS:
            raise InvalidInput(f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}")
        if busy_timeout_ms < 0 or max_attempts < 1:
            raise InvalidInput("busy_timeout_ms must be >= 0 and max_attempts >= 1")
        if isinstance(cache_kib, bool) or not isinstance(cache_kib, int) or cache_kib < 1:
            raise InvalidInput("cache_kib must be a whole number of KiB from 1", field="cache_kib")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.synchronous = synchronous.upper()
        self.busy_timeout_ms = busy_timeout_ms
        self.cache_kib = cache_kib
        self.max_attempts = max_attempts
        self._queries = load_queries("sqlite")
        self._own = load_statements("sqlite", "store.sql")
        # A named query of several statements (PostgreSQL writes it as one, with a CTE), or of
        # none (a lock that BEGIN IMMEDIATE already holds): run step by step, or not at all.
        self._compound = {
            name: steps
            for name, text in self._queries.items()
            if len(steps := tuple(_statements(text + ";") if text else ())) != 1
        }
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._pid = os.getpid()
        # create=False opens only a file that exists ("mode=rw" never creates one) and that
        # already holds the current schema: a mistyped path must not become an empty ledger.
        self._create = create
        if not create:
            self._check_existing()
        elif migrate:
            self.migrate()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteStore:
        """Open ``sqlite:///path`` (``?synchronous=NORMAL&busy_timeout_ms=..&cache_kib=..`` are
        accepted)."""
        parts = urlsplit(url)
        if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
            raise InvalidInput(f"an SQLite URL looks like sqlite:///path.db, not {url!r}")
        path = parts.path[1:]
        if not path:
            raise InvalidInput("the SQLite URL names no file")
        for key, values in parse_qs(parts.query).items():
            if key == "synchronous":
                options.setdefault("synchronous", values[-1])
            elif key in ("busy_timeout_ms", "cache_kib"):
                try:
                    options.setdefault(key, int(values[-1]))
                except ValueError as exc:
                    raise InvalidInput(
                        f"{key} in the SQLite URL must be an integer", field=key
                    ) from exc
            else:
                raise InvalidInput(f"unknown SQLite URL option {key!r}")
        return cls(path, **options)

    # -- connections ---------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if _on_read_only_fs(self.path.parent) and self.path.is_file():
            # Nobody can write the file through this mount, so SQLite may read it as it stands
            # without the WAL index it can no longer create: reads answer, writes are refused.
            # A WAL left behind (a process that did not close) holds commits: read through it.
            wal = Path(f"{self.path}-wal")
            kept = wal.is_file() and wal.stat().st_size > 0
            uri = self.path.absolute().as_uri() + ("?mode=ro" if kept else "?mode=ro&immutable=1")
            connection = sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=0,
                detect_types=_DECLTYPES,
            )
            self._local.read_only = True
            return connection
        self._local.read_only = False
        if not self._create:
            uri = self.path.absolute().as_uri() + "?mode=rw"
            return sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=0,
                detect_types=_DECLTYPES,
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=0,
            detect_types=_DECLTYPES,
        )

    def _check_existing(self) -> None:
        """Raise unless ``path`` is an existing ledger database with the current schema."""
        if not self.path.exists():
            raise NotFound(
                f"no ledger database at {self.path}; `effectledger migrate` creates one",
                reason="no_database",
            )
        if not self.path.is_file():
            raise InvalidInput(f"{self.path} is not a file", reason="not_a_database")
        latest = migrations("sqlite")[-1][0]
        try:
            row = self._schema_version()
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise _translate(exc, f"opening {self.path}") from exc
            raise InvalidInput(
                f"{self.path} is not an effectledger database", reason="not_a_database"
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise InvalidInput(
                f"{self.path} is not an SQLite database", reason="not_a_database"
            ) from exc
        if row is None or row[0] is None or row[0] < latest:
            raise InvalidInput(
                f"the ledger schema of {self.path} is behind; run `effectledger migrate`",
                reason="schema_behind",
            )

    def _schema_version(self) -> Any:
        """The stored schema version's row, read on a connection of its own.

        Another process or thread opening or closing the file (recovering or checkpointing its
        WAL) holds a lock for a moment: the read waits for it within the busy timeout, as every
        other statement does, and tries again when SQLite answers busy without waiting.
        """
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            connection = self._open()
            try:
                self._set_busy_timeout(connection, self.busy_timeout_ms)
                return connection.execute(self._queries["schema_version"]).fetchone()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
            finally:
                connection.close()
            time.sleep(0.01)

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = self._open()
            connection.row_factory = sqlite3.Row
            # Migration 15 packs the hash columns written as text before it.
            connection.create_function(
                "effectledger_pack_hash", 1, packed_or_text, deterministic=True
            )
            self._set_busy_timeout(connection, self.busy_timeout_ms)
            connection.execute(self._own["foreign_keys_on"])
            if self._local.read_only:
                with self._lock:
                    self._connections.append(connection)
                return connection
            mode = self._switch_to_wal(connection)
            if mode.lower() != "wal":
                raise StorageError(f"could not switch {self.path} to WAL (got {mode})")
            connection.execute(fill(self._own["synchronous"], level=self.synchronous))
            connection.execute(fill(self._own["cache_size"], kib=self.cache_kib))
        except sqlite3.Error as exc:
            raise _translate(exc, f"opening {self.path}") from exc
        with self._lock:
            self._connections.append(connection)
        return connection

    def _switch_to_wal(self, connection: sqlite3.Connection) -> str:
        # Connections racing to switch a new file to WAL get SQLITE_BUSY at once: SQLite does
        # not call the busy handler here. Wait for the winner, within the same busy timeout.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                return str(connection.execute(self._own["journal_mode_wal"]).fetchone()[0])
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.001)

    def _set_busy_timeout(self, connection: sqlite3.Connection, milliseconds: int) -> None:
        connection.execute(fill(self._own["busy_timeout"], milliseconds=int(milliseconds)))

    def _connection(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:  # a forked child must never reuse the parent's handles
            self._local = threading.local()
            self._connections = []
            self._pid = os.getpid()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if (
            connection is not None
            and self._local.read_only
            and not _on_read_only_fs(self.path.parent)
        ):  # the file system is writable again: reconnect, in WAL, to the file as it is now
            with self._lock:
                if connection in self._connections:
                    self._connections.remove(connection)
            with contextlib.suppress(sqlite3.Error):
                connection.close()
            connection = None
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
        return connection

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(sqlite3.Error):
                connection.close()
        self._local = threading.local()

    # -- transactions --------------------------------------------------------------------

    def write(
        self,
        body: Callable[[_Transaction], T],
        *,
        label: str = "write",
        budget_s: float | None = None,
        rerun_on: tuple[type[Exception], ...] = (),
    ) -> T:
        """Run ``body`` in ``BEGIN IMMEDIATE`` ... ``COMMIT``; retry it when the file is busy.

        With ``budget_s`` the whole write, retries included, waits for the file's lock at most
        that many seconds: each attempt's busy timeout is the budget left (or the store's own,
        if shorter), restored afterwards, and no attempt starts once the budget is spent.
        """
        connection = self._connection()
        retries = RetryBudget(label, self.max_attempts, budget_s)
        if budget_s is None:
            return self._write(connection, body, retries, rerun_on)
        try:
            return self._write(connection, body, retries, rerun_on)
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._set_busy_timeout(connection, self.busy_timeout_ms)

    def _refuse_if_read_only(self, label: str) -> None:
        if getattr(self._local, "read_only", False):
            raise StorageReadOnly(
                f"{label}: {self.path} is on a read-only file system; nothing was written",
                label=label,
            )

    def _write(
        self,
        connection: sqlite3.Connection,
        body: Callable[[_Transaction], T],
        retries: RetryBudget,
        rerun_on: tuple[type[Exception], ...],
    ) -> T:
        self._refuse_if_read_only(retries.label)
        own = self._own
        begin, commit, rollback = own["begin_write"], own["commit"], own["rollback"]
        for attempt in retries.attempts():
            try:
                if retries.deadline is not None:  # wait for the lock no longer than is left
                    left_ms = max(1, int(retries.left_s() * 1000))
                    self._set_busy_timeout(connection, min(left_ms, self.busy_timeout_ms))
                # Spelled out rather than a context manager: this is every write's hot path.
                connection.execute(begin)
                try:
                    result = body(_Transaction(connection, self._queries, self._compound))
                except BaseException:
                    if connection.in_transaction:
                        connection.execute(rollback)
                    raise
                connection.execute(commit)
                return result
            except sqlite3.Error as exc:
                if connection.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        connection.execute(rollback)
                pause = 0.005 * attempt
                error = _translate(exc, retries.label, attempts=attempt)
                if (_is_busy(exc) or isinstance(error, rerun_on)) and retries.may_retry(pause):
                    time.sleep(pause)
                    continue
                raise error from exc
            except rerun_on:  # the body found its rows moved (rolled back above): run it again
                if not retries.may_retry():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def read(self, body: Callable[[_Transaction], T]) -> T:
        """Run ``body`` in a deferred (read) transaction: one consistent snapshot."""
        connection = self._connection()
        try:
            connection.execute(self._own["begin_read"])
            try:
                return body(_Transaction(connection, self._queries, self._compound))
            finally:
                if connection.in_transaction:
                    connection.execute(self._own["commit"])
        except sqlite3.Error as exc:
            raise _translate(exc, "read") from exc

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read by name."""
        params = storable(params)
        try:
            row: Row | None = self._connection().execute(self._queries[name], params).fetchone()
        except sqlite3.Error as exc:
            raise _translate(exc, name) from exc
        return row

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations in one ``BEGIN IMMEDIATE`` each; return those applied."""
        connection = self._connection()
        applied: list[int] = []
        versions = [version for version, _, _ in migrations("sqlite")]
        with contextlib.suppress(sqlite3.OperationalError):  # no schema_migrations table yet
            row = connection.execute(self._own["migrations_applied"]).fetchone()
            # Up to date (a read, so a read-only ledger opens too) when none is missing.
            if (
                row is not None
                and row[0] is not None
                and (row[0], row[1])
                >= (
                    versions[-1],
                    len(versions),
                )
            ):
                return applied
        self._refuse_if_read_only("migrate")
        try:
            connection.execute(self._own["migrations_create"])
            for version, name, sql in migrations("sqlite"):
                connection.execute(self._own["begin_write"])
                try:
                    done = connection.execute(
                        self._own["migration_done"], {"version": version}
                    ).fetchone()
                    if done is None:
                        for statement in _statements(sql):
                            connection.execute(statement)
                        connection.execute(
                            self._own["migration_record"],
                            {"version": version, "name": name, "applied_us": _now_us()},
                        )
                        applied.append(version)
                    connection.execute(self._own["commit"])
                except BaseException:
                    connection.execute(self._own["rollback"])
                    raise
        except sqlite3.Error as exc:
            raise _translate(exc, "migrate") from exc
        return applied


def _now_us() -> int:
    return time.time_ns() // 1000


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements (triggers contain inner ``;``)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--") and not buffer.strip():
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            if statement:
                yield statement
            buffer = ""
    if buffer.strip():
        raise StorageError("a migration ends with an incomplete statement")
