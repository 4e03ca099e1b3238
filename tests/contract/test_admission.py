"""Admission identity: an operation id is admitted once, for one command, on every backend."""

from __future__ import annotations

import threading

import pytest

from effectledger import (
    AdmissionConflict,
    Command,
    Context,
    DestinationRef,
    InvalidInput,
    OperationState,
    SimulatedReceiver,
)
from effectledger.ledger import Ledger
from tests.conftest import admit, count_rows, reply_command


def test_admission_creates_a_ready_operation_with_its_event(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A new operation is READY at version 1 with one OperationAdmitted event by the requester."""
    operation = admit(ledger, context, receiver)
    assert operation.state is OperationState.READY
    assert operation.version == 1
    assert operation.idempotency_key.startswith("el-")
    events = ledger.events(context, "op-1")
    assert [(e.sequence, e.event_type, e.actor) for e in events] == [
        (1, "OperationAdmitted", "alice")
    ]
    assert events[0].evidence_reference == "approval/op-1"
    assert count_rows(store_url, "operations") == 1


def test_matching_repeat_returns_the_stored_operation(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Admitting the same id with the same requester, revision and command changes nothing."""
    first = admit(ledger, context, receiver)
    again = admit(ledger, context, receiver)
    assert again == first
    assert count_rows(store_url, "audit_events") == 1


@pytest.mark.parametrize(
    ("change", "differs"),
    [
        ({"command": reply_command(body="A different body.")}, ["fingerprint"]),
        ({"revision": "rev-2"}, ["revision"]),
        ({"context": Context(tenant_id="acme", actor_id="mallory")}, ["requester_id"]),
    ],
)
def test_conflicting_repeat_is_refused_and_changes_nothing(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store_url: str,
    change: dict[str, object],
    differs: list[str],
) -> None:
    """Another command, revision or requester under an admitted id raises and writes nothing."""
    first = admit(ledger, context, receiver)
    change = dict(change)  # the parameter is shared by every backend's run
    caller = change.pop("context", context)
    assert isinstance(caller, Context)
    with pytest.raises(AdmissionConflict) as caught:
        admit(ledger, caller, receiver, **change)  # type: ignore[arg-type]
    assert caught.value.code == "admission_conflict"
    assert caught.value.details["differs"] == differs
    assert ledger.get(context, "op-1") == first
    assert count_rows(store_url, "audit_events") == 1


def test_another_destination_under_the_same_id_conflicts(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """The destination is fixed at admission: a repeat naming another endpoint is a conflict."""
    admit(ledger, context, receiver)
    with pytest.raises(AdmissionConflict):
        ledger.admit(
            context,
            operation_id="op-1",
            revision="rev-1",
            command=reply_command(),
            destination=DestinationRef(account_id=receiver.account_id, endpoint="https://other"),
            admission_reference="approval/op-1",
        )


def test_the_same_id_in_two_tenants_is_two_operations(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Operation ids are scoped by tenant: another tenant may use the same id independently."""
    admit(ledger, context, receiver)
    other = Context(tenant_id="globex", actor_id="alice")
    admit(ledger, other, receiver, command=reply_command(body="Other tenant."))
    assert count_rows(store_url, "operations") == 2
    assert ledger.get(other, "op-1").command.arguments["body"] == "Other tenant."


def test_concurrent_matching_admissions_resolve_to_one_row(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Eight threads admitting the same command at once all get the same single operation."""
    results: list[object] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(admit(ledger, context, receiver))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    assert len({getattr(r, "idempotency_key", None) for r in results}) == 1
    assert count_rows(store_url, "operations") == 1
    assert count_rows(store_url, "audit_events") == 1


def test_concurrent_conflicting_admissions_admit_exactly_one(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Of two racing admissions with different commands, one wins and the other conflicts."""
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def worker(body: str) -> None:
        barrier.wait()
        try:
            admit(ledger, context, receiver, command=reply_command(body=body))
            outcomes.append("admitted")
        except AdmissionConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=worker, args=(b,)) for b in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["admitted", "conflict"]
    assert count_rows(store_url, "operations") == 1
    assert count_rows(store_url, "audit_events") == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"operation_id": ""},
        {"operation_id": "x" * 200},
        {"operation_id": "op 1; DROP TABLE operations"},
        {"revision": ""},
        {"command": Command(action="send", contract_version="v1", arguments={"amount": 30.5})},
        {"command": Command(action="send", contract_version="v1", arguments={"b": "x" * 70_000})},
        {"command": Command(action="", contract_version="v1", arguments={})},
    ],
)
def test_malformed_input_is_refused_before_anything_is_written(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store_url: str,
    bad: dict[str, object],
) -> None:
    """Malformed ids, floats and oversized commands raise invalid_input and leave no row."""
    arguments: dict[str, object] = {
        "operation_id": "op-1",
        "revision": "rev-1",
        "command": reply_command(),
        "destination": DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        "admission_reference": "approval/op-1",
        **bad,
    }
    with pytest.raises(InvalidInput) as caught:
        ledger.admit(context, **arguments)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_input"
    assert count_rows(store_url, "operations") == 0
    assert count_rows(store_url, "audit_events") == 0


def test_admission_without_a_decision_reference_is_refused(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """An operation cannot be admitted without the reference of the decision that admits it.

    The caller left it out: an input error naming the field, not an integrity failure.
    """
    with pytest.raises(InvalidInput) as caught:
        ledger.admit(
            context,
            operation_id="op-1",
            revision="rev-1",
            command=reply_command(),
            destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
            admission_reference="  ",
        )
    assert caught.value.code == "invalid_input"
    assert caught.value.details["field"] == "admission_reference"
    assert count_rows(store_url, "operations") == 0
    assert count_rows(store_url, "audit_events") == 0


def test_forged_identity_in_context_fields_is_validated() -> None:
    """A context cannot be built from malformed identity strings."""
    with pytest.raises(InvalidInput):
        Context(tenant_id="acme' OR '1'='1", actor_id="alice")
