"""A forked child never uses its parent's store handles, known as the fork returns."""

from __future__ import annotations

import os
import sys

import pytest

from effectledger import Context, SimulatedReceiver, StorageError
from effectledger.ledger import Ledger
from effectledger.store import Store
from tests.conftest import admit

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="this platform has no fork")


def _in_child(run: object) -> str:
    """What ``run()`` (called in a forked child) wrote back: ``ok``, or the error's code."""
    assert callable(run)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's report is what the parent checks
        code = 1
        try:
            os.close(read_end)
            try:
                run()
                answer = "ok"
            except StorageError as exc:
                answer = f"{exc.code}: {exc.message}"
            os.write(write_end, answer.encode())
            code = 0
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read().decode()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return answer


def test_a_forked_child_opens_its_own_sqlite_connection_or_is_refused_postgres(
    store: Store, receiver: SimulatedReceiver, context: Context
) -> None:
    """After a fork, SQLite's child admits an operation on a connection of its own (the parent
    reads that row afterwards, on its own connection), and PostgreSQL's child is refused
    ``storage`` without touching the parent's pool; the parent's store keeps working."""
    ledger = Ledger(store)
    admit(ledger, context, receiver, "op-parent")  # the parent's connection is open now
    answer = _in_child(lambda: admit(Ledger(store), context, receiver, "op-child"))
    if store.dialect == "sqlite":
        assert answer == "ok"
        assert ledger.get(context, "op-child").operation_id == "op-child"  # durable
    else:
        assert answer.startswith("storage: a PostgreSQL store cannot cross a fork"), answer
        assert [op.operation_id for op in ledger.list_operations(
            Context(tenant_id="acme", actor_id="rita", roles=frozenset({"auditor"})), limit=10
        )] == ["op-parent"]  # fmt: skip
    assert ledger.get(context, "op-parent").operation_id == "op-parent"
