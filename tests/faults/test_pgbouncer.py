"""The PostgreSQL store behind PgBouncer pooling by transaction.

Behind such a pooler a client's connection is a different server connection in each
transaction, so a store that leaned on session settings or on psycopg's server-side prepared
statements would fail, or worse, write one ledger's rows into another's schema. A store whose
URL does not name the pooler is refused at open, naming the setting; with
``pooler=transaction`` two ledgers in two schemas share the pooler's few server connections from
16 threads and each keeps exactly its own rows. (``.ci/run`` also runs the race and crash tests
through PgBouncer: ``python -m tests.faults._pgbouncer -- pytest ...``.)
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from effectledger import InvalidInput, OperationState
from effectledger.store import open_store
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.conftest import count_rows, drop_postgres_schema, require_postgres, with_options
from tests.faults._pgbouncer import pgbouncer_fixture
from tests.worker.support import refunds

pytestmark = pytest.mark.postgres

THREADS = 16
PER_THREAD = 3


@pytest.fixture
def through() -> Iterator[str]:
    """The test server's URL through a PgBouncer in transaction mode."""
    yield from pgbouncer_fixture()


@pytest.fixture
def schemas() -> Iterator[list[str]]:
    """Two fresh schema names, dropped afterwards."""
    names = [f"el_pgb_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    yield names
    for name in names:
        drop_postgres_schema(name)


def _schema_exists(name: str) -> bool:
    with psycopg.connect(require_postgres()) as connection:
        row = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (name,)
        ).fetchone()
    return bool(row and row[0])


def test_a_pooler_the_url_does_not_name_is_refused_at_open(
    through: str, schemas: list[str]
) -> None:
    """Opening a store through PgBouncer without ``pooler`` fails naming the setting, and
    creates nothing on the server."""
    with pytest.raises(InvalidInput) as refused:
        open_store(with_options(through, schema=schemas[0]))
    assert refused.value.details.get("field") == "pooler"
    assert "pooler=transaction" in str(refused.value)
    assert not _schema_exists(schemas[0])


def test_an_unknown_pooler_mode_is_refused() -> None:
    """``pooler`` takes none, session or transaction."""
    with pytest.raises(InvalidInput) as refused:
        open_store("postgresql://postgres@127.0.0.1:1/x?pooler=statement&schema=x")
    assert refused.value.details.get("field") == "pooler"


@pytest.mark.slow
def test_two_ledgers_share_the_poolers_connections_and_keep_their_own_rows(
    through: str, schemas: list[str], tmp_path: Path
) -> None:
    """16 threads perform refunds in two ledgers of two schemas through one transaction
    pooler: every refund is SUCCEEDED once by its receiver's count, and each schema holds
    exactly its own ledger's operations."""
    worlds = []
    for index, schema in enumerate(schemas):
        folder = tmp_path / f"w{index}"
        folder.mkdir()
        url = with_options(through, schema=schema, pooler="transaction")
        worlds.append(refunds(url, folder))
    failures: list[BaseException] = []

    def perform(world_index: int) -> None:
        world = worlds[world_index]
        try:
            for _ in range(PER_THREAD):
                proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
                world.app.approve(REVIEWER, proposal)
                assert world.app.perform(AGENT, proposal).state is OperationState.SUCCEEDED
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=perform, args=(i % 2,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    each = THREADS // 2 * PER_THREAD
    for world, schema in zip(worlds, schemas, strict=True):
        direct = with_options(require_postgres(), schema=schema)
        assert count_rows(direct, "operations") == each
        assert count_rows(direct, "operations", "state = 'SUCCEEDED'") == each
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (each, each)
        world.close()
