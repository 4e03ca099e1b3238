"""A worker while its PostgreSQL server is unreachable: it backs off, then resumes, losing nothing.

The outage is real: the store connects through a TCP gate that cuts every connection and
refuses new ones; the waits between passes are recorded instead of slept, so the test does not
wait on the wall clock for the back-off.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from effectledger import OperationState
from effectledger.workers import Worker, WorkerSettings
from tests.conftest import raw_sql, with_options
from tests.worker.gate import Gate
from tests.worker.support import refunds

pytestmark = pytest.mark.postgres


def test_the_dispatch_loop_backs_off_while_the_store_is_down_and_resumes(
    postgres_url: str, tmp_path: Path
) -> None:
    """Cut off, each failed pass doubles its wait to a bound; back, the refund is made once."""
    parts = urlsplit(postgres_url)
    gate = Gate(parts.hostname or "127.0.0.1", parts.port or 5432)
    user = f"{parts.username}@" if parts.username else ""
    netloc = f"{user}127.0.0.1:{gate.port}"
    gated = with_options(
        urlunsplit(parts._replace(netloc=netloc)), pool_timeout_s=0.3, connect_timeout=2
    )
    world = refunds(gated, tmp_path)
    try:
        (operation_id,) = world.ready(1)
        gate.shut()
        waits: list[float] = []

        def wait(seconds: float) -> bool:
            waits.append(seconds)
            if len(waits) == 4:
                gate.reopen()
            state = raw_sql(
                postgres_url,
                f"SELECT state FROM operations WHERE operation_id = '{operation_id}'",
            )
            return state == [(OperationState.SUCCEEDED.value,)] or len(waits) > 200

        settings = WorkerSettings(
            recovery_threads=0,
            seal_interval=None,
            dispatch_interval=0.01,
            backoff_initial=0.5,
            backoff_max=2.0,
        )
        worker = Worker(world.app, settings, wait=wait)
        worker.start()
        assert worker.join(timeout=120)

        assert waits[:4] == [0.5, 1.0, 2.0, 2.0]
        assert worker.totals["dispatch"].store_down >= 4
        assert gate.refused >= 1
        assert raw_sql(
            postgres_url, f"SELECT state FROM operations WHERE operation_id = '{operation_id}'"
        ) == [("SUCCEEDED",)]
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (1, 1)
        assert raw_sql(postgres_url, "SELECT count(*) FROM attempts") == [(1,)]
    finally:
        world.close()
        gate.close()
