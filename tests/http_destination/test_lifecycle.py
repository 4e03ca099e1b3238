"""End to end over real sockets: the ledger, the HTTP destination and the reference receiver.

Every test checks the durable facts: the operation's state and events in the ledger (both
backends) and the receiver's own count of effects in its own database.
"""

from __future__ import annotations

import threading
import time

import pytest

from effectledger import Context, ManualClock, OperationState
from effectledger.destinations.http import HttpAction, HttpContract, HttpDestination, HttpLookup
from effectledger.ledger import Ledger
from effectledger.model.operations import Outcome
from effectledger.receiver.contract import reference_destination
from effectledger.receiver.server import RunningReceiver
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import count_rows, raw_sql, reply_command
from tests.http_destination.conftest import TOKEN
from tests.http_destination.hostile import closed_port
from tests.http_destination.support import admit_http, destination, last_evidence


def recover(ledger: Ledger, clock: ManualClock, target: object) -> OperationState:
    """Move past the recovery delay, run one recovery pass, return the operation's state."""
    clock.advance(ledger.settings.recover_after)
    RecoveryWorker(ledger, target).run_once()  # type: ignore[arg-type]
    return ledger.get(Context(tenant_id="acme", actor_id="alice"), "op-1").state


def test_accepted_submission_succeeds_with_its_response_as_evidence(
    ledger: Ledger, context: Context, served: RunningReceiver, store_url: str
) -> None:
    """A 201 makes the operation SUCCEEDED with the receiver's reference, one effect, and the
    redacted response stored as the event's evidence blob."""
    target = destination(served)
    admit_http(ledger, context, target)
    result = Executor(ledger, target).execute(context, "op-1")
    assert result.state is OperationState.SUCCEEDED
    key = ledger.get(context, "op-1").idempotency_key
    assert result.provider_reference == served.store.reference("effects", key)
    assert served.store.counts().effects == 1
    document = last_evidence(ledger, context).document()
    assert document["status"] == 201
    assert document["body"]["id"] == result.provider_reference
    assert count_rows(store_url, "evidence_blobs") == 1
    target.close()


