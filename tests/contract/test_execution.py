"""Claims, the executor and the outcomes it records, checked against rows and receiver counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from effectledger import (
    ConstraintViolation,
    Context,
    DestinationMismatch,
    EffectLedger,
    InvalidTransition,
    NotFound,
    Observation,
    OperationState,
    Outcome,
    SimulatedReceiver,
    SubmitMode,
    TamperedCommand,
)
from effectledger.audit import verify_chain
from effectledger.callers.tools.dispatch import DispatchTool
from effectledger.errors import ToolArgumentsRejected
from effectledger.ledger import Ledger
from effectledger.model.operations import Row
from effectledger.store import Store
from effectledger.workers import Executor
from tests.conftest import RAW_REFUSED, admit, count_rows, raw_sql, refuse_event


def event_types(ledger: Ledger, context: Context, operation_id: str = "op-1") -> list[str]:
    return [event.event_type for event in ledger.events(context, operation_id)]


def test_accepted_dispatch_succeeds_once(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """An accepted submission makes the operation SUCCEEDED with one effect and three events."""
    admit(ledger, context, receiver)
    result = Executor(ledger, receiver).execute(context, "op-1")
    assert result.state is OperationState.SUCCEEDED
    assert result.provider_reference == SimulatedReceiver.receipt(
        ledger.get(context, "op-1").idempotency_key
    )
    assert event_types(ledger, context) == [
        "OperationAdmitted",
        "AttemptPrepared",
        "ProviderAcceptanceConfirmed",
    ]
    assert receiver.counts().effects == 1
    assert count_rows(store_url, "attempts", "observation = 'Accepted'") == 1
    operation = ledger.get(context, "op-1")
    verify_chain(ledger.events(context, "op-1"), head=operation.last_event_hash)


def test_repeated_calls_never_make_a_second_attempt(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Calling the executor again returns the recorded state: no attempt, no submission."""
    admit(ledger, context, receiver)
    executor = Executor(ledger, receiver)
    first = executor.execute(context, "op-1")
    for _ in range(5):
        assert executor.execute(context, "op-1") == first
    assert count_rows(store_url, "attempts") == 1
    assert receiver.counts().submissions == 1
    assert len(event_types(ledger, context)) == 3


