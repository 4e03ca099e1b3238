"""A batch claim's reads are the lone claim's reads: one statement for a batch answers exactly
what one statement per operation answers, and the batch recheck gives each operation the lone
recheck's verdict, on both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import Context, DestinationRef, ManualClock
from effectledger.authority.rechecks import dispatch_rechecks
from effectledger.ledger.batches import Prefetched
from effectledger.model.operations import Row
from tests.conftest import drop_trigger, raw_sql, reply_command
from tests.worker.batch_world import Orders, orders_world


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[Orders]:
    """Six READY refunds of two tenants, and one operation admitted without a proposal."""
    made = orders_world(store_url, tmp_path, clock=ManualClock())
    made.ready(4)
    made.ready(2, tenant="globex")
    made.app.ledger.admit(
        Context(tenant_id="acme", actor_id="ops"),
        operation_id="op-outside",
        revision="rev-1",
        command=reply_command(),
        destination=DestinationRef(
            account_id=made.receiver.account_id, endpoint=made.receiver.endpoint
        ),
        admission_reference="ticket/42",
    )
    yield made
    made.close()


def _rows(world: Orders) -> list[Row]:
    return world.app.ledger.store.read(
        lambda tx: tx.all(
            "operations_ready_batch",
            {
                "destination_account": world.receiver.account_id,
                "destination_endpoint": world.receiver.endpoint,
                "after_us": -1,
                "after_tenant": "",
                "after_operation": "",
                "limit": 100,
            },
        )
    )


def test_the_batch_reads_answer_what_the_lone_reads_answer(world: Orders) -> None:
    """Trails, proposals and approvals read for a whole batch, then asked for one by one, are
    the rows the lone queries return, column for column (and a key outside the batch is read)."""
    rows = _rows(world)
    assert len(rows) == 7

    def compare(tx: object) -> int:
        prefetched = Prefetched(tx, rows)  # type: ignore[arg-type]
        compared = 0
        for row in rows:
            trail = {"tenant_id": row["tenant_id"], "operation_id": row["operation_id"]}
            lone = tx.all("events_for_operation", trail)  # type: ignore[attr-defined]
            assert prefetched.all("events_for_operation", trail) == lone
            assert len(lone) >= 1
            compared += len(lone)
            for query, column in (("proposal_get", "proposal_id"), ("approval_get", "approval_id")):
                if row[column] is None:
                    continue
                key = {"tenant_id": row["tenant_id"], column: row[column]}
                found = prefetched.one(query, key)
                assert found is not None
                assert found == tx.one(query, key)  # type: ignore[attr-defined]
                compared += 1
        outside = {"tenant_id": "acme", "operation_id": "op-unknown"}
        assert prefetched.all("events_for_operation", outside) == []
        return compared

    # 6 refunds of 3 events and 1 outside admission of 1, and 6 proposals and 6 approvals.
    assert world.app.ledger.store.read(compare) == 6 * 3 + 1 + 6 + 6


def test_the_batch_recheck_gives_each_operation_the_lone_verdict(world: Orders) -> None:
    """Fresh, stale, tampered, outside-admitted and expired operations: the batch recheck and
    the lone recheck agree on every one."""
    world.orders.change("acme", "ord-0000001")  # stale resource version
    (proposal_id, text) = next(  # and another acme refund's proposal edited: not its digest
        row
        for row in raw_sql(
            world.store_url,
            "SELECT proposal_id, arguments_json FROM proposals WHERE tenant_id = 'acme'",
        )
        if "ord-0000002" in str(row[1])
    )
    drop_trigger(world.store_url, "proposals", "proposals_no_update")
    arguments = json.loads(str(text))
    arguments["amount_minor"] = 5000
    raw_sql(
        world.store_url,
        f"UPDATE proposals SET arguments_json = '{json.dumps(arguments)}' "
        f"WHERE proposal_id = '{proposal_id}'",
    )
    executor = world.app.executor_for(
        DestinationRef(account_id=world.receiver.account_id, endpoint=world.receiver.endpoint)
    )
    assert executor.guard is not None

    def verdicts() -> tuple[list[str | None], list[str | None]]:
        checks = []
        for found in _rows(world):
            operation = world.app.ledger.get(
                Context(tenant_id=found["tenant_id"], actor_id="x"), found["operation_id"]
            )
            checks.append((Context(tenant_id=found["tenant_id"], actor_id="worker"), operation))
        lone = [executor.guard(worker, operation) for worker, operation in checks]  # type: ignore[misc]
        authority = world.app.authority
        return dispatch_rechecks(authority.ledger, authority.registry, checks), lone

    batch, lone = verdicts()
    assert batch == lone
    assert sorted(map(str, lone)) == sorted(
        ["None"] * 5 + ["stale_resource_version", "digest_mismatch"]
    )
    world.app.ledger.clock.advance(timedelta(hours=1))  # type: ignore[attr-defined]
    batch, lone = verdicts()
    assert batch == lone
    assert sorted(map(str, lone)) == sorted(["None", "digest_mismatch"] + ["expired"] * 5)
