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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from effectledger.errors import InvalidInput, StorageError, StorageReadOnly
from effectledger.model.operations import Row
from effectledger.sql import SYNCHRONOUS_LEVELS, fill, load_queries, load_statements
from effectledger.store import Identifiers, forks, sqlite_schema
from effectledger.store.batching import GroupCommitter, on_off
from effectledger.store.hashes import storable
from effectledger.store.retry import RetryBudget
from effectledger.store.sqlite_faults import (
    MAX_ATTEMPTS,
    connect,
    is_busy,
    on_read_only_fs,
    open_read_only,
    translate,
)
from effectledger.store.sqlite_schema import apply_migrations, check_existing, statements
from effectledger.store.sqlite_transaction import Transaction

__all__ = ["CACHE_KIB", "MAX_ATTEMPTS", "SQLiteStore"]

T = TypeVar("T")
CACHE_KIB = 65536
"""Each connection's page cache (``PRAGMA cache_size``), in KiB: 64 MiB holds the inner pages
of every index of a ledger of millions of operations, where SQLite's own default is 2 MiB
(docs/scaling.md, "A long history"). Memory is taken as pages are read, per connection (one
per thread): ``cache_kib`` in the URL sets it."""


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
        group_commit: bool | str = True,
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
        self._group: GroupCommitter | None = None
        if on_off(group_commit):  # loaded only when asked for: it reads this module's parts
            from effectledger.store.group_sqlite import committer

            self._group = committer(self)
        self._queries = load_queries("sqlite")
        self._own = load_statements("sqlite", "store.sql")
        # A named query of several statements (PostgreSQL writes it as one, with a CTE), or of
        # none (a lock that BEGIN IMMEDIATE already holds): run step by step, or not at all.
        self._compound = {
            name: steps
            for name, text in self._queries.items()
            if len(steps := tuple(statements(text + ";") if text else ())) != 1
        }
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        forks.watch(self)
        # create=False opens only a file that exists ("mode=rw" never creates one) and that
        # already holds the current schema: a mistyped path must not become an empty ledger.
        self._create = create
        if not create:
            check_existing(self.path, self._schema_version)
        elif migrate:
            self.migrate()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteStore:
        """Open ``sqlite:///path?synchronous=..&busy_timeout_ms=..&cache_kib=..&group_commit=on``."""
        parts = urlsplit(url)
        if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
            raise InvalidInput(f"an SQLite URL looks like sqlite:///path.db, not {url!r}")
        path = parts.path[1:]
        if not path:
            raise InvalidInput("the SQLite URL names no file")
        for key, values in parse_qs(parts.query).items():
            if key in ("synchronous", "group_commit"):
                options.setdefault(key, values[-1])
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
        if on_read_only_fs(self.path.parent) and self.path.is_file():
            connection = open_read_only(self.path)
            self._local.read_only = True
            return connection
        self._local.read_only = False
        if not self._create:
            uri = self.path.absolute().as_uri() + "?mode=rw"
            return connect(uri, uri=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return connect(self.path)

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
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
            finally:
                connection.close()
            time.sleep(0.01)

    def _connect(self) -> sqlite3.Connection:
        try:
            connection = self._open()
            connection.row_factory = sqlite3.Row
            self._set_busy_timeout(connection, self.busy_timeout_ms)
            self._local.busy_ms = self.busy_timeout_ms
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
            raise translate(exc, f"opening {self.path}") from exc
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
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.001)

    def _set_busy_timeout(self, connection: sqlite3.Connection, milliseconds: int) -> None:
        connection.execute(fill(self._own["busy_timeout"], milliseconds=int(milliseconds)))

    def _wait_at_most(self, connection: sqlite3.Connection, milliseconds: int) -> None:
        """This thread's connection waits for the lock ``milliseconds`` at most from now on.

        Its current setting is remembered, so a value it already has costs no statement.
        """
        if self._local.busy_ms != milliseconds:
            self._set_busy_timeout(connection, milliseconds)
            self._local.busy_ms = milliseconds

    def after_fork(self) -> None:
        """In a forked child: never reuse the parent's handles, open this process's own."""
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections = []

    def _connection(self) -> sqlite3.Connection:
        local = self._local  # a forked child has a new one (after_fork): no getpid() per use
        try:
            connection: sqlite3.Connection | None = local.connection
        except AttributeError:
            connection = None
        if (
            connection is not None and local.read_only and not on_read_only_fs(self.path.parent)
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
        body: Callable[[Transaction], T],
        *,
        label: str = "write",
        budget_s: float | None = None,
        rerun_on: tuple[type[Exception], ...] = (),
    ) -> T:
        """Run ``body`` in ``BEGIN IMMEDIATE`` ... ``COMMIT``; retry it when the file is busy.

        With ``budget_s`` the whole write, retries included, waits for the file's lock at most
        that many seconds: each attempt's busy timeout is the budget left (or the store's own,
        if shorter), restored afterwards, and no attempt starts once the budget is spent. A
        timeout the connection already has is not set again. With ``group_commit`` on,
        concurrent writes share one transaction (``store.batching``).
        """
        if self._group is not None and not self._group.alone():
            return self._group.write(body, label, budget_s, rerun_on)
        connection = self._connection()
        retries = RetryBudget(label, self.max_attempts, budget_s)
        if budget_s is None:
            return self._write(connection, body, retries, rerun_on)
        try:
            return self._write(connection, body, retries, rerun_on)
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._wait_at_most(connection, self.busy_timeout_ms)

    def _refuse_if_read_only(self, label: str) -> None:
        if getattr(self._local, "read_only", False):
            raise StorageReadOnly(
                f"{label}: {self.path} is on a read-only file system; nothing was written",
                label=label,
            )

    def _write(
        self,
        connection: sqlite3.Connection,
        body: Callable[[Transaction], T],
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
                    self._wait_at_most(connection, min(left_ms, self.busy_timeout_ms))
                # Spelled out rather than a context manager: this is every write's hot path.
                connection.execute(begin)
                try:
                    result = body(Transaction(connection, self._queries, self._compound))
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
                error = translate(exc, retries.label, attempts=attempt)
                if (is_busy(exc) or isinstance(error, rerun_on)) and retries.may_retry(pause):
                    time.sleep(pause)
                    continue
                raise error from exc
            except rerun_on:  # the body found its rows moved (rolled back above): run it again
                if not retries.may_retry():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def read(self, body: Callable[[Transaction], T]) -> T:
        """Run ``body`` in a deferred (read) transaction: one consistent snapshot."""
        connection = self._connection()
        try:
            connection.execute(self._own["begin_read"])
            try:
                return body(Transaction(connection, self._queries, self._compound))
            finally:
                if connection.in_transaction:
                    connection.execute(self._own["commit"])
        except sqlite3.Error as exc:
            raise translate(exc, "read") from exc

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read by name (:class:`~effectledger.store.Identifiers` sent as given)."""
        if type(params) is not Identifiers:
            params = storable(params)
        try:
            row: Row | None = self._connection().execute(self._queries[name], params).fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, name) from exc
        return row

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations in one ``BEGIN IMMEDIATE`` each; return those applied."""
        connection = self._connection()
        if sqlite_schema.up_to_date(
            connection, self._own
        ):  # a read, so a read-only ledger opens too
            return []
        self._refuse_if_read_only("migrate")
        try:
            return apply_migrations(connection, self._own)
        except sqlite3.Error as exc:
            raise translate(exc, "migrate") from exc
