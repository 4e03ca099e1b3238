"""Every step of the state machine, taken and tried from the wrong states, on both backends.

The ledger reaches each state through its public steps, then tries every step the table does not
allow from there: nothing changes, neither the state nor the trail, and the receiver sees no
submission. The trail of every operation folds to the state its row holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from effectledger import (
    Context,
    InvalidTransition,
    ManualClock,
    Observation,
    OperationState,
    Outcome,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.ledger import Ledger
from effectledger.model.states import implied_state
from effectledger.workers import Executor
from tests.conftest import admit

S = OperationState
Step = Callable[[Ledger, Context, str], object]


def _claim(ledger: Ledger, context: Context, operation_id: str) -> object:
    return ledger.claim(context, operation_id, attempt_id="att-extra")


def _release(ledger: Ledger, context: Context, operation_id: str) -> object:
    version = ledger.get(context, operation_id).version
    return ledger.release(context, operation_id, reason="test", expected_version=version)


def _escalate(ledger: Ledger, context: Context, operation_id: str) -> object:
    return ledger.escalate(context.tenant_id, operation_id, reason="test")


def _retry(ledger: Ledger, context: Context, operation_id: str) -> object:
    return ledger.authorize_retry(context, operation_id, max_retries=3)


def _reserve(ledger: Ledger, context: Context, operation_id: str) -> object:
    attempt = ledger.get(context, operation_id).active_attempt_id
    if attempt is None:
        return None
    return ledger.reserve_lookup(context.tenant_id, operation_id, attempt)


STEPS: dict[str, tuple[Step, frozenset[OperationState]]] = {
    "claim": (_claim, frozenset({S.READY})),
    "release": (_release, frozenset({S.READY})),
    "escalate": (_escalate, frozenset({S.IN_PROGRESS, S.OUTCOME_UNKNOWN})),
    "authorize retry": (_retry, frozenset({S.RETRY_PENDING})),
    "reserve lookup": (_reserve, frozenset({S.IN_PROGRESS, S.OUTCOME_UNKNOWN})),
}


def reach(
    state: OperationState,
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    clock: ManualClock,
) -> str:
    """Drive a fresh operation to ``state`` through the ledger's public steps."""
    operation_id = f"op-{state.value.lower()}"
    admit(ledger, context, receiver, operation_id)
    if state is S.READY:
        return operation_id
    if state is S.RELEASED:
        _release(ledger, context, operation_id)
        return operation_id
    prepared = ledger.claim(context, operation_id, attempt_id=f"att-{operation_id}")
    assert prepared is not None
    outcomes = {
        S.SUCCEEDED: Observation(
            outcome=Outcome.ACCEPTED, provider_reference="rcpt-1", evidence_reference="reply/1"
        ),
        S.REJECTED: Observation(outcome=Outcome.PERMANENT_REJECTION, evidence_reference="r/1"),
        S.RETRY_PENDING: Observation(outcome=Outcome.RETRYABLE_REJECTION, evidence_reference="r/2"),
        S.OUTCOME_UNKNOWN: Observation.unknown(),
        S.MANUAL_REVIEW: Observation.unknown(),
    }
    if state in outcomes:
        ledger.record(prepared, outcomes[state])
    if state is S.MANUAL_REVIEW:
        ledger.escalate(context.tenant_id, operation_id, reason="test")
    return operation_id


@pytest.mark.parametrize("state", list(OperationState), ids=lambda state: state.value)
def test_every_step_from_a_wrong_state_changes_nothing(
    state: OperationState,
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    clock: ManualClock,
) -> None:
    """In each state, every step the table does not allow writes nothing and sends nothing."""
    operation_id = reach(state, ledger, context, receiver, clock)
    clock.advance(ledger.settings.recover_after)
    for name, (step, allowed) in STEPS.items():
        if state in allowed:
            continue
        before = ledger.get(context, operation_id)
        trail = len(ledger.events(context, operation_id))
        with contextlib.suppress(InvalidTransition):  # refused, or answered with the state
            step(ledger, context, operation_id)
        after = ledger.get(context, operation_id)
        assert (after.state, after.version) == (before.state, before.version), name
        assert len(ledger.events(context, operation_id)) == trail, name
    assert receiver.counts().submissions == 0


@pytest.mark.parametrize(
    ("state", "name", "expected"),
    [
        (S.READY, "claim", S.IN_PROGRESS),
        (S.READY, "release", S.RELEASED),
        (S.IN_PROGRESS, "escalate", S.MANUAL_REVIEW),
        (S.OUTCOME_UNKNOWN, "escalate", S.MANUAL_REVIEW),
        (S.RETRY_PENDING, "authorize retry", S.READY),
        (S.OUTCOME_UNKNOWN, "reserve lookup", S.OUTCOME_UNKNOWN),
    ],
    ids=lambda value: getattr(value, "value", value),
)
def test_every_allowed_step_is_taken_and_its_trail_folds_to_the_row(
    state: OperationState,
    name: str,
    expected: OperationState,
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    clock: ManualClock,
) -> None:
    """An allowed step moves the row where the table says, and the trail implies that state."""
    operation_id = reach(state, ledger, context, receiver, clock)
    clock.advance(ledger.settings.recover_after)
    STEPS[name][0](ledger, context, operation_id)
    operation = ledger.get(context, operation_id)
    assert operation.state is expected
    trail = ledger.events(context, operation_id)
    assert implied_state(event.event_type for event in trail) is expected
    assert (trail[-1].sequence, trail[-1].event_hash) == (
        operation.event_sequence,
        operation.last_event_hash,
    )


def test_observations_take_the_recording_steps(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Each outcome's recording step leaves the state the table names, and the fold agrees."""
    for state in (S.SUCCEEDED, S.REJECTED, S.RETRY_PENDING, S.OUTCOME_UNKNOWN, S.MANUAL_REVIEW):
        operation_id = reach(state, ledger, context, receiver, clock)
        trail = ledger.events(context, operation_id)
        assert ledger.get(context, operation_id).state is state
        assert implied_state(event.event_type for event in trail) is state


def test_an_executor_claims_only_from_ready(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """The executor submits a READY operation once and nothing from any other state."""
    receiver.submit_mode = SubmitMode.ACCEPT
    executor = Executor(ledger, receiver)
    for state in OperationState:
        operation_id = reach(state, ledger, context, receiver, clock)
        executor.execute(context, operation_id)
    assert receiver.counts().submissions == 1
