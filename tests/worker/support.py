"""A refund world for the worker tests: one application, its receiver, READY and uncertain work."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from effectledger import (
    Command,
    DestinationRef,
    EffectLedger,
    LedgerSettings,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.audit.keys.signers import Signer
from effectledger.clock import Clock
from effectledger.destinations import Destination
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.conftest import count_rows


@dataclass
class Refunds:
    """The refund application over one store and one simulated receiver."""

    app: EffectLedger
    receiver: SimulatedReceiver
    store_url: str

    def ready(self, count: int) -> list[str]:
        """``count`` approved refunds admitted and left READY for a worker."""
        operation_ids = []
        for _ in range(count):
            proposal = self.app.propose(AGENT, "refund_order", REFUND_30)
            approval = self.app.approve(REVIEWER, proposal)
            operation = self.app.authority.admit(
                AGENT, proposal.proposal_id, approval_id=approval.approval_id
            )
            assert operation.state is OperationState.READY
            operation_ids.append(operation.operation_id)
        return operation_ids

    def uncertain(self, count: int) -> list[str]:
        """``count`` refunds the receiver performed whose replies were lost."""
        self.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
        operation_ids = []
        try:
            for _ in range(count):
                proposal = self.app.propose(AGENT, "refund_order", REFUND_30)
                self.app.approve(REVIEWER, proposal)
                result = self.app.perform(AGENT, proposal)
                assert result.state is OperationState.OUTCOME_UNKNOWN
                assert result.operation_id is not None
                operation_ids.append(result.operation_id)
        finally:
            self.receiver.submit_mode = SubmitMode.ACCEPT
        return operation_ids

    def states(self, operation_ids: list[str]) -> list[OperationState]:
        """The recorded state of each operation."""
        return [self.app.operation(REVIEWER, op).state for op in operation_ids]

    def events(self, kind: str) -> int:
        """How many audit events of ``kind`` the store holds."""
        return count_rows(self.store_url, "audit_events", f"event_type = '{kind}'")

    def close(self) -> None:
        """Close the ledger and the receiver."""
        self.app.close()
        self.receiver.close()


def refunds(
    store_url: str,
    tmp_path: Path,
    *,
    clock: Clock | None = None,
    settings: LedgerSettings | None = None,
    destination: Callable[[SimulatedReceiver], Destination] | None = None,
    signer: Signer | None = None,
) -> Refunds:
    """A refund application over ``store_url``, its receiver at ``tmp_path/receiver.db``."""
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    ref = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    app = EffectLedger(
        open_store(store_url),
        clock=clock or ManualClock(),
        settings=settings or LedgerSettings(),
        signer=signer,
    )
    adapter = receiver if destination is None else destination(receiver)
    app.register(refund_action(orders=OrderBook(), destination=ref), adapter)
    return Refunds(app=app, receiver=receiver, store_url=store_url)


class HeldDestination:
    """The receiver, with every submission held until :attr:`release` is set."""

    def __init__(self, receiver: SimulatedReceiver) -> None:
        self.receiver = receiver
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint
        self.entered = threading.Event()
        self.release = threading.Event()

    def submit(self, command: Command, idempotency_key: str) -> Observation:
        """Tell the test a submission is in hand, wait for its release, then submit."""
        self.entered.set()
        assert self.release.wait(30), "the test never released the submission"
        return self.receiver.submit(command, idempotency_key)

    def lookup(self, idempotency_key: str) -> Observation:
        """The receiver's own lookup."""
        return self.receiver.lookup(idempotency_key)


def wait_until(condition: Callable[[], bool], *, timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


LOOKUP_WINDOW = timedelta(seconds=31)
"""Past the default ``recover_after``: what a test advances the clock by to make work due."""
