"""Shared fixtures: a real store per backend, a real simulated receiver, a manual clock."""

from __future__ import annotations

import functools
import gc
import hashlib
import logging
import os
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from effectledger import (
    Command,
    Context,
    DestinationRef,
    LedgerSettings,
    ManualClock,
    Operation,
    SimulatedReceiver,
)
from effectledger.keyfiles import KEY_DIR_ENV
from effectledger.ledger import Ledger
from effectledger.store import Store, open_store

POSTGRES_URL_VARIABLE = "EFFECTLEDGER_TEST_POSTGRES_URL"
GROUP_COMMIT_VARIABLE = "EFFECTLEDGER_TEST_GROUP_COMMIT"
"""``on`` or ``off``: every store URL the fixtures make turns group commit on or off (both
backends); unset, each backend's default (SQLite on, PostgreSQL off)."""
POOLER_VARIABLE = "EFFECTLEDGER_TEST_POOLER"
"""Set to ``transaction`` when the PostgreSQL URL names a PgBouncer in transaction mode: every
PostgreSQL store URL the fixtures make says ``pooler=transaction``."""
BACKENDS = ("sqlite", "postgres")
_BACKEND_PARAMS = [
    pytest.param(name, id=name, marks=[pytest.mark.postgres] if name == "postgres" else [])
    for name in BACKENDS
]
_created_schemas: set[str] = set()


def _share_compiled_modules() -> None:
    """Let the suite's processes share compiled modules where the environment forbids writing
    them (``PYTHONDONTWRITEBYTECODE``, as some images set).

    The tests start hundreds of Python processes (commands, servers, racing performers); each
    compiling the package from source again costs 0.3 s of CPU, and each pytest worker 8 s more
    to rewrite the test modules. The compiled files go to a folder of their own under the
    temporary directory (``PYTHONPYCACHEPREFIX``), never into the checkout, and a stale one is
    recompiled as Python always does (its source's size and time no longer match)."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    prefix = os.environ.setdefault(
        "PYTHONPYCACHEPREFIX",
        str(Path(tempfile.gettempdir()) / f"effectledger-tests-pycache-{os.getuid()}"),
    )
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_share_compiled_modules()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than the CPUs this process may use. A fifth of a worker's
    time is spent waiting (on child processes, servers, deadlines under test, a disk's flush),
    which the extra worker fills. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own reading of it
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (usable or 1) + 1


@functools.cache
def _postgres_problem() -> str | None:
    """Why the PostgreSQL backend cannot run here, or ``None`` if its server answers."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        return (
            f"{POSTGRES_URL_VARIABLE} is not set; set it to a database the tests may fill, "
            "e.g. postgresql://postgres@127.0.0.1:5432/test"
        )
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"the PostgreSQL server in {POSTGRES_URL_VARIABLE} is unreachable: {exc}"
    return None


def require_postgres() -> str:
    """The base URL of the test server; skips without one, but fails under CI or if it is down."""
    problem = _postgres_problem()
    if problem is not None:
        if in_ci() or os.environ.get(POSTGRES_URL_VARIABLE):
            pytest.fail(problem)
        pytest.skip(problem)
    return os.environ[POSTGRES_URL_VARIABLE]


def postgres_schema(tmp_path: Path) -> str:
    """The schema that holds the PostgreSQL store of the test owning ``tmp_path``."""
    digest = hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]
    return f"el_test_{os.getpid()}_{digest}"


STORE_OPTIONS = ("group_commit", "pooler")
"""Query options of a store URL that are the store's own, not the database's or a file's."""


def without_store_options(url: str) -> str:
    """``url`` without the store's own options (group commit, a pooler): the location a driver,
    a file path or a comparison takes."""
    base, _, query = url.partition("?")  # not urlunsplit: it folds sqlite://// into sqlite://
    kept = [(k, v) for k, v in parse_qsl(query) if k not in STORE_OPTIONS]
    return f"{base}?{urlencode(kept)}" if kept else base


def sqlite_path(url: str) -> Path:
    """The file of an SQLite store URL."""
    return Path(urlsplit(url).path[1:])


def with_options(url: str, **options: object) -> str:
    """``url`` with ``options`` added to its query string."""
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), *((key, str(value)) for key, value in options.items())]
    return urlunsplit(parts._replace(query=urlencode(query)))


