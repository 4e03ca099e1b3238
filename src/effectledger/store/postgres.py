"""The PostgreSQL store: one database shared by many executor and recovery processes on many hosts.

Connections come from a :class:`psycopg_pool.ConnectionPool` in autocommit mode; the store opens
every transaction itself (``BEGIN`` ... ``COMMIT``) so it knows exactly which statement failed.
Writes run under READ COMMITTED: the ledger's updates are guarded by the operation's version and
the work queues lock rows with ``FOR UPDATE SKIP LOCKED`` (``sql/postgres/queries.sql``), so the
database is the only coordinator. A write that fails on a serialization failure or a deadlock,
or on a connection lost before ``COMMIT`` was sent, is re-run on a fresh connection a bounded
number of times. A connection lost while ``COMMIT`` was in flight cannot be re-run: it raises
:class:`~effectledger.errors.CommitUncertain` and the caller must check what was stored.

Driver errors are translated into :mod:`effectledger.errors` in :func:`_translate`, and only
there.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from effectledger.errors import (
    CommitUncertain,
    ConstraintViolation,
    InvalidInput,
    NotFound,
    StorageBusy,
    StorageError,
)
from effectledger.store import Row, redact, refuse_unstorable_text
from effectledger.store.queries import load_queries, migrations

__all__ = ["PostgresStore"]

T = TypeVar("T")
MAX_ATTEMPTS = 3
_Connection = psycopg.Connection[DictRow]
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Options of the URL's query string that configure the store; every other one goes to libpq.
_STORE_OPTIONS: dict[str, Callable[[str], Any]] = {
    "schema": str,
    "pool_min_size": int,
    "pool_max_size": int,
    "pool_timeout_s": float,
    "lock_timeout_ms": int,
    "max_attempts": int,
    "migrate": lambda value: value.lower() in {"1", "true", "yes", "on"},
}
_CONNECT_TIMEOUT_S = 10  # libpq waits forever for an unreachable host unless told otherwise

# Statements of the store's own bookkeeping; the ledger's statements are named queries.
_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
# A write with a time budget: its timeouts are set in the same round trip as BEGIN and last
# until the transaction ends (SET LOCAL). Sent without parameters, so as one simple query.
_BEGIN_BUDGETED_WRITE = sql.SQL(
    "BEGIN ISOLATION LEVEL READ COMMITTED;"
    " SET LOCAL lock_timeout = {lock}; SET LOCAL statement_timeout = {statement}"
)
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_COMMIT = "COMMIT"
_ROLLBACK = "ROLLBACK"
_SET_SEARCH_PATH = "SELECT set_config('search_path', %(schema)s, false)"
_SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %(lock_timeout)s, false)"
# One lock per search_path: concurrent processes configured alike migrate one at a time.
_MIGRATION_LOCK = (
    "SELECT pg_advisory_xact_lock("
    "hashtextextended('effectledger.migrate:' || current_setting('search_path'), 0))"
)
_CREATE_SCHEMA = (
    "DO $$ BEGIN "
    "EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', current_setting('search_path')); "
    "END $$"
)
_CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_us BIGINT NOT NULL)"
)
_MIGRATION_DONE = "SELECT 1 AS present FROM schema_migrations WHERE version = %(version)s"
_MIGRATION_RECORD = (
    "INSERT INTO schema_migrations (version, name, applied_us)"
    " VALUES (%(version)s, %(name)s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)"
)

# SQLSTATEs after which re-running the whole transaction is the documented remedy.
_RETRY_STATES = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
# lock_not_available, too_many_connections, query_canceled (a write's time budget ran out)
_BUSY_STATES = _RETRY_STATES | {"55P03", "53300", "57014"}


class _Lost(Exception):
    """The connection broke; ``at_commit`` says whether COMMIT may have reached the server."""

    def __init__(self, error: psycopg.Error, *, at_commit: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.at_commit = at_commit


def _translate(exc: BaseException, label: str, *, attempts: int = 1) -> StorageError:
    """The one place where driver and pool errors become effectledger errors."""
    if isinstance(exc, _Lost):
        if exc.at_commit:
            return CommitUncertain(
                f"{label}: the connection was lost while COMMIT was in flight; the transaction "
                "may or may not have committed",
                label=label,
            )
        return StorageError(redact(f"{label}: the connection to PostgreSQL was lost: {exc.error}"))
    if isinstance(exc, PoolTimeout):
        return StorageBusy(f"{label}: no database connection became free in time", label=label)
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate or ""
        if isinstance(exc, psycopg.IntegrityError) or state.startswith("23"):
            return ConstraintViolation(redact(f"{label}: the database refused the write: {exc}"))
        if state in _BUSY_STATES:
            return StorageBusy(
                f"{label}: the database stayed contended ({state})", attempts=attempts
            )
        if isinstance(exc, pg_errors.UndefinedTable):
            return StorageError(
                redact(f"{label}: the ledger schema is missing; run migrate: {exc}")
            )
        return StorageError(redact(f"{label}: {type(exc).__name__}: {exc}"))
    return StorageError(redact(f"{label}: {type(exc).__name__}: {exc}"))  # pragma: no cover


class _Transaction:
    __slots__ = ("_cursor", "_queries")

    def __init__(self, cursor: psycopg.Cursor[DictRow], queries: Mapping[str, str]) -> None:
        self._cursor = cursor
        self._queries = queries

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        refuse_unstorable_text(params)
        return self._cursor.execute(self._queries[name], params).fetchone()

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        refuse_unstorable_text(params)
        return list(self._cursor.execute(self._queries[name], params).fetchall())

    def run(self, name: str, params: Mapping[str, Any]) -> int:
        refuse_unstorable_text(params)
        return self._cursor.execute(self._queries[name], params).rowcount


class PostgresStore:
    """A ledger in a PostgreSQL database (or one schema of it), shared by any number of processes.

    ``conninfo`` is a libpq URL or ``key=value`` string. ``schema`` confines the ledger to one
    schema, created by :meth:`migrate` if needed. ``pool_min_size``/``pool_max_size`` bound this
    process's connections; ``lock_timeout_ms`` bounds how long a statement waits for a row lock
    (then :class:`StorageBusy`). A store belongs to the process that opened it: open one per
    process (after any fork).
    """

    dialect = "postgres"

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str | None = None,
        pool_min_size: int = 1,
        pool_max_size: int = 4,
        pool_timeout_s: float = 30.0,
        lock_timeout_ms: int = 10_000,
        max_attempts: int = MAX_ATTEMPTS,
        migrate: bool = True,
        url: str | None = None,
        create: bool = True,
    ) -> None:
        if schema is not None and _SCHEMA_NAME.fullmatch(schema) is None:
            raise InvalidInput("schema must be 1-63 characters of a-z, 0-9 and _", field="schema")
        if not 0 <= pool_min_size <= pool_max_size or pool_max_size < 1:
            raise InvalidInput("need 0 <= pool_min_size <= pool_max_size and pool_max_size >= 1")
        if pool_timeout_s <= 0 or lock_timeout_ms < 0 or max_attempts < 1:
            raise InvalidInput("pool_timeout_s > 0, lock_timeout_ms >= 0 and max_attempts >= 1")
        # The URL as shown (messages, logs, repr): never with its password.
        self.url = redact(url or conninfo)
        self.schema = schema
        self._conninfo = conninfo
        self._connect_options: dict[str, Any] = {"autocommit": True, "row_factory": dict_row}
        try:
            parsed = conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            # The driver's text may quote the whole conninfo, password included.
            raise InvalidInput(f"the store URL is malformed: {redact(str(exc))}") from None
        if "connect_timeout" not in parsed:
            self._connect_options["connect_timeout"] = _CONNECT_TIMEOUT_S
        self.max_attempts = max_attempts
        self.lock_timeout_ms = lock_timeout_ms
        self._queries = load_queries("postgres")
        self._pid = os.getpid()
        self._pool: ConnectionPool[_Connection] = ConnectionPool(
            conninfo,
            connection_class=_Connection,
            kwargs=self._connect_options,
            min_size=pool_min_size,
            max_size=pool_max_size,
            timeout=pool_timeout_s,
            configure=self._configure,
            name="effectledger",
            open=False,
        )
        self._pool_open = False
        if not create:  # read the schema as it is: never create or migrate it
            self._check_existing()
        elif migrate:
            self.migrate()  # on a connection of its own: a bad URL fails here, with the reason

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """Open ``postgresql://user@host:port/db?schema=..&pool_max_size=..``.

        The store's own options (``schema``, ``pool_min_size``, ``pool_max_size``,
        ``pool_timeout_s``, ``lock_timeout_ms``, ``max_attempts``, ``migrate``) are taken out of
        the query string; everything else (``sslmode``, ``options``, ``connect_timeout``, ...)
        is passed to libpq unchanged. Keyword ``options`` win over the URL's.
        """
        parts = urlsplit(url)
        if parts.scheme not in {"postgresql", "postgres"}:
            raise InvalidInput("a PostgreSQL URL starts with postgresql://")
        libpq: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            convert = _STORE_OPTIONS.get(key)
            if convert is None:
                libpq.append((key, value))
                continue
            try:
                options.setdefault(key, convert(value))
            except ValueError as exc:
                raise InvalidInput(f"bad value for {key} in the store URL", field=key) from exc
        conninfo = urlunsplit(parts._replace(query=urlencode(libpq)))
        return cls(conninfo, url=url, **options)

    # -- connections ---------------------------------------------------------------------

    def _configure(self, connection: _Connection) -> None:
        """Give every new pooled connection the store's search path and lock timeout."""
        if self.schema is not None:
            connection.execute(_SET_SEARCH_PATH, {"schema": self.schema})
        connection.execute(_SET_LOCK_TIMEOUT, {"lock_timeout": f"{self.lock_timeout_ms}ms"})

    def _checked_pool(self) -> ConnectionPool[_Connection]:
        if os.getpid() != self._pid:
            # The pool's sockets and threads belong to the parent; using them here would
            # interleave two processes' messages on one connection.
            raise StorageError("a PostgreSQL store cannot cross a fork: open one in this process")
        if not self._pool_open:  # opened on first use; opening twice is harmless
            self._pool.open(wait=False)
            self._pool_open = True
        return self._pool

    def _discard_broken(self) -> None:
        """After one pooled connection broke, test the idle ones: a restarted or failed-over
        server has usually closed them all, and each would otherwise cost one attempt."""
        with contextlib.suppress(psycopg.Error):
            self._pool.check()

    def close(self) -> None:
        """Close the pool and every connection in it."""
        if os.getpid() == self._pid:
            self._pool.close()

    # -- transactions --------------------------------------------------------------------

    def _attempt(
        self,
        body: Callable[[_Transaction], T],
        begin: str | sql.Composed,
        deadline: float | None = None,
    ) -> T:
        """Run ``body`` once in its own transaction on a pooled connection and commit it.

        With a ``deadline`` (``time.monotonic()``), the wait for a pooled connection ends there.
        """
        pool = self._checked_pool()
        if deadline is None:
            connecting = pool.connection()
        else:
            connecting = pool.connection(timeout=min(pool.timeout, _left_s(deadline)))
        with connecting as connection:
            cursor = connection.cursor()
            try:
                cursor.execute(begin)
                result = body(_Transaction(cursor, self._queries))
            except psycopg.Error as exc:
                if connection.broken:
                    raise _Lost(exc, at_commit=False) from exc
                _rollback(connection)
                raise
            except BaseException:
                _rollback(connection)
                raise
            try:
                cursor.execute(_COMMIT)
            except psycopg.Error as exc:
                if connection.broken:
                    raise _Lost(exc, at_commit=True) from exc
                raise  # the server answered COMMIT with an error: it rolled back
            return result

    def _begin_write_until(self, deadline: float) -> sql.Composed:
        """A write's BEGIN whose lock and statement timeouts end at ``deadline``."""
        left_ms = max(1, int(_left_s(deadline) * 1000))
        lock_ms = left_ms if self.lock_timeout_ms == 0 else min(left_ms, self.lock_timeout_ms)
        return _BEGIN_BUDGETED_WRITE.format(
            lock=sql.Literal(f"{lock_ms}ms"), statement=sql.Literal(f"{left_ms}ms")
        )

    def _run(
        self,
        body: Callable[[_Transaction], T],
        begin: str,
        label: str,
        budget_s: float | None = None,
    ) -> T:
        deadline = None if budget_s is None else time.monotonic() + budget_s
        for attempt in range(1, self.max_attempts + 1):
            opening: str | sql.Composed = begin
            if deadline is not None:  # only writes have a budget
                if _left_s(deadline) <= 0:
                    raise StorageBusy(
                        f"{label}: the write's time budget ran out", attempts=attempt - 1
                    )
                opening = self._begin_write_until(deadline)
            try:
                return self._attempt(body, opening, deadline)
            except _Lost as exc:
                if not exc.at_commit and attempt < self.max_attempts:
                    self._discard_broken()
                    continue  # nothing was committed: run it again on a sound connection
                raise _translate(exc, label) from exc.error
            except psycopg.Error as exc:
                if (exc.sqlstate or "") in _RETRY_STATES and attempt < self.max_attempts:
                    continue
                raise _translate(exc, label, attempts=attempt) from exc  # also PoolTimeout
        raise AssertionError("unreachable")  # pragma: no cover

    def write(
        self,
        body: Callable[[_Transaction], T],
        *,
        label: str = "write",
        budget_s: float | None = None,
    ) -> T:
        """Run ``body`` in one READ COMMITTED transaction and commit it.

        Re-run up to ``max_attempts`` times on a serialization failure, a deadlock or a
        connection lost before ``COMMIT``; raises :class:`CommitUncertain` if the connection is
        lost while ``COMMIT`` is in flight. With ``budget_s`` the whole write, retries included,
        takes at most about that many seconds of waiting: the wait for a pooled connection is cut
        to the budget left, the transaction runs with ``SET LOCAL lock_timeout`` and
        ``statement_timeout`` set to it (the lock timeout stays the store's own if that is
        shorter), and no re-run starts once it is spent. Running out raises
        :class:`StorageBusy` and nothing is committed.
        """
        return self._run(body, _BEGIN_WRITE, label, budget_s)

    def read(self, body: Callable[[_Transaction], T]) -> T:
        """Run ``body`` in a read-only REPEATABLE READ transaction: one consistent snapshot."""
        return self._run(body, _BEGIN_READ, "read")

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read by name, re-run on a fresh connection if the connection broke."""
        refuse_unstorable_text(params)
        query = self._queries[name]
        for attempt in range(1, self.max_attempts + 1):
            try:
                with self._checked_pool().connection() as connection:
                    try:
                        return connection.execute(query, params).fetchone()
                    except psycopg.Error as exc:
                        if connection.broken:
                            raise _Lost(exc, at_commit=False) from exc
                        raise
            except _Lost as exc:
                if attempt < self.max_attempts:
                    self._discard_broken()
                    continue
                raise _translate(exc, name) from exc.error
            except psycopg.Error as exc:  # also PoolTimeout
                raise _translate(exc, name) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations, each in one transaction; return the versions applied.

        Runs on a connection of its own. Every migration transaction first takes an advisory
        lock, so processes that start together apply each migration once and the others find it
        recorded.
        """
        applied: list[int] = []
        try:
            with _Connection.connect(self._conninfo, **self._connect_options) as connection:
                self._configure(connection)
                # A long migration elsewhere is waited for, not given up on.
                connection.execute(_SET_LOCK_TIMEOUT, {"lock_timeout": "0"})
                for version, name, sql in migrations("postgres"):
                    with connection.transaction():
                        connection.execute(_MIGRATION_LOCK)
                        if self.schema is not None:
                            connection.execute(_CREATE_SCHEMA)
                        connection.execute(_CREATE_MIGRATIONS)
                        if connection.execute(_MIGRATION_DONE, {"version": version}).fetchone():
                            continue
                        connection.execute(sql)  # no parameters: sent as one script
                        connection.execute(_MIGRATION_RECORD, {"version": version, "name": name})
                    applied.append(version)
        except psycopg.Error as exc:
            raise _translate(exc, "migrate") from exc
        return applied

    def _check_existing(self) -> None:
        """Raise unless the ledger schema exists here and is current; change nothing."""
        latest = migrations("postgres")[-1][0]
        try:
            with _Connection.connect(self._conninfo, **self._connect_options) as connection:
                self._configure(connection)
                row = connection.execute(self._queries["schema_version"]).fetchone()
        except pg_errors.UndefinedTable as exc:
            where = f"schema {self.schema}" if self.schema else "this database"
            raise NotFound(
                f"no ledger schema in {where}; `effectledger migrate` creates it",
                reason="no_database",
            ) from exc
        except psycopg.Error as exc:
            raise _translate(exc, "open") from exc
        if row is None or row["version"] is None or row["version"] < latest:
            raise InvalidInput(
                "the ledger schema is behind; run `effectledger migrate`", reason="schema_behind"
            )

    def __repr__(self) -> str:
        parts = urlsplit(self.url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.partition(':')[0]}@{host}"
        return f"PostgresStore({urlunsplit(parts._replace(netloc=netloc))!r})"


def _left_s(deadline: float) -> float:
    """Seconds until ``deadline`` (``time.monotonic()``); negative once it has passed."""
    return deadline - time.monotonic()


def _rollback(connection: _Connection) -> None:
    """Roll back the open transaction; a broken connection is discarded by the pool anyway."""
    if not connection.broken:
        with contextlib.suppress(psycopg.Error):
            connection.execute(_ROLLBACK)
