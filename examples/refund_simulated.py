"""A refund through effectledger, with the simulated receiver standing in for a payment API.

Run it from anywhere (it writes its two SQLite files in the current folder)::

    python examples/refund_simulated.py

The agent proposes a refund of 30; a reviewer approves the record she was shown; the ledger
performs it once while the receiver loses its reply; a repeated call sends nothing; a recovery
pass asks the receiver and settles the outcome; an unapproved proposal is denied with its reason.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from effectledger import Context, SimulatedReceiver, SubmitMode, connect
from effectledger.clock import ManualClock


class Refund(BaseModel):
    """What the model may propose: nothing about who, only what."""

    model_config = ConfigDict(extra="forbid", strict=True)

    order_id: str = Field(pattern=r"^ord-[0-9]{1,12}$")
    amount_minor: int = Field(gt=0, le=10_000_000)
    currency: str = Field(pattern=r"^[A-Z]{3}$")


def main() -> None:
    """Tell the story and print each step's outcome."""
    clock = ManualClock()  # lets recovery's wait pass at once; leave it out in an application
    receiver = SimulatedReceiver("receiver.db", submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY)
    with connect("sqlite:///ledger.db", clock=clock) as ledger:
        refund = ledger.action(
            name="refund_order",
            contract="refund-v1",
            arguments=Refund,
            destination=receiver,
            pool="refunds",
            units=lambda args: args.amount_minor,
            target=lambda args: args.order_id,
        )
        agent = Context(tenant_id="acme", actor_id="agent-7")
        rita = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))

        proposal = ledger.propose(
            agent, refund, order_id="ord-1001", amount_minor=30, currency="EUR"
        )
        ledger.approve(rita, proposal)
        first = ledger.perform(agent, proposal)
        print("perform:", first.outcome, first.state, "uncertain" if first.uncertain else "")
        again = ledger.perform(agent, proposal)
        print("perform again:", again.outcome, again.state)

        clock.advance(timedelta(seconds=31))
        report = ledger.recover()
        print("recovery resolved:", [state for _, _, state in report.resolved])
        print("status:", ledger.status(agent, proposal).state)
        print("receiver effects:", receiver.counts().effects)
        # The tenant's views (capacity, trails, explanations) are a reviewer's, not the agent's.
        print("capacity committed:", ledger.capacity(rita, "refunds").committed)

        unapproved = ledger.propose(
            agent, refund, order_id="ord-1002", amount_minor=5, currency="EUR"
        )
        denied = ledger.perform(agent, unapproved)
        print("unapproved:", denied.outcome, denied.reason)

        for sentence in ledger.explain(rita, proposal):
            print(" ", sentence.render())
    receiver.close()


if __name__ == "__main__":
    main()
