"""The PostgreSQL store: one database shared by many executor and recovery processes on many hosts.

Connections come from a :class:`psycopg_pool.ConnectionPool` in autocommit mode; the store opens
every transaction itself (``BEGIN`` ... ``COMMIT``) so it knows exactly which statement failed.
Writes run under READ COMMITTED: the ledger's updates are guarded by the operation's version and
the work queues lock rows with ``FOR UPDATE SKIP LOCKED`` (``sql/postgres/queries.sql``), so the
database is the only coordinator. A write that fails on a serialization failure or a deadlock,
or on a connection lost before ``COMMIT`` was sent, is re-run on a fresh connection a bounded
number of times. A connection lost while ``COMMIT`` was in flight cannot be re-run: it raises
:class:`~effectledger.errors.CommitUncertain` and the caller must check what was stored.

Driver errors are translated into :mod:`effectledger.errors` in
:func:`effectledger.store.postgres_errors.translate`, and only there; the schema's creation and
migrations are in :mod:`effectledger.store.postgres_schema`; a transaction's statements are sent
by :class:`effectledger.store.postgres_transaction.Transaction`, and the whole-table access that
moves a ledger to another store is :mod:`effectledger.store.postgres_copy`.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from effectledger.errors import InvalidInput, StorageError
from effectledger.model.operations import Row
from effectledger.sql import load_queries, load_statements
from effectledger.store import Identifiers, forks, redact
from effectledger.store.batching import GroupCommitter, on_off
from effectledger.store.hashes import storable
from effectledger.store.postgres_errors import RETRY_STATES, Lost, translate
from effectledger.store.postgres_rows import hash_dict_row
from effectledger.store.postgres_schema import check_existing, migrate
from effectledger.store.postgres_transaction import Queued, Transaction
from effectledger.store.replication import Replication
from effectledger.store.retry import RetryBudget

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
    "group_commit": str,
    "pooler": str,
}
# How a connection pooler in front of the server hands out server connections (see ``pooler``).
POOLERS = frozenset({"none", "session", "transaction"})
_READ_ONLY = "25006"  # read_only_sql_transaction
_CONNECT_TIMEOUT_S = 10  # libpq waits forever for an unreachable host unless told otherwise
_OWN = load_statements("postgres", "store.sql")  # the store's own statements


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
        group_commit: bool | str = False,
        pooler: str = "none",
    ) -> None:
        if schema is not None and _SCHEMA_NAME.fullmatch(schema) is None:
            raise InvalidInput("schema must be 1-63 characters of a-z, 0-9 and _", field="schema")
        if not 0 <= pool_min_size <= pool_max_size or pool_max_size < 1:
            raise InvalidInput("need 0 <= pool_min_size <= pool_max_size and pool_max_size >= 1")
        if pool_timeout_s <= 0 or lock_timeout_ms < 0 or max_attempts < 1:
            raise InvalidInput("pool_timeout_s > 0, lock_timeout_ms >= 0 and max_attempts >= 1")
        if pooler not in POOLERS:
            raise InvalidInput(
                f"pooler is one of {', '.join(sorted(POOLERS))} (PgBouncer's pool_mode)",
                field="pooler",
            )
        # Behind PgBouncer in transaction mode (``pooler=transaction``) a client's connection
        # is a different server connection in each transaction: nothing may rest on session
        # state. No server-side prepared statements (psycopg prepares a query it has run five
        # times, on the server connection it happened to have), and the schema and the lock
        # timeout are set in every transaction, for that transaction only.
        self.pooler = pooler
        self.transaction_pooled = pooler == "transaction"
        # The URL as shown (messages, logs, repr): never with its password.
        self.url = redact(url or conninfo)
        self.schema = schema
        self._conninfo = conninfo
        self._connect_options: dict[str, Any] = {"autocommit": True, "row_factory": hash_dict_row}
        if self.transaction_pooled:
            self._connect_options["prepare_threshold"] = None
        try:
            parsed = conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            # The driver's text may quote the whole conninfo, password included.
            raise InvalidInput(f"the store URL is malformed: {redact(str(exc))}") from None
        if "connect_timeout" not in parsed:
            self._connect_options["connect_timeout"] = _CONNECT_TIMEOUT_S
        self.max_attempts = max_attempts
        self._group: GroupCommitter | None = None
        if on_off(group_commit):  # loaded only when asked for: it reads this module's parts
            from effectledger.store.group_postgres import committer

            self._group = committer(self)
        self.lock_timeout_ms = lock_timeout_ms
        self._queries = load_queries("postgres")
        self._forked = False
        forks.watch(self)
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
            check_existing(self._connect, self.schema, self._local_settings())
        elif migrate:
            self.migrate()  # on a connection of its own: a bad URL fails here, with the reason

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """Open ``postgresql://user@host:port/db?schema=..&pool_max_size=..``.

        The store's own options (``schema``, ``pool_min_size``, ``pool_max_size``,
        ``pool_timeout_s``, ``lock_timeout_ms``, ``max_attempts``, ``migrate``, ``group_commit``:
        :mod:`effectledger.store.batching`) are taken out of
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
        """Give every new pooled connection the store's search path and lock timeout (behind a
        transaction pooler, each transaction gets them instead: :meth:`_opening`)."""
        if self.transaction_pooled:
            return
        if self.schema is not None:
            connection.execute(_OWN["set_search_path"], {"schema": self.schema})
        connection.execute(_OWN["set_lock_timeout"], {"lock_timeout": f"{self.lock_timeout_ms}ms"})

    def _connect(self) -> _Connection:
        """A configured connection of its own, outside the pool (schema work)."""
        connection = _Connection.connect(self._conninfo, **self._connect_options)
        try:
            self._check_pooler(connection)
            self._configure(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _check_pooler(self, connection: _Connection) -> None:
        """Refuse a pooler the URL does not name: behind PgBouncer in transaction mode the
        session settings and psycopg's prepared statements of one client land on server
        connections that other clients then use (another ledger's schema, included)."""
        if self.pooler != "none":
            return
        row = connection.execute(_OWN["backend_pid"]).fetchone()
        if row is not None and row["pid"] != connection.info.backend_pid:
            raise InvalidInput(
                "the store URL reaches PostgreSQL through a connection pooler (the server "
                "process differs from the one the connection was given): add pooler=transaction "
                "to the URL if it pools by transaction (PgBouncer's pool_mode = transaction), "
                "or pooler=session if it keeps one server connection per client",
                field="pooler",
            )

    def after_fork(self) -> None:
        """In a forked child: the pool is the parent's, refused from now on."""
        self._forked = True

    def _checked_pool(self) -> ConnectionPool[_Connection]:
        if self._forked:  # set in the child as the fork returns (store.forks)
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

    def open_connections(self) -> int:
        """How many server connections this store's pool holds open now (lent, idle or being
        opened): at most ``pool_max_size``, whichever threads call."""
        if self._forked or not self._pool_open:
            return 0
        return int(self._pool.get_stats().get("pool_size", 0))

    def close(self) -> None:
        """Close the pool and every connection in it."""
        if not self._forked:
            self._pool.close()

    # -- transactions --------------------------------------------------------------------

    def _attempt(
        self,
        body: Callable[[Transaction], T],
        begin: list[Queued],
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
                # BEGIN waits to go with the body's first statement (see Transaction).
                transaction = Transaction(cursor, self._queries, begin)
                result = body(transaction)
                transaction.flush()  # anything still waiting goes before COMMIT, not with it
            except psycopg.Error as exc:
                if connection.broken:
                    raise Lost(exc, at_commit=False) from exc
                _rollback(connection)
                if exc.sqlstate == _READ_ONLY:  # a demoted primary: never hand it out again
                    connection.close()
                raise
            except BaseException:
                _rollback(connection)
                raise
            try:
                cursor.execute(_OWN["commit"])
            except psycopg.Error as exc:
                if connection.broken:
                    raise Lost(exc, at_commit=True) from exc
                raise  # the server answered COMMIT with an error: it rolled back
            return result

    def _begin_write_until(self, deadline: float) -> list[Queued]:
        """A write's BEGIN and its lock and statement timeouts, which end at ``deadline``."""
        left_ms = max(1, int(_left_s(deadline) * 1000))
        lock_ms = left_ms if self.lock_timeout_ms == 0 else min(left_ms, self.lock_timeout_ms)
        timeouts = {"lock": f"{lock_ms}ms", "statement": f"{left_ms}ms"}
        return [
            *self._opening(_OWN["begin_write"]),
            (_OWN["budgeted_timeouts"], timeouts),
        ]

    def _opening(self, begin: str) -> list[Queued]:
        """The statements that open a transaction: ``begin``, and behind a transaction pooler
        the schema and the lock timeout for this transaction alone."""
        if not self.transaction_pooled:
            return [(begin, None)]
        opening: list[Queued] = [(begin, None)]
        if self.schema is not None:
            opening.append((_OWN["local_search_path"], {"schema": self.schema}))
        opening.append((_OWN["local_lock_timeout"], {"lock_timeout": f"{self.lock_timeout_ms}ms"}))
        return opening

    def _run(
        self,
        body: Callable[[Transaction], T],
        begin: str,
        label: str,
        budget_s: float | None = None,
        rerun_on: tuple[type[Exception], ...] = (),
    ) -> T:
        retries = RetryBudget(label, self.max_attempts, budget_s)
        for attempt in retries.attempts():
            opening = self._opening(begin)
            if retries.deadline is not None:  # only writes have a budget
                opening = self._begin_write_until(retries.deadline)
            try:
                return self._attempt(body, opening, retries.deadline)
            except Lost as exc:
                if not exc.at_commit and retries.may_retry():
                    self._discard_broken()
                    continue  # nothing was committed: run it again on a sound connection
                raise translate(exc, label) from exc.error
            except psycopg.Error as exc:  # also PoolTimeout
                error = translate(exc, label, attempts=attempt)
                # A server that only reads may be a primary demoted by a failover: a fresh
                # connection (``target_session_attrs=read-write``) finds the new one.
                rerun = (
                    (exc.sqlstate or "") in RETRY_STATES
                    or exc.sqlstate == _READ_ONLY
                    or isinstance(error, rerun_on)
                )
                if rerun and retries.may_retry():
                    continue
                raise error from exc
            except rerun_on:  # the body found its rows moved (rolled back): run it again
                if not retries.may_retry():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def write(
        self,
        body: Callable[[Transaction], T],
        *,
        label: str = "write",
        budget_s: float | None = None,
        rerun_on: tuple[type[Exception], ...] = (),
    ) -> T:
        """Run ``body`` in one READ COMMITTED transaction and commit it.

        Re-run up to ``max_attempts`` times on a serialization failure, a deadlock or a
        connection lost before ``COMMIT``; raises :class:`CommitUncertain` if the connection is
        lost while ``COMMIT`` is in flight. With ``budget_s`` the whole write, retries included,
        takes at most about that many seconds of waiting: the wait for a pooled connection is cut
        to the budget left, the transaction runs with ``SET LOCAL lock_timeout`` and
        ``statement_timeout`` set to it (the lock timeout stays the store's own if that is
        shorter), and no re-run starts once it is spent. Running out raises
        :class:`StorageBusy` and nothing is committed. ``rerun_on``: see
        :meth:`effectledger.store.Store.write`; its re-runs draw on the same budget. With
        ``group_commit`` on, concurrent writes share one transaction (``store.batching``).
        """
        if self._group is not None and not self._group.alone():
            return self._group.write(body, label, budget_s, rerun_on)
        return self._run(body, _OWN["begin_write"], label, budget_s, rerun_on)

    def read(self, body: Callable[[Transaction], T]) -> T:
        """Run ``body`` in a read-only REPEATABLE READ transaction: one consistent snapshot."""
        return self._run(body, _OWN["begin_read"], "read")

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read by name, re-run on a fresh connection if the connection broke."""
        if self.transaction_pooled:  # the schema is set per transaction: read in one
            return self._run(lambda tx: tx.one(name, params), _OWN["begin_read"], name)
        if type(params) is not Identifiers:  # checked identifiers are sent as given
            params = storable(params)
        query = self._queries[name]
        retries = RetryBudget(name, self.max_attempts)
        for _ in retries.attempts():
            try:
                with self._checked_pool().connection() as connection:
                    try:
                        return connection.execute(query, params).fetchone()
                    except psycopg.Error as exc:
                        if connection.broken:
                            raise Lost(exc, at_commit=False) from exc
                        raise
            except Lost as exc:
                if retries.may_retry():
                    self._discard_broken()
                    continue
                raise translate(exc, name) from exc.error
            except psycopg.Error as exc:  # also PoolTimeout
                raise translate(exc, name) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def replication(self) -> Replication:
        """What the server this store writes to says of its standbys (``effectledger status``
        warns when a failover could lose an acknowledged write)."""
        try:
            with self._checked_pool().connection() as connection:
                row = connection.execute(_OWN["replication"]).fetchone()
        except psycopg.Error as exc:
            raise translate(exc, "replication") from exc
        assert row is not None
        return Replication.from_row(row)

    # -- schema --------------------------------------------------------------------------

    def migrate(self, *, replay: bool = False) -> list[int]:
        """Apply pending migrations, each in one transaction; return the versions applied.

        Runs on a connection of its own. Every migration transaction first takes an advisory
        lock, so processes that start together apply each migration once and the others find it
        recorded. A new ledger gets the current schema in one transaction, unless ``replay``
        (:func:`effectledger.store.postgres_schema.migrate`).
        """
        return migrate(
            self._connect,
            create_schema=self.schema is not None,
            local=self._local_settings(),
            replay=replay,
        )

    def _local_settings(self) -> list[Queued]:
        """What each schema transaction sets first when session settings cannot be relied on."""
        return self._opening(_OWN["begin_read"])[1:]

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
            connection.execute(_OWN["rollback"])
