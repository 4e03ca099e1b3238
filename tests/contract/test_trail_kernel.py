"""The trail kernel's guarded step, tested directly as plain functions over a transaction."""

from __future__ import annotations

import pytest

from effectledger import Context, SimulatedReceiver
from effectledger.errors import ConcurrentModification
from effectledger.events.chain import verify_chain
from effectledger.ledger import AUDITOR_ROLE, Ledger
from effectledger.ledger.claims import claim_row
from effectledger.ledger.trail import key, write_transition
from effectledger.model.operations import OperationState, PreparedAttempt
from effectledger.store import Transaction
from tests.conftest import admit, count_rows

AUDITOR = Context(tenant_id="acme", actor_id="carol", roles=frozenset({AUDITOR_ROLE}))


def test_a_claim_on_a_row_whose_trail_grew_chains_after_the_new_head_in_one_run(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """An audit-only event between the read and the claim: the claim chains after it, once."""
    admit(ledger, context, receiver, "op-1")
    stale = ledger.store.one("operation_dispatch", key("acme", "op-1"))
    assert stale is not None
    admitted = ledger.events(context, "op-1")[0]
    ledger.correct_event(AUDITOR, "op-1", event_id=admitted.event_id, reason="typo")
    runs: list[int] = []

    def claim(tx: Transaction) -> PreparedAttempt | None:
        runs.append(1)
        return claim_row(tx, ledger, stale, attempt_id="att-1", executor_id="worker")

    prepared = ledger.store.write(claim, label="claim")
    assert prepared is not None
    assert prepared.attempt_id == "att-1"
    assert len(runs) == 1  # no retry: the head was read again, locked, in the same transaction
    events = ledger.events(context, "op-1")
    assert [event.event_type for event in events] == [
        "OperationAdmitted",
        "AuditCorrection",
        "AttemptPrepared",
    ]
    verify_chain(events, head=events[-1].event_hash)
    operation = ledger.get(context, "op-1")
    assert operation.state is OperationState.IN_PROGRESS
    assert count_rows(store_url, "attempts") == 1


def test_a_step_on_a_row_whose_state_moved_on_is_refused_and_writes_nothing(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, store_url: str
) -> None:
    """A row read before another writer changed its state is never written over."""
    admit(ledger, context, receiver, "op-1")
    stale = ledger.store.one("operation_get", key("acme", "op-1"))
    assert stale is not None
    assert ledger.claim(context, "op-1", attempt_id="att-1") is not None

    def release(tx: Transaction) -> object:
        return write_transition(
            tx,
            stale,
            actor="alice",
            event_type="OperationReleased",
            now_us=1,
            keys=None,
            state=OperationState.RELEASED.value,
        )

    with pytest.raises(ConcurrentModification):
        ledger.store.write(release)
    assert count_rows(store_url, "audit_events") == 2
    assert ledger.get(context, "op-1").state is OperationState.IN_PROGRESS
