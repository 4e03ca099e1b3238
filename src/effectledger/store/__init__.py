"""Stores: open a ledger database by URL.

``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` and ``postgresql://...`` are
understood. A store only connects, runs named queries (:mod:`effectledger.store.queries`), holds
transactions and translates driver errors into :mod:`effectledger.errors`; every rule about what
may change lives in :mod:`effectledger.ledger`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from effectledger.errors import InvalidInput

__all__ = ["Row", "Store", "Transaction", "open_store"]

T = TypeVar("T")
Row = Mapping[str, Any]


class Transaction(Protocol):
    """One open database transaction; statements are run by name."""

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """The first row of query ``name``, or ``None``."""
        ...

    def all(self, name: str, params: Mapping[str, Any]) -> list[Row]:
        """Every row of query ``name``."""
        ...

    def run(self, name: str, params: Mapping[str, Any]) -> int:
        """Execute statement ``name``; return the number of rows it changed."""
        ...


class Store(Protocol):
    """A ledger database. Implementations: SQLite (embedded default) and PostgreSQL."""

    url: str
    dialect: str

    def write(
        self,
        body: Callable[[Transaction], T],
        *,
        label: str = "write",
        budget_s: float | None = None,
    ) -> T:
        """Run ``body`` in one write transaction and commit it.

        If the database stays busy the whole ``body`` is retried, a bounded number of times, so
        ``body`` must do nothing but database work. Raises a :class:`StorageError` subclass.
        ``budget_s``, when given, bounds in seconds how long the write, retries included, may
        wait for locks (and, on PostgreSQL, for connections and statements); once it is spent
        the write fails with :class:`StorageBusy` and nothing is committed.
        """
        ...

    def read(self, body: Callable[[Transaction], T]) -> T:
        """Run ``body`` against one consistent snapshot, writing nothing."""
        ...

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read: the fast path for status checks and replays."""
        ...

    def migrate(self) -> list[int]:
        """Apply the pending schema migrations, each once even under concurrency; return them."""
        ...

    def close(self) -> None:
        """Close every connection the store holds."""
        ...


def open_store(url: str, **options: Any) -> Store:
    """Open the store named by ``url`` and bring its schema up to date.

    Pass ``migrate=False`` to open without migrating (then call :meth:`Store.migrate`).
    Pass ``create=False`` to open only an existing ledger, as it is: nothing is created or
    migrated, a missing SQLite file or PostgreSQL schema raises :class:`NotFound` (details
    ``reason="no_database"``), and a file that is not a ledger database or a schema behind this
    version raises :class:`InvalidInput` (``reason="not_a_database"`` / ``"schema_behind"``).
    """
    if url.startswith("sqlite:"):
        from effectledger.store.sqlite import SQLiteStore

        return SQLiteStore.from_url(url, **options)
    if url.startswith(("postgresql:", "postgres:")):
        try:
            from effectledger.store.postgres import PostgresStore
        except ImportError as exc:  # pragma: no cover - depends on installed extras
            raise InvalidInput(
                "PostgreSQL needs the postgres extra: pip install 'effectledger[postgres]'"
            ) from exc
        store: Store = PostgresStore.from_url(url, **options)
        return store
    raise InvalidInput(
        f"unsupported store URL {url!r}: use sqlite:///path.db or postgresql://...",
        url=url,
    )
