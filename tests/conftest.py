"""Shared fixtures: a real store per backend, a real simulated receiver, a manual clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import (
    Command,
    Context,
    DestinationRef,
    Ledger,
    LedgerSettings,
    ManualClock,
    Operation,
    SimulatedReceiver,
    open_store,
)
from effectledger.store import Store

BACKENDS = ("sqlite",)


def make_store_url(backend: str, tmp_path: Path) -> str:
    """A URL of an empty store of ``backend`` that belongs to one test."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    raise AssertionError(f"unknown backend {backend}")  # pragma: no cover


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh, empty ledger store, once per backend."""
    return make_store_url(str(request.param), tmp_path)


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
    """The article's fixture command: a fixed support reply."""
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


def raw_sql(store_url: str, statement: str) -> list[tuple[object, ...]]:
    """Run one literal SQL statement on the store's database, outside the ledger.

    Tests use it to play the out-of-band actor (an operator with database access) and to read
    durable facts directly; it commits immediately.
    """
    if store_url.startswith("sqlite:"):
        import sqlite3

        connection = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        # SQLite enforces foreign keys only on connections that ask for it; the store always does.
        connection.execute("PRAGMA foreign_keys = ON")
        try:
            return [tuple(row) for row in connection.execute(statement).fetchall()]
        finally:
            connection.close()
    raise AssertionError(f"raw_sql does not know {store_url}")  # pragma: no cover


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
