"""Stores: open a ledger database by URL.

``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` and ``postgresql://...`` are
understood. A store only connects, runs named queries (:mod:`effectledger.sql`), holds
transactions and translates driver errors into :mod:`effectledger.errors`; every rule about what
may change lives in :mod:`effectledger.ledger`.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from effectledger.errors import InvalidInput
from effectledger.model.operations import Row

__all__ = [
    "BACKENDS",
    "Identifiers",
    "Row",
    "Store",
    "Transaction",
    "announce_migration",
    "check_store_url",
    "open_store",
    "redact",
    "refuse_unstorable_text",
]

T = TypeVar("T")


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

    def queue(self, name: str, params: Mapping[str, Any]) -> None:
        """Execute statement ``name``, whose answer nobody reads, before the next statement.

        A store may send it together with that next statement (PostgreSQL does, in one round
        trip); its error, if any, is then raised by that statement or by the commit.
        """
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
        rerun_on: tuple[type[Exception], ...] = (),
    ) -> T:
        """Run ``body`` in one write transaction and commit it.

        If the database stays busy the whole ``body`` is retried, a bounded number of times, so
        ``body`` must do nothing but database work. Raises a :class:`StorageError` subclass.
        ``budget_s``, when given, bounds in seconds how long the write, retries included, may
        wait for locks (and, on PostgreSQL, for connections and statements); once it is spent
        the write fails with :class:`StorageBusy` and nothing is committed. ``rerun_on`` names
        effectledger errors (raised by ``body``, or a translated driver error such as
        :class:`ConstraintViolation`) after which the rolled-back ``body`` runs again on fresh
        rows: every re-run, for whatever reason, draws on the same budget (``max_attempts`` runs
        at most, none after ``budget_s``).
        """
        ...

    def read(self, body: Callable[[Transaction], T]) -> T:
        """Run ``body`` against one consistent snapshot, writing nothing."""
        ...

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        """One autocommit read: the fast path for status checks and replays."""
        ...

    def migrate(self, *, replay: bool = False) -> list[int]:
        """Apply the pending schema migrations, each once even under concurrency; return them.

        A new ledger gets the current schema in one transaction with every migration recorded;
        ``replay`` applies the migrations one by one instead (the schema tests compare the
        two)."""
        ...

    def close(self) -> None:
        """Close every connection the store holds."""
        ...


_URL_PASSWORD = re.compile(r"(?P<keep>[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:)[^@\s]*@")
_KEYWORD_PASSWORD = re.compile(
    r"(?P<keep>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&;]+)", re.IGNORECASE
)


def redact(text: str) -> str:
    """``text`` with every password of a connection URL or conninfo in it replaced by ``***``.

    Covers ``scheme://user:password@host``, ``?password=...`` in a query string and
    ``password=...`` in a libpq ``key=value`` string: store URLs, and driver messages that
    echo them, pass through this before they reach a message, a log line or a ``repr``.
    """
    text = _URL_PASSWORD.sub(r"\g<keep>***@", text)
    return _KEYWORD_PASSWORD.sub(r"\g<keep>***", text)


class Identifiers(dict[str, str]):
    """Named-query parameters that are all well-formed identifiers, each already checked (by
    :func:`~effectledger.model.operations.validate_identifier`, or a :class:`Context`'s own
    check): ASCII without NUL, and no hash among them. :meth:`Store.one` sends them as they are,
    where other parameters are first checked (:func:`refuse_unstorable_text`) and their hashes
    packed: the check would find nothing, on a replay's hot path."""

    __slots__ = ()


def refuse_unstorable_text(params: Mapping[str, Any]) -> None:
    """Raise ``invalid_input`` naming the field if a text parameter cannot be stored as sent.

    NUL is refused by PostgreSQL's text type and silently kept by SQLite, and a lone surrogate
    cannot be encoded for either: both are refused here, the same way on both backends, before
    anything reaches the driver.
    """
    for name, value in params.items():
        if type(value) is not str:
            continue
        if "\x00" in value:
            raise InvalidInput(f"{name} must not contain NUL characters", field=name)
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidInput(f"{name} must not contain lone surrogates", field=name) from None


BACKENDS: dict[str, tuple[str, str, str | None]] = {
    "sqlite": ("effectledger.store.sqlite", "SQLiteStore", None),
    "postgresql": ("effectledger.store.postgres", "PostgresStore", "postgres"),
    "postgres": ("effectledger.store.postgres", "PostgresStore", "postgres"),
}
"""URL scheme -> (module, store class, extra it needs): a new backend is one line here and
one module beside this one (CONTRIBUTING.md, "Add a store backend"). Backends load lazily."""


def announce_migration(log: logging.Logger, version: int, name: str) -> None:
    """Say on the log (a warning: shown without any logging set up) that an existing ledger is
    being migrated, since a migration that rebuilds tables takes minutes on a large one."""
    log.warning(
        "applying schema migration %04d (%s) to an existing ledger; on a large ledger this can "
        "take minutes (docs/scaling.md)",
        version,
        name,
    )


def check_store_url(url: object, *, field: str = "url") -> str:
    """The backend scheme of store URL ``url``; :class:`InvalidInput` naming ``field`` if it is
    not text or its scheme names no backend of :data:`BACKENDS` (``mysql://...``).

    Nothing is imported or opened: every command that takes a store URL checks it first, so a
    wrong scheme is refused the same way wherever it is given, its password shown as ``***``.
    """
    if not isinstance(url, str):
        raise InvalidInput("a store URL is text", field=field)
    scheme = url.partition(":")[0].lower()
    if scheme not in BACKENDS:
        shown = redact(url)
        raise InvalidInput(
            f"unsupported store URL {shown!r}: use sqlite:///path.db or postgresql://...",
            field=field,
            url=shown,
        )
    return scheme


def open_store(url: str, **options: Any) -> Store:
    """Open the store named by ``url`` and bring its schema up to date.

    Pass ``migrate=False`` to open without migrating (then call :meth:`Store.migrate`).
    Pass ``create=False`` to open only an existing ledger, as it is: nothing is created or
    migrated, a missing SQLite file or PostgreSQL schema raises :class:`NotFound` (details
    ``reason="no_database"``), and a file that is not a ledger database or a schema behind this
    version raises :class:`InvalidInput` (``reason="not_a_database"`` / ``"schema_behind"``).
    """
    module_name, class_name, extra = BACKENDS[check_store_url(url)]
    if extra is not None:
        from effectledger.extras import require_extra

        require_extra(extra, class_name.removesuffix("Store"))
    opened: Store = getattr(importlib.import_module(module_name), class_name).from_url(
        url, **options
    )
    return opened