def make_store_url(backend: str, tmp_path: Path) -> str:
    """A URL of an empty store of ``backend`` that belongs to one test.

    PostgreSQL stores live in a schema of their own in the database named by
    ``EFFECTLEDGER_TEST_POSTGRES_URL``; the ``store_url`` fixture drops it after the test.
    """
    switch = os.environ.get(GROUP_COMMIT_VARIABLE, "").lower()
    grouped = switch == "on"
    if backend == "sqlite":
        chosen = f"?group_commit={switch}" if switch in ("on", "off") else ""
        return f"sqlite:///{tmp_path / 'ledger.db'}" + chosen
    if backend == "postgres":
        base = require_postgres()
        schema = postgres_schema(tmp_path)
        _created_schemas.add(schema)
        options = {"schema": schema}
        if grouped:
            options["group_commit"] = "on"
        if os.environ.get(POOLER_VARIABLE):
            options["pooler"] = os.environ[POOLER_VARIABLE]
        return with_options(base, **options)
    raise AssertionError(f"unknown backend {backend}")  # pragma: no cover


def drop_postgres_schema(schema: str) -> None:
    """Drop one test schema (and everything in it) if it exists."""
    with psycopg.connect(os.environ[POSTGRES_URL_VARIABLE], autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )
    _created_schemas.discard(schema)


@pytest.fixture(scope="module", autouse=True)
def _collect_after_each_module() -> Iterator[None]:
    """Collect garbage when a test module ends, so an unclosed file or socket it left behind
    warns (an error, as every warning is) in that module's teardown, naming the object, and
    never later at random, in pytest's own temporary-directory cleanup.

    What survives the collection is frozen (``gc.freeze``): the next module's collection scans
    only what was made since, not every object the session has accumulated (frameworks, pydantic
    schemas), which took a tenth of the suite's CPU. A frozen object is still freed when its last
    reference goes."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _library_logger_as_it_was() -> Iterator[None]:
    """Give the ``effectledger`` logger back as it was when a test ends.

    A command run in-process (``worker``, ``serve``) shows the library's log lines on the
    standard error it found, which is pytest's capture of that one test: a handler left on it
    would write, in a later test, to a capture already closed."""
    logger = logging.getLogger("effectledger")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.fixture(scope="session", autouse=True)
def _drop_leftover_schemas() -> Iterator[None]:
    """Drop the schemas of tests that built a store URL without the ``store_url`` fixture."""
    yield
    for schema in sorted(_created_schemas):
        drop_postgres_schema(schema)


@pytest.fixture(params=_BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of a store backend: every backend test runs once per backend."""
    return str(request.param)


def use_key_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PostgreSQL ledger keeps its keys in the configured key directory: one per test."""
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "ledger-keys"))


@pytest.fixture
def store_url(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of a fresh, empty ledger store, once per backend (a PostgreSQL one with its
    key directory configured, as ``connect`` requires)."""
    if backend == "postgres":
        use_key_directory(monkeypatch, tmp_path)
    yield make_store_url(backend, tmp_path)
    if backend == "postgres":
        drop_postgres_schema(postgres_schema(tmp_path))


@pytest.fixture
def postgres_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh PostgreSQL store URL, for tests of what only a networked database can do."""
    use_key_directory(monkeypatch, tmp_path)
    yield make_store_url("postgres", tmp_path)
    drop_postgres_schema(postgres_schema(tmp_path))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store over ``store_url``."""
    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test says so."""
    return ManualClock()


@pytest.fixture
def settings() -> LedgerSettings:
    """Default ledger timing: recover after 30 s, look up every 30 s, review after 3 misses."""
    return LedgerSettings(max_inconclusive_lookups=3)


@pytest.fixture
def ledger(store: Store, clock: ManualClock, settings: LedgerSettings) -> Ledger:
    """A ledger over the test's store and clock."""
    return Ledger(store, clock=clock, settings=settings)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[SimulatedReceiver]:
    """A simulated receiver with its own SQLite file."""
    made = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    yield made
    made.close()


@pytest.fixture
def context() -> Context:
    """The trusted caller of most tests: tenant ``acme``, actor ``alice``."""
    return Context(tenant_id="acme", actor_id="alice")


