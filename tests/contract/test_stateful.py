"""Random interleavings of the ledger's steps, the design's invariants checked after every step.

A hypothesis rule-based state machine admits operations, dispatches them against a simulated
receiver in every answer mode (accepted, reply lost, request lost, rejections), crashes a
worker after its claim or after the destination committed, records late (truthful)
observations, moves the clock, runs recovery in every lookup mode and escalates, on both
backends. After each step it checks: at most one attempt per operation; the receiver's
submissions are exactly the ones the machine sent (recovery never resubmits); SUCCEEDED only
with the receiver's effect and REJECTED only without it; a resolved state never changes; a
MANUAL_REVIEW only after an escalation; every trail's hash chain verifies; and an uncertain
operation reads as uncertain.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from effectledger import (
    Context,
    DestinationRef,
    LedgerSettings,
    LookupMode,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.events.chain import verify_chain
from effectledger.ledger import Ledger, new_id
from effectledger.store import Store, open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import admit

CONTEXT = Context(tenant_id="acme", actor_id="alice")
RESOLVED = frozenset({OperationState.SUCCEEDED, OperationState.REJECTED})
UNCERTAIN = frozenset(
    {OperationState.IN_PROGRESS, OperationState.OUTCOME_UNKNOWN, OperationState.MANUAL_REVIEW}
)
_examples = itertools.count()


class LedgerMachine(RuleBasedStateMachine):
    """One example: its own operations over the test's store, receiver and clock."""

    store: Store
    receiver: SimulatedReceiver
    clock: ManualClock

    def __init__(self) -> None:
        super().__init__()
        self.ledger = Ledger(
            self.store, clock=self.clock, settings=LedgerSettings(max_inconclusive_lookups=2)
        )
        self.executor = Executor(self.ledger, self.receiver)
        self.recovery = RecoveryWorker(self.ledger, self.receiver)
        self.prefix = f"ex{next(_examples)}"
        self.operations: list[str] = []
        self.keys: dict[str, str] = {}
        self.resolved: dict[str, OperationState] = {}
        self.escalated: set[str] = set()
        self.submitted = self.receiver.counts().submissions

    def _ready(self) -> list[str]:
        return [op for op in self.operations if self._state(op) is OperationState.READY]

    def _state(self, operation_id: str) -> OperationState:
        return self.ledger.get(CONTEXT, operation_id).state

    @rule()
    def admit(self) -> None:
        """Admit a new operation: READY."""
        operation_id = f"{self.prefix}-{len(self.operations)}"
        operation = admit(self.ledger, CONTEXT, self.receiver, operation_id)
        self.operations.append(operation_id)
        self.keys[operation_id] = operation.idempotency_key

    @precondition(lambda self: bool(self.operations))
    @rule(index=st.integers(min_value=0), mode=st.sampled_from(list(SubmitMode)))
    def execute(self, index: int, mode: SubmitMode) -> None:
        """Execute an operation (a repeat on one that is not READY must send nothing)."""
        operation_id = self.operations[index % len(self.operations)]
        was_ready = self._state(operation_id) is OperationState.READY
        self.receiver.submit_mode = mode
        try:
            self.executor.execute(CONTEXT, operation_id)
        finally:
            self.receiver.submit_mode = SubmitMode.ACCEPT
        if was_ready:
            self.submitted += 1

    @precondition(lambda self: bool(self._ready()))
    @rule(index=st.integers(min_value=0), committed=st.booleans())
    def crash_after_claim(self, index: int, committed: bool) -> None:
        """A worker claims and dies, before the submission or after the destination committed."""
        ready = self._ready()
        operation_id = ready[index % len(ready)]
        prepared = self.ledger.claim(
            CONTEXT,
            operation_id,
            attempt_id=new_id(),
            bound_to=DestinationRef(
                account_id=self.receiver.account_id, endpoint=self.receiver.endpoint
            ),
        )
        assert prepared is not None
        if committed:
            self.receiver.submit(prepared.command, prepared.idempotency_key)
            self.submitted += 1

    @precondition(lambda self: bool(self.operations))
    @rule(index=st.integers(min_value=0), repeat=st.booleans())
    def late_observation(self, index: int, repeat: bool) -> None:
        """A late answer arrives for an operation's attempt: what the receiver truly did (its
        receipt if it acted, else nothing known), once or twice."""
        operation_id = self.operations[index % len(self.operations)]
        attempts = self.ledger.attempts(CONTEXT, operation_id)
        if not attempts:
            return
        key = self.keys[operation_id]
        observation = (
            Observation.accepted(self.receiver.receipt(key), f"late/{operation_id}")
            if self.receiver.effects_for(key)
            else Observation.unknown()
        )
        for _ in range(2 if repeat else 1):
            self.ledger.record(attempts[-1], observation, actor="late-webhook")

    @rule(seconds=st.sampled_from([1, 31, 61]))
    def advance_clock(self, seconds: int) -> None:
        """Time passes."""
        self.clock.advance(seconds)

    @rule(mode=st.sampled_from(list(LookupMode)))
    def recover(self, mode: LookupMode) -> None:
        """A recovery pass, the receiver answering lookups in ``mode``."""
        self.receiver.lookup_mode = mode
        try:
            report = self.recovery.run_once()
        finally:
            self.receiver.lookup_mode = LookupMode.ANSWER
        self.escalated.update(op for _, op in report.escalated)

    @precondition(lambda self: bool(self.operations))
    @rule(index=st.integers(min_value=0))
    def escalate(self, index: int) -> None:
        """An operator escalates an unresolved operation to manual review."""
        operation_id = self.operations[index % len(self.operations)]
        if self._state(operation_id) in UNCERTAIN - {OperationState.MANUAL_REVIEW}:
            self.ledger.escalate("acme", operation_id, reason="operator", actor="ops")
            self.escalated.add(operation_id)

    @invariant()
    def invariants_hold(self) -> None:
        """The design's invariants, over every operation of this example."""
        assert self.receiver.counts().submissions == self.submitted, "recovery resubmitted"
        for operation_id in self.operations:
            operation = self.ledger.get(CONTEXT, operation_id)
            state = operation.state
            assert len(self.ledger.attempts(CONTEXT, operation_id)) <= 1
            effects = self.receiver.effects_for(self.keys[operation_id])
            if state is OperationState.SUCCEEDED:
                assert effects == 1, "SUCCEEDED without the receiver's effect"
            if state is OperationState.REJECTED:
                assert effects == 0, "REJECTED although the receiver acted"
            if operation_id in self.resolved:
                assert state is self.resolved[operation_id], "a resolved state changed"
            elif state in RESOLVED:
                self.resolved[operation_id] = state
            if state is OperationState.MANUAL_REVIEW:
                assert operation_id in self.escalated or operation.review_owner is not None
            assert state.uncertain == (state in UNCERTAIN)
            verify_chain(self.ledger.events(CONTEXT, operation_id))


@pytest.fixture
def machine_world(store_url: str, tmp_path: Path) -> Iterator[None]:
    """The store, receiver and clock every example of the machine shares."""
    LedgerMachine.store = open_store(store_url)
    LedgerMachine.receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="OFF")
    LedgerMachine.clock = ManualClock()
    yield
    LedgerMachine.store.close()
    LedgerMachine.receiver.close()


@pytest.mark.slow
@pytest.mark.usefixtures("machine_world")
def test_random_interleavings_keep_the_invariants() -> None:
    """Every random interleaving of the ledger's steps keeps the invariants after every step."""
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=30,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
