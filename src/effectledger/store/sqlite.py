"""The SQLite store: one file, WAL, ``BEGIN IMMEDIATE`` for every write, bounded busy retries.

Python's ``sqlite3`` is opened with ``isolation_level=None`` so the store issues ``BEGIN
IMMEDIATE`` / ``COMMIT`` itself: a deferred transaction that later writes is what produces
unrecoverable ``SQLITE_BUSY`` under contention. A thread borrows a connection from the store's
pool for each call and gives it back when the call returns (:mod:`effectledger.store.sqlite_pool`):
a thread that ends holds none, and at most ``pool_size`` stay open between calls.

A full disk raises :class:`~effectledger.errors.StorageFull` and a file that cannot be written
:class:`~effectledger.errors.StorageReadOnly`; the transaction rolls back whole. On a file
system mounted read-only the file is opened read-only as it stands (through a WAL left behind,
if any): reads answer, every write raises ``StorageReadOnly``, and once the file system is
writable again the next call reconnects normally.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
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
from effectledger.store.sqlite_pool import POOL_SIZE, Pool, Pooled
from effectledger.store.sqlite_schema import apply_migrations, check_existing, statements
from effectledger.store.sqlite_transaction import Transaction

__all__ = ["CACHE_KIB", "MAX_ATTEMPTS", "POOL_SIZE", "SQLiteStore"]

T = TypeVar("T")
CACHE_KIB = 65536
_BUSY_STATEMENTS: dict[int, str] = {}
"""``PRAGMA busy_timeout`` by its value, filled in once each (the same text for every store)."""
"""Each connection's page cache (``PRAGMA cache_size``), in KiB: 64 MiB holds the inner pages
of every index of a ledger of millions of operations, where SQLite's own default is 2 MiB
(docs/scaling.md, "A long history"). Memory is taken as pages are read, per open connection
(``pool_size`` of them between calls): ``cache_kib`` in the URL sets it."""


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
        pool_size: int = POOL_SIZE,
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_LEVELS:
            raise InvalidInput(f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}")
        if busy_timeout_ms < 0 or max_attempts < 1:
            raise InvalidInput("busy_timeout_ms must be >= 0 and max_attempts >= 1")
        if isinstance(cache_kib, bool) or not isinstance(cache_kib, int) or cache_kib < 1:
            raise InvalidInput("cache_kib must be a whole number of KiB from 1", field="cache_kib")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInput("pool_size must be a whole number from 1", field="pool_size")
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
        self._columns: dict[str, tuple[str, ...]] = {}  # learned by its transactions
        self._pool = Pool(self._connect, self._still_right, pool_size)
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
        """Open ``sqlite:///path?synchronous=..&busy_timeout_ms=..&cache_kib=..&pool_size=..``
        (and ``group_commit=on|off``)."""
        parts = urlsplit(url)
        if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
            raise InvalidInput(f"an SQLite URL looks like sqlite:///path.db, not {url!r}")
        path = parts.path[1:]
        if not path:
            raise InvalidInput("the SQLite URL names no file")
        for key, values in parse_qs(parts.query).items():
            if key in ("synchronous", "group_commit"):
                options.setdefault(key, values[-1])
            elif key in ("busy_timeout_ms", "cache_kib", "pool_size"):
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

    def _open(self) -> tuple[sqlite3.Connection, bool]:
        """A new connection to the file, and whether it is read-only (a read-only mount)."""
        if on_read_only_fs(self.path.parent) and self.path.is_file():
            return open_read_only(self.path), True
        if not self._create:
            uri = self.path.absolute().as_uri() + "?mode=rw"
            return connect(uri, uri=True), False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return connect(self.path), False

    def _schema_version(self) -> Any:
        """The stored schema version's row, read on a connection of its own.

        Another process or thread opening or closing the file (recovering or checkpointing its
        WAL) holds a lock for a moment: the read waits for it within the busy timeout, as every
        other statement does, and tries again when SQLite answers busy without waiting.
        """
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            connection, _ = self._open()
            try:
                self._set_busy_timeout(connection, self.busy_timeout_ms)
                return connection.execute(self._queries["schema_version"]).fetchone()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
            finally:
                connection.close()
            time.sleep(0.01)

    def _connect(self, generation: int) -> Pooled:
        """A new connection for the pool, set up as every connection of the store is."""
        try:
            connection, read_only = self._open()
        except sqlite3.Error as exc:
            raise translate(exc, f"opening {self.path}") from exc
        try:
            connection.row_factory = sqlite3.Row
            self._set_busy_timeout(connection, self.busy_timeout_ms)
            connection.execute(self._own["foreign_keys_on"])
            if not read_only:
                mode = self._switch_to_wal(connection)
                if mode.lower() != "wal":
                    raise StorageError(f"could not switch {self.path} to WAL (got {mode})")
                connection.execute(fill(self._own["synchronous"], level=self.synchronous))
                connection.execute(fill(self._own["cache_size"], kib=self.cache_kib))
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                connection.close()  # a connection half set up is never kept
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, f"opening {self.path}") from exc
            raise
        return Pooled(
            connection, read_only=read_only, busy_ms=self.busy_timeout_ms, generation=generation
        )

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
        statement = _BUSY_STATEMENTS.get(milliseconds)
        if statement is None:  # a PRAGMA takes no parameter: its text, made once per value
            statement = fill(self._own["busy_timeout"], milliseconds=int(milliseconds))
            if len(_BUSY_STATEMENTS) < 4096:
                _BUSY_STATEMENTS[milliseconds] = statement
        connection.execute(statement)

    def _wait_at_most(self, entry: Pooled, milliseconds: int) -> None:
        """This connection waits for the lock ``milliseconds`` at most from now on.

        Its current setting is remembered, so a value it already has costs no statement.
        """
        if entry.busy_ms != milliseconds:
            self._set_busy_timeout(entry.connection, milliseconds)
            entry.busy_ms = milliseconds

    def after_fork(self) -> None:
        """In a forked child: never reuse the parent's handles, open this process's own."""
        self._pool.after_fork()

    def _still_right(self, entry: Pooled) -> bool:
        """Whether a pooled connection may be lent again: not one opened read-only once the
        file system is writable again (the next one opens, in WAL, the file as it is now)."""
        return not entry.read_only or on_read_only_fs(self.path.parent)

    def _borrow(self) -> Pooled:
        """This thread's connection for one call (a forked child's pool is its own: no
        ``getpid()`` per use); give it back with :meth:`_give_back`."""
        return self._pool.borrow()

    def _give_back(self, entry: Pooled) -> None:
        self._pool.give_back(entry)

    @contextlib.contextmanager
    def _leased(self) -> Iterator[sqlite3.Connection]:
        """A connection held by this thread for the block: the store's calls in it use it."""
        entry = self._borrow()
        try:
            yield entry.connection
        finally:
            self._give_back(entry)

    def open_connections(self) -> int:
        """How many connections to the file this store holds open now (lent and idle)."""
        return self._pool.count()

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        self._pool.close()

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
        pool = self._pool
        entry = pool.borrow()
        try:
            retries = RetryBudget(label, self.max_attempts, budget_s)
            if budget_s is None:
                return self._write(entry, body, retries, rerun_on)
            try:
                return self._write(entry, body, retries, rerun_on)
            finally:
                with contextlib.suppress(sqlite3.Error):
                    self._wait_at_most(entry, self.busy_timeout_ms)
        finally:
            pool.give_back(entry)

    def _refuse_if_read_only(self, entry: Pooled, label: str) -> None:
        if entry.read_only:
            raise StorageReadOnly(
                f"{label}: {self.path} is on a read-only file system; nothing was written",
                label=label,
            )

    def _write(
        self,
        entry: Pooled,
        body: Callable[[Transaction], T],
        retries: RetryBudget,
        rerun_on: tuple[type[Exception], ...],
    ) -> T:
        self._refuse_if_read_only(entry, retries.label)
        connection = entry.connection
        own = self._own
        begin, commit, rollback = own["begin_write"], own["commit"], own["rollback"]
        for attempt in retries.attempts():
            try:
                if retries.deadline is not None:  # wait for the lock no longer than is left
                    left_ms = max(1, int(retries.left_s() * 1000))
                    self._wait_at_most(entry, min(left_ms, self.busy_timeout_ms))
                # Spelled out rather than a context manager: this is every write's hot path.
                connection.execute(begin)
                try:
                    result = body(
                        Transaction(connection, self._queries, self._compound, self._columns)
                    )
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
        pool = self._pool
        entry = pool.borrow()
        connection = entry.connection
        try:
            connection.execute(self._own["begin_read"])
            try:
                return body(Transaction(connection, self._queries, self._compound, self._columns))
            finally:
                if connection.in_transaction:
                    connection.execute(self._own["commit"])
        except sqlite3.Error as exc:
            raise translate(exc, "read") from exc
        finally:
            pool.give_back(entry)

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read by name (:class:`~effectledger.store.Identifiers` sent as given)."""
        if type(params) is not Identifiers:
            params = storable(params)
        pool = self._pool
        entry = pool.borrow()
        try:
            row: Row | None = entry.connection.execute(self._queries[name], params).fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, name) from exc
        finally:
            pool.give_back(entry)
        return row

    # -- schema --------------------------------------------------------------------------

    def migrate(self, *, replay: bool = False) -> list[int]:
        """Apply pending migrations in one ``BEGIN IMMEDIATE`` each; return those applied.

        A new ledger gets the current schema in one ``BEGIN IMMEDIATE``, unless ``replay``
        (:func:`effectledger.store.sqlite_schema.apply_migrations`)."""
        entry = self._borrow()
        try:
            if sqlite_schema.up_to_date(
                entry.connection, self._own
            ):  # a read, so a read-only ledger opens too
                return []
            self._refuse_if_read_only(entry, "migrate")
            try:
                return apply_migrations(entry.connection, self._own, replay=replay)
            except sqlite3.Error as exc:
                raise translate(exc, "migrate") from exc
        finally:
            self._give_back(entry)
