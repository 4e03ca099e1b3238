"""The refund desk the framework examples share: a ledger, a receiver and the refund action.

Not an example of its own: each ``framework_*.py`` beside it imports it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from effectledger import ActionHandle, Context, EffectLedger, SimulatedReceiver, connect

AGENT = Context(tenant_id="acme", actor_id="agent-7")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
REFUND = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR"}


class Refund(BaseModel):
    """What the model may propose: nothing about who, only what."""

    model_config = ConfigDict(extra="forbid", strict=True)

    order_id: str = Field(pattern=r"^ord-[0-9]{1,12}$")
    amount_minor: int = Field(gt=0, le=10_000_000)
    currency: str = Field(pattern=r"^[A-Z]{3}$")


def open_desk() -> tuple[EffectLedger, ActionHandle, SimulatedReceiver]:
    """The ledger and receiver files in the current folder, the refund action declared."""
    receiver = SimulatedReceiver("receiver.db")
    ledger = connect("sqlite:///ledger.db")
    refund = ledger.action(
        name="refund_order",
        contract="refund-v1",
        description="Refund an order, in minor units of its currency.",
        arguments=Refund,
        destination=receiver,
        pool="refunds",
        units=lambda args: args.amount_minor,
        target=lambda args: args.order_id,
    )
    return ledger, refund, receiver
