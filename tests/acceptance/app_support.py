"""A refund action declared through the one-object API, bound to a real simulated receiver.

Shared by the facade's acceptance tests and the worker processes that race them: the decorated
function hands the approved arguments to the receiver, whose own SQLite file counts effects.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from effectledger import (
    ActionHandle,
    Command,
    Context,
    EffectLedger,
    EffectLedgerError,
    Observation,
    SimulatedReceiver,
    connect,
)

AGENT = Context(tenant_id="acme", actor_id="agent-7")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
REFUND = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR"}


class Refund(BaseModel):
    """The refund's arguments (made strict by the decorator)."""

    order_id: str
    amount_minor: int
    currency: str


def declare_refund(app: EffectLedger, receiver: SimulatedReceiver) -> ActionHandle:
    """Declare ``refund_order`` on ``app``: submit and lookup go to ``receiver``."""

    @app.action(
        contract="refund-v1",
        account=receiver.account_id,
        endpoint=receiver.endpoint,
        pool="refunds",
        units=lambda arguments: arguments.amount_minor,
        target=lambda arguments: arguments.order_id,
    )
    def refund_order(args: Refund, key: str) -> Observation:
        command = Command(
            action="refund_order", contract_version="refund-v1", arguments=args.model_dump()
        )
        return receiver.submit(command, key)

    @refund_order.lookup
    def _(key: str) -> Observation:
        return receiver.lookup(key)

    return refund_order


def perform_in_process(url: str, receiver_path: str, proposal_id: str) -> str:
    """Connect, declare the action and perform ``proposal_id`` once; the outcome or error code."""
    receiver = SimulatedReceiver(receiver_path, synchronous="NORMAL")
    try:
        with connect(url, migrate=False) as app:
            declare_refund(app, receiver)
            return app.perform(AGENT, app.proposal(AGENT, proposal_id)).outcome.value
    except EffectLedgerError as exc:
        return exc.code
    finally:
        receiver.close()


if __name__ == "__main__":
    print(perform_in_process(sys.argv[1], sys.argv[2], sys.argv[3]))