def test_lost_reply_is_unknown_until_recovery_finds_the_one_effect(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """The receiver commits and drops the connection: OUTCOME_UNKNOWN, then a lookup by key
    reconciles to SUCCEEDED, and the receiver performed exactly one effect."""
    target = destination(served)
    admit_http(ledger, context, target)
    served.faults.drop_after_commit = 1
    result = Executor(ledger, target).execute(context, "op-1")
    assert result.state is OperationState.OUTCOME_UNKNOWN
    assert served.store.counts().effects == 1
    assert last_evidence(ledger, context).document()["reason"] == "RemoteProtocolError"
    assert recover(ledger, clock, target) is OperationState.SUCCEEDED
    events = [event.event_type for event in ledger.events(context, "op-1")]
    assert events[-1] == "ProviderAcceptanceReconciled"
    assert last_evidence(ledger, context).document()["source"] == "lookup"
    counts = served.store.counts()
    assert (counts.effects, counts.submissions, counts.lookups) == (1, 1, 1)
    target.close()


def test_reply_slower_than_the_deadline_is_unknown_then_reconciled(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """A reply later than the submit deadline leaves OUTCOME_UNKNOWN (not a failure); recovery
    settles it to SUCCEEDED with one effect."""
    target = destination(served, deadline_s=1.0)
    admit_http(ledger, context, target)
    served.faults.slow_reply_s = 3.0
    result = Executor(ledger, target).execute(context, "op-1")
    assert result.state is OperationState.OUTCOME_UNKNOWN
    assert last_evidence(ledger, context).document()["reason"] == "deadline_passed"
    served.faults.slow_reply_s = 0.0
    assert recover(ledger, clock, target) is OperationState.SUCCEEDED
    assert served.store.counts().effects == 1
    target.close()


def test_error_after_commit_is_unknown_not_a_rejection(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """A 503 that the contract does not promise means nothing was done is Unknown; the lookup
    finds the effect the receiver committed before answering."""
    target = destination(served)
    admit_http(ledger, context, target)
    served.faults.error_after_commit = 1
    assert Executor(ledger, target).execute(context, "op-1").state is (
        OperationState.OUTCOME_UNKNOWN
    )
    assert last_evidence(ledger, context).document()["status"] == 503
    assert recover(ledger, clock, target) is OperationState.SUCCEEDED
    assert served.store.counts().effects == 1
    target.close()


def test_conflicting_reuse_of_a_key_is_rejected_with_evidence(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """A key the receiver already used for another body is refused (422 key_reused): REJECTED,
    the refusal stored as evidence, and no second effect."""
    target = destination(served)
    admit_http(ledger, context, target)
    key = ledger.get(context, "op-1").idempotency_key
    other = target.submit(reply_command("another body"), key)
    assert other.provider_reference is not None
    result = Executor(ledger, target).execute(context, "op-1")
    assert result.state is OperationState.REJECTED
    document = last_evidence(ledger, context).document()
    assert (document["status"], document["body"]["error"]) == (422, "key_reused")
    counts = served.store.counts()
    assert (counts.effects, counts.conflicts) == (1, 1)
    target.close()


def test_conflict_answered_with_409_is_rejected_only_by_the_contract_rule(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """With the receiver answering 409 key_reused, the reference contract's rule makes it
    REJECTED; the same 409 under the default table would have been Unknown."""
    served.faults.conflict_status = 409
    target = destination(served)
    admit_http(ledger, context, target)
    key = ledger.get(context, "op-1").idempotency_key
    target.submit(reply_command("other"), key)
    assert Executor(ledger, target).execute(context, "op-1").state is OperationState.REJECTED
    assert last_evidence(ledger, context).document()["reason"] == "rule:409:key_reused"
    assert HttpContract().classify(409, {"error": "key_reused"})[0] is Outcome.UNKNOWN
    target.close()


def test_lookup_lag_keeps_the_operation_unknown_until_the_receiver_answers(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """While the receiver's lookup lags behind its effects a 404 is not proof of absence: the
    operation stays OUTCOME_UNKNOWN, and once the lookup answers it is SUCCEEDED."""
    target = destination(served)
    admit_http(ledger, context, target)
    served.faults.drop_after_commit = 1
    served.faults.lookup_lag_s = 3600.0
    assert Executor(ledger, target).execute(context, "op-1").state is (
        OperationState.OUTCOME_UNKNOWN
    )
    assert recover(ledger, clock, target) is OperationState.OUTCOME_UNKNOWN
    assert last_evidence(ledger, context).document()["reason"] == "lookup:404:not_proof"
    served.faults.lookup_lag_s = 0.0
    assert recover(ledger, clock, target) is OperationState.SUCCEEDED
    counts = served.store.counts()
    assert (counts.effects, counts.lookups) == (1, 2)
    target.close()


def test_lookup_slower_than_its_deadline_is_inconclusive(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """A lookup answer later than the lookup deadline is Unknown: the operation stays
    OUTCOME_UNKNOWN with the timeout as evidence, and a timely lookup later settles it."""
    target = destination(served, deadline_s=1.0)
    admit_http(ledger, context, target)
    served.faults.drop_after_commit = 1
    Executor(ledger, target).execute(context, "op-1")
    served.faults.slow_lookup_s = 3.0
    assert recover(ledger, clock, target) is OperationState.OUTCOME_UNKNOWN
    document = last_evidence(ledger, context).document()
    assert (document["source"], document["reason"]) == ("lookup", "deadline_passed")
    served.faults.slow_lookup_s = 0.0
    assert recover(ledger, clock, target) is OperationState.SUCCEEDED
    assert served.store.counts().effects == 1
    target.close()


def test_throttled_submission_is_retryable_and_performs_nothing(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """A 429 proves nothing was done: RETRY_PENDING, no effect, Retry-After kept as evidence."""
    target = destination(served)
    admit_http(ledger, context, target)
    served.faults.throttle = 1
    served.faults.retry_after_s = 7
    result = Executor(ledger, target).execute(context, "op-1")
    assert result.state is OperationState.RETRY_PENDING
    assert last_evidence(ledger, context).document()["headers"]["retry-after"] == "7"
    assert served.store.counts().effects == 0
    target.close()


@pytest.mark.slow
def test_key_still_in_flight_is_unknown(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """A 409 key_in_flight (the first request with this key is still processing) is Unknown."""
    target = destination(served)
    admit_http(ledger, context, target)
    key = ledger.get(context, "op-1").idempotency_key
    served.faults.hold_s = 3.0
    command = ledger.get(context, "op-1").command
    first = threading.Thread(target=target.submit, args=(command, key))
    first.start()
    try:
        for _ in range(100):
            if served.store.counts().effects:
                break
            time.sleep(0.01)
        result = Executor(ledger, target).execute(context, "op-1")
    finally:
        first.join(timeout=5)
    assert result.state is OperationState.OUTCOME_UNKNOWN
    assert last_evidence(ledger, context).document()["body"]["error"] == "key_in_flight"
    assert served.store.counts().effects == 1
    target.close()


def test_refused_connection_is_a_retryable_rejection_not_unknown(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """No byte sent (nothing listens on the port) is RETRY_PENDING, never OUTCOME_UNKNOWN."""
    with closed_port() as refusing:
        target = reference_destination(f"http://127.0.0.1:{refusing}")
        admit_http(ledger, context, target)
        executed = Executor(ledger, target).execute(context, "op-1")
    assert executed.state is OperationState.RETRY_PENDING
    document = last_evidence(ledger, context).document()
    assert (document["sent"], document["reason"]) == (False, "ConnectError")
    target.close()


def test_missing_secret_is_not_sent_and_credentials_never_reach_the_ledger(
    ledger: Ledger,
    context: Context,
    served: RunningReceiver,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without its secret the request is not sent (RETRY_PENDING, no submission at the receiver);
    with it, the token is sent but appears in no ledger table."""
    target = destination(served)
    admit_http(ledger, context, target, operation_id="op-0")
    monkeypatch.delenv("RECEIVER_TOKEN")
    assert Executor(ledger, target).execute(context, "op-0").state is (OperationState.RETRY_PENDING)
    assert served.store.counts().submissions == 0
    monkeypatch.setenv("RECEIVER_TOKEN", TOKEN)
    admit_http(ledger, context, target)
    assert Executor(ledger, target).execute(context, "op-1").state is OperationState.SUCCEEDED
    tables = ["operations", "attempts", "audit_events", "evidence_blobs"]
    for table in tables:
        for row in raw_sql(store_url, f"SELECT * FROM {table}"):
            assert TOKEN not in repr(row), table
    target.close()


def test_body_that_cannot_be_built_is_not_sent_and_not_unknown(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """A body builder that fails on the command stops the request before sending: the operation
    is RETRY_PENDING with the reason as evidence, and the receiver saw nothing."""
    target = HttpDestination(
        account_id="acct-reference",
        endpoint=served.url,
        actions={
            "send_support_reply": HttpAction(
                path="/v1/effects", body=lambda command, key: {"to": command.arguments["missing"]}
            )
        },
        lookup=HttpLookup(path="/v1/effects/{key}"),
    )
    admit_http(ledger, context, target)
    assert Executor(ledger, target).execute(context, "op-1").state is (OperationState.RETRY_PENDING)
    document = last_evidence(ledger, context).document()
    assert (document["sent"], document["reason"]) == (False, "body_builder_failed")
    assert served.store.counts().submissions == 0
    target.close()