def reply_command(body: str = "Your refund is on its way.", **extra: object) -> Command:
    """The reference fixture command: a fixed support reply."""
    return Command(
        action="send_support_reply",
        contract_version="reply-v1",
        arguments={"recipient": "customer@example.com", "body": body, **extra},
    )


def admit(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    operation_id: str = "op-1",
    *,
    command: Command | None = None,
    revision: str = "rev-1",
) -> Operation:
    """Admit ``operation_id`` for the reply command, bound to ``receiver``."""
    return ledger.admit(
        context,
        operation_id=operation_id,
        revision=revision,
        command=command or reply_command(),
        destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        admission_reference=f"approval/{operation_id}",
    )


def in_ci() -> bool:
    """Whether this run is CI, where nothing may skip for a missing server or extra."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def run_sql(
    store_url: str, statement: str, params: tuple[object, ...] = ()
) -> list[tuple[Any, ...]]:
    """Run one statement (``?`` placeholders) straight through the driver, around the store.

    For tests that must tamper with or inspect rows the way an intruder or an operator would.
    """
    if store_url.startswith("sqlite:"):
        connection = sqlite3.connect(urlsplit(store_url).path[1:])
        try:
            with connection:
                return connection.execute(statement, params).fetchall()
        finally:
            connection.close()
    parts = urlsplit(store_url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    for option in ("group_commit", "pooler"):  # the store's options, not libpq's
        query.pop(option, None)
    base = urlunsplit(parts._replace(query=urlencode(query)))
    with psycopg.connect(base) as connection:  # one transaction: safe behind a pooler too
        connection.execute("SELECT set_config('search_path', %s, true)", (schema,))
        cursor = connection.execute(statement.replace("?", "%s").encode(), params)
        return list(cursor.fetchall()) if cursor.description else []


def raw_sql(store_url: str, statement: str) -> list[tuple[object, ...]]:
    """Run one literal SQL statement on the store's database, outside the ledger.

    Tests use it to play the out-of-band actor (an operator with database access) and to read
    durable facts directly; it commits immediately.
    """
    if store_url.startswith("sqlite:"):
        import sqlite3

        connection = sqlite3.connect(urlsplit(store_url).path[1:], isolation_level=None)
        # SQLite enforces foreign keys only on connections that ask for it; the store always does.
        connection.execute("PRAGMA foreign_keys = ON")
        try:
            return [tuple(row) for row in connection.execute(statement).fetchall()]
        finally:
            connection.close()
    return run_sql(store_url, statement)


def count_rows(store_url: str, table: str, where: str = "1 = 1") -> int:
    """How many rows of ``table`` match ``where`` (a literal SQL condition)."""
    rows = raw_sql(store_url, f"SELECT count(*) FROM {table} WHERE {where}")
    return int(rows[0][0])  # type: ignore[call-overload]


def require_module(name: str) -> None:
    """Skip the test when an optional extra is missing, except in CI where it must be there."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        message = f"the optional dependency {name} is not installed"
        if in_ci():
            pytest.fail(message + " (CI installs every extra)")
        pytest.skip(message)


RAW_REFUSED = (sqlite3.IntegrityError, psycopg.errors.IntegrityError)
"""What a refused out-of-band write raises, on either backend's own driver."""


def drop_trigger(store_url: str, table: str, trigger: str) -> None:
    """Remove a protective trigger, as a hostile database administrator could."""
    if store_url.startswith("sqlite:"):
        raw_sql(store_url, f"DROP TRIGGER {trigger}")
    else:
        raw_sql(store_url, f"DROP TRIGGER {trigger} ON {table}")


def refuse_event(store_url: str, event_type: str) -> None:
    """Make the database refuse to store audit events of ``event_type`` (a real failed write)."""
    if store_url.startswith("sqlite:"):
        raw_sql(
            store_url,
            f"CREATE TRIGGER refuse_{event_type} BEFORE INSERT ON audit_events "
            f"WHEN NEW.event_type = '{event_type}' BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        return
    raw_sql(
        store_url,
        f"CREATE FUNCTION refuse_{event_type.lower()}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'integrity_constraint_violation'; "
        "END; $$",
    )
    raw_sql(
        store_url,
        f"CREATE TRIGGER refuse_{event_type.lower()} BEFORE INSERT ON audit_events FOR EACH ROW "
        f"WHEN (NEW.event_type = '{event_type}') "
        f"EXECUTE FUNCTION refuse_{event_type.lower()}()",
    )