def test_only_a_ready_operation_can_be_claimed(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A second claim of the same operation returns None and writes nothing."""
    admit(ledger, context, receiver)
    assert ledger.claim(context, "op-1", attempt_id="a1") is not None
    assert ledger.claim(context, "op-1", attempt_id="a2") is None
    assert count_rows(store_url, "attempts") == 1
    assert ledger.get(context, "op-1").active_attempt_id == "a1"


class _Overtaken:
    """A store on which another executor claims ``op-1`` right after this one has read it."""

    def __init__(self, store: Store, rival: Ledger, context: Context) -> None:
        self._store = store
        self._rival = rival
        self._context = context
        self.overtaken = False

    def one(self, name: str, params: Mapping[str, Any]) -> Row | None:
        row = self._store.one(name, params)
        if name == "operation_dispatch" and not self.overtaken:
            self.overtaken = True
            assert self._rival.claim(self._context, "op-1", attempt_id="rival") is not None
        return row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_an_executor_overtaken_after_its_read_makes_no_attempt(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store: Store, store_url: str
) -> None:
    """A claim made on a row another executor claimed meanwhile rolls back and sends nothing."""
    admit(ledger, context, receiver)
    overtaken = _Overtaken(store, ledger, context)
    late = Ledger(cast(Store, overtaken), clock=ledger.clock, settings=ledger.settings)
    result = Executor(late, receiver).execute(context, "op-1")
    assert overtaken.overtaken
    assert result.state is OperationState.IN_PROGRESS
    assert result.attempt_id == "rival"
    assert raw_sql(store_url, "SELECT attempt_id FROM attempts") == [("rival",)]
    assert event_types(ledger, context) == ["OperationAdmitted", "AttemptPrepared"]
    assert receiver.counts().submissions == 0


@pytest.mark.parametrize(
    ("mode", "state", "event"),
    [
        (SubmitMode.PERMANENT_REJECT, OperationState.REJECTED, "PermanentRejection"),
        (SubmitMode.RETRYABLE_REJECT, OperationState.RETRY_PENDING, "RetryableRejection"),
        (SubmitMode.LOSE_REQUEST, OperationState.OUTCOME_UNKNOWN, "SubmissionOutcomeUnknown"),
        (
            SubmitMode.ACCEPT_THEN_LOSE_REPLY,
            OperationState.OUTCOME_UNKNOWN,
            "SubmissionOutcomeUnknown",
        ),
    ],
)
def test_each_observation_maps_to_its_state(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    mode: SubmitMode,
    state: OperationState,
    event: str,
) -> None:
    """Rejections and unknown outcomes are recorded as docs/states.md's table says."""
    receiver.submit_mode = mode
    admit(ledger, context, receiver)
    result = Executor(ledger, receiver).execute(context, "op-1")
    assert result.state is state
    assert event_types(ledger, context)[-1] == event
    expected_effects = 1 if mode is SubmitMode.ACCEPT_THEN_LOSE_REPLY else 0
    assert receiver.counts().effects == expected_effects
    assert result.uncertain is (state is OperationState.OUTCOME_UNKNOWN)


def test_retry_policy_reopens_retry_pending_within_its_budget(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """An explicit retry moves RETRY_PENDING to READY; the next attempt reuses the same key."""
    receiver.submit_mode = SubmitMode.RETRYABLE_REJECT
    admit(ledger, context, receiver)
    executor = Executor(ledger, receiver)
    executor.execute(context, "op-1")
    assert executor.execute(context, "op-1").state is OperationState.RETRY_PENDING  # tool: no retry
    assert ledger.authorize_retry(context, "op-1", max_retries=1).state is OperationState.READY
    receiver.submit_mode = SubmitMode.ACCEPT
    assert executor.execute(context, "op-1").state is OperationState.SUCCEEDED
    assert count_rows(store_url, "attempts") == 2
    keys = raw_sql(store_url, "SELECT DISTINCT idempotency_key FROM attempts")
    assert len(keys) == 1
    assert receiver.counts().effects == 1
    assert "RetryAuthorized" in event_types(ledger, context)


def test_retry_budget_and_state_are_enforced(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """A retry beyond the budget, or of an operation that is not RETRY_PENDING, is refused."""
    receiver.submit_mode = SubmitMode.RETRYABLE_REJECT
    admit(ledger, context, receiver)
    executor = Executor(ledger, receiver)
    executor.execute(context, "op-1")
    ledger.authorize_retry(context, "op-1", max_retries=1)
    executor.execute(context, "op-1")
    with pytest.raises(InvalidTransition, match="used its 1 retries") as caught:
        ledger.authorize_retry(context, "op-1", max_retries=1)
    assert caught.value.details == {"operation_id": "op-1", "reason": "retry_budget_exhausted"}
    receiver.submit_mode = SubmitMode.PERMANENT_REJECT
    admit(ledger, context, receiver, "op-2")
    executor.execute(context, "op-2")
    with pytest.raises(InvalidTransition):
        ledger.authorize_retry(context, "op-2", max_retries=5)
    assert receiver.counts().submissions == 3


def test_foreign_tenant_and_requester_see_nothing_and_send_nothing(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Another tenant's or another requester's context gets not_found and no effect happens."""
    admit(ledger, context, receiver)
    executor = Executor(ledger, receiver)
    for intruder in (
        Context(tenant_id="globex", actor_id="alice"),
        Context(tenant_id="acme", actor_id="mallory"),
    ):
        with pytest.raises(NotFound):
            executor.execute(intruder, "op-1")
        with pytest.raises(NotFound):
            ledger.claim(intruder, "op-1", attempt_id="a-evil")
    with pytest.raises(NotFound):
        ledger.get(Context(tenant_id="globex", actor_id="alice"), "op-1")
    assert receiver.counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0
    assert ledger.get(context, "op-1").state is OperationState.READY


@pytest.mark.parametrize(
    ("account", "endpoint"),
    [
        ("acct-demo", "https://receiver.invalid/v1/EFFECTS"),
        ("ACCT-DEMO", "https://receiver.invalid/v1/effects"),
        ("acct-other", "https://receiver.invalid/v1/effects"),
    ],
)
def test_destination_mismatch_blocks_before_any_write_or_contact(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store_url: str,
    tmp_path: object,
    account: str,
    endpoint: str,
) -> None:
    """An adapter bound to another account or endpoint (even by case) claims and sends nothing."""
    admit(ledger, context, receiver)
    other = SimulatedReceiver(receiver.path, account_id=account, endpoint=endpoint)
    with pytest.raises(DestinationMismatch):
        Executor(ledger, other).execute(context, "op-1")
    assert receiver.counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0
    assert ledger.get(context, "op-1").state is OperationState.READY


def test_tampered_stored_command_is_never_sent(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A command edited in the database after admission fails its fingerprint and sends nothing."""
    admit(ledger, context, receiver)
    raw_sql(
        store_url,
        "UPDATE operations SET command_json = replace(command_json, "
        "'customer@example.com', 'attacker@example.net')",
    )
    with pytest.raises(TamperedCommand) as caught:
        Executor(ledger, receiver).execute(context, "op-1")
    assert caught.value.code == "tampered_command"
    assert receiver.counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0
    assert count_rows(store_url, "audit_events") == 1


def test_an_event_that_cannot_be_written_rolls_back_the_claim(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """If AttemptPrepared cannot be stored, the claim and attempt roll back and nothing is sent."""
    admit(ledger, context, receiver)
    refuse_event(store_url, "AttemptPrepared")
    with pytest.raises(ConstraintViolation):
        Executor(ledger, receiver).execute(context, "op-1")
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.READY
    assert operation.version == 1
    assert count_rows(store_url, "attempts") == 0
    assert receiver.counts().submissions == 0


def test_the_database_rejects_an_event_naming_another_operations_attempt(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """The composite foreign key refuses an event that pairs op-2 with op-1's attempt."""
    admit(ledger, context, receiver)
    admit(ledger, context, receiver, "op-2")
    ledger.claim(context, "op-1", attempt_id="attempt-of-op-1")
    with pytest.raises(RAW_REFUSED, match=r"(?i)foreign key"):
        raw_sql(
            store_url,
            "INSERT INTO audit_events VALUES ('e-x', 'acme', 'op-2', 'attempt-of-op-1', 9, "
            "'x', 'Forged', 0, NULL, '{}', NULL, 'h', 'h', NULL)",
        )
    assert count_rows(store_url, "audit_events", "event_type = 'Forged'") == 0


def test_audit_rows_are_append_only(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """The database refuses to update or delete an audit event."""
    admit(ledger, context, receiver)
    for statement in (
        "UPDATE audit_events SET actor = 'someone-else'",
        "DELETE FROM audit_events",
    ):
        with pytest.raises(RAW_REFUSED, match="append-only"):
            raw_sql(store_url, statement)
    assert ledger.events(context, "op-1")[0].actor == "alice"


def test_accepted_without_evidence_is_recorded_as_unknown(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """An Accepted observation lacking a provider or evidence reference is recorded as Unknown."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    result = ledger.record(
        prepared, Observation(outcome=Outcome.ACCEPTED, evidence_reference="model-said-so")
    )
    assert (result.state, result.uncertain) == (OperationState.OUTCOME_UNKNOWN, True)
    operation = ledger.get(context, "op-1")
    assert (operation.state, operation.provider_reference) == (OperationState.OUTCOME_UNKNOWN, None)
    last = ledger.events(context, "op-1")[-1]
    assert (last.event_type, last.evidence_reference) == ("SubmissionOutcomeUnknown", None)
    assert last.details["unrecordable"] == "provider_reference:missing"
    assert last.details["reported_outcome"] == "Accepted"


def test_late_observation_never_overwrites_a_resolved_state(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver
) -> None:
    """An Unknown arriving after success is kept as LateUnknownObservation; the state stays."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    accepted = Observation(
        outcome=Outcome.ACCEPTED, provider_reference="r1", evidence_reference="reply/r1"
    )
    ledger.record(prepared, accepted)
    result = ledger.record(prepared, Observation.unknown())
    assert result.state is OperationState.SUCCEEDED
    rejection = Observation(outcome=Outcome.PERMANENT_REJECTION, evidence_reference="x")
    assert ledger.record(prepared, rejection).state is OperationState.SUCCEEDED
    assert event_types(ledger, context)[-2:] == [
        "LateUnknownObservation",
        "LatePermanentRejectionObservation",
    ]
    assert ledger.get(context, "op-1").provider_reference == "r1"


def test_a_replayed_observation_with_a_stable_id_is_recorded_once(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Recording the same observation id twice appends one event, not two."""
    admit(ledger, context, receiver)
    prepared = ledger.claim(context, "op-1", attempt_id="a1")
    assert prepared is not None
    observation = Observation(
        outcome=Outcome.ACCEPTED,
        provider_reference="r1",
        evidence_reference="reply/r1",
        observation_id="obs-1",
    )
    ledger.record(prepared, observation)
    ledger.record(prepared, observation)
    assert count_rows(store_url, "audit_events", "observation_id = 'obs-1'") == 1


def test_tool_rejects_smuggled_arguments_without_effect(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """Identity or business fields passed to the tool are refused and nothing is claimed."""
    admit(ledger, context, receiver)
    tool = DispatchTool(EffectLedger(ledger, destinations=[receiver]), context, "op-1")
    assert tool.json_schema() == {"type": "object", "properties": {}, "additionalProperties": False}
    for smuggled in (
        {"tenant_id": "globex"},
        {"actor_id": "admin"},
        {"recipient": "attacker@example.net"},
        {"operation_id": "op-2"},
    ):
        with pytest.raises(ToolArgumentsRejected):
            tool(**smuggled)
    assert receiver.counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0
    assert tool()["state"] == "SUCCEEDED"
    assert receiver.counts().effects == 1
