"""The two documented destination examples, each through the ledger against the reference
receiver (playing the provider), on every backend."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from effectledger import Context, DestinationRef, ManualClock, OperationState
from effectledger.destinations.secrets import env_secret
from effectledger.ledger import Ledger
from effectledger.receiver.server import RunningReceiver
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import count_rows, raw_sql
from tests.http_destination.conftest import TOKEN
from tests.http_destination.support import last_evidence

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` by path (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stored_body(served: RunningReceiver, collection: str, key: str) -> dict[str, object]:
    """The body the receiver performed under ``key``, read from its own database."""
    with sqlite3.connect(served.store.path) as connection:
        row = connection.execute(
            "SELECT body_json FROM effects WHERE collection = ? AND idempotency_key = ?",
            (collection, key),
        ).fetchone()
    connection.close()
    assert row is not None
    return dict(json.loads(row[0]))


@pytest.fixture
def payments() -> ModuleType:
    """The payment-style example module."""
    return load("http_payment_destination")


@pytest.fixture
def email() -> ModuleType:
    """The email-style example module."""
    return load("http_email_destination")


def test_refund_is_sent_once_by_key_and_a_lost_reply_is_resent_in_the_window(
    ledger: Ledger, context: Context, served: RunningReceiver, payments: ModuleType
) -> None:
    """The payment example sends the provider's refund body under the operation's key; a lost
    reply is resent inside its window and the refund happens once."""
    target = payments.payment_destination(
        served.url, api_key=env_secret("RECEIVER_TOKEN", "Bearer {secret}"), deadline_s=2.0
    )
    operation = ledger.admit(
        context, operation_id="op-1", revision="rev-1",
        command=payments.refund_command("ch_42", 2500, "EUR"),
        destination=DestinationRef(account_id=target.account_id, endpoint=target.endpoint),
        admission_reference="approval/op-1",
    )  # fmt: skip
    served.faults.drop_after_commit = 1
    assert Executor(ledger, target).execute(context, "op-1").state is OperationState.SUCCEEDED
    body = stored_body(served, "refunds", operation.idempotency_key)
    assert body == {
        "charge": "ch_42",
        "amount": 2500,
        "currency": "eur",
        "reason": "requested_by_customer",
    }
    counts = served.store.counts()
    assert (counts.submissions, counts.effects) == (2, 1)
    target.close()


def test_email_is_sent_with_its_message_id_and_settled_by_lookup_after_the_index_lags(
    ledger: Ledger,
    context: Context,
    served: RunningReceiver,
    email: ModuleType,
    clock: ManualClock,
    store_url: str,
) -> None:
    """The email example carries the key as message_id (no resend: no deduplication promise);
    a lost reply stays Unknown while the lookup index lags and is SUCCEEDED once it answers, with
    one message sent and the recipient kept out of the evidence."""
    target = email.email_destination(
        served.url, api_key=env_secret("RECEIVER_TOKEN", "Bearer {secret}"), deadline_s=2.0
    )
    operation = ledger.admit(
        context, operation_id="op-1", revision="rev-1",
        command=email.email_command("customer@example.com", "Refund", "Your refund is on its way."),
        destination=DestinationRef(account_id=target.account_id, endpoint=target.endpoint),
        admission_reference="approval/op-1",
    )  # fmt: skip
    served.faults.drop_after_commit = 1
    served.faults.lookup_lag_s = 3600.0
    assert Executor(ledger, target).execute(context, "op-1").state is (
        OperationState.OUTCOME_UNKNOWN
    )
    body = stored_body(served, "messages", operation.idempotency_key)
    assert body["message_id"] == operation.idempotency_key
    clock.advance(ledger.settings.recover_after)
    RecoveryWorker(ledger, target).run_once()
    assert ledger.get(context, "op-1").state is OperationState.OUTCOME_UNKNOWN
    served.faults.lookup_lag_s = 0.0
    clock.advance(ledger.settings.recover_after)
    RecoveryWorker(ledger, target).run_once()
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
    assert last_evidence(ledger, context).document()["body"]["state"] == "performed"
    counts = served.store.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    for row in raw_sql(store_url, "SELECT content FROM evidence_blobs"):
        assert b"customer@example.com" not in bytes(row[0])  # type: ignore[arg-type]
        assert TOKEN.encode() not in bytes(row[0])  # type: ignore[arg-type]
    assert count_rows(store_url, "evidence_blobs") >= 3
    target.close()
