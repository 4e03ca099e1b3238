"""A refund through effectledger to a payment provider you write the two functions for.

Run it from anywhere (it writes its SQLite files in the current folder)::

    python examples/refund_custom_destination.py

``PaymentProvider`` stands for a real payment API: it keeps refunds by idempotency key in its
own file, as a provider does. The decorated function is the only code that sends a refund; the
lookup is what recovery asks when a reply was lost. The order's version is read from the
application, so a proposal made before the order changed is refused.
"""

from __future__ import annotations

import sqlite3

from pydantic import BaseModel, ConfigDict, Field

from effectledger import Context, Observation, connect
from effectledger.examples.refunds import OrderBook


class PaymentProvider:
    """A stand-in payment API: one refund per idempotency key, in its own SQLite file."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS refunds (key TEXT PRIMARY KEY, id TEXT)")

    def refund(self, order_id: str, amount_minor: int, idempotency_key: str) -> str:
        """POST /refunds with an Idempotency-Key header: the same key gives the same refund."""
        new_id = f"re_{order_id}_{amount_minor}"
        self.db.execute("INSERT OR IGNORE INTO refunds VALUES (?, ?)", (idempotency_key, new_id))
        return self.find(idempotency_key) or new_id

    def find(self, idempotency_key: str) -> str | None:
        """GET /refunds?idempotency_key=...: the refund made under the key, if any."""
        row = self.db.execute("SELECT id FROM refunds WHERE key = ?", (idempotency_key,)).fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        """Close the provider's file."""
        self.db.close()

    def count(self) -> int:
        """How many refunds the provider has made (its own record)."""
        return int(self.db.execute("SELECT count(*) FROM refunds").fetchone()[0])


class Refund(BaseModel):
    """What the model may propose."""

    model_config = ConfigDict(extra="forbid", strict=True)

    order_id: str = Field(pattern=r"^ord-[0-9]{1,12}$")
    amount_minor: int = Field(gt=0)
    currency: str = Field(pattern=r"^[A-Z]{3}$")


def main() -> None:
    """Declare the action, perform one refund, then show a stale proposal being released."""
    payments = PaymentProvider("payments.db")
    orders = OrderBook()  # your application's orders and their versions
    with connect("sqlite:///ledger.db") as ledger:

        @ledger.action(
            contract="refund-v1",
            account="acct_42",
            endpoint="https://pay.example/v1",
            pool="refunds",
            units=lambda args: args.amount_minor,
            target=lambda args: args.order_id,
            version=orders.version,
        )
        def refund_order(args: Refund, key: str) -> Observation:
            refund_id = payments.refund(args.order_id, args.amount_minor, idempotency_key=key)
            return Observation.accepted(refund_id, f"payments/refunds/{refund_id}")

        @refund_order.lookup
        def _(key: str) -> Observation:
            found = payments.find(key)
            if found is None:
                return Observation.unknown("payments/not-found")  # absence is never proof
            return Observation.accepted(found, f"payments/refunds/{found}")

        agent = Context(tenant_id="acme", actor_id="agent-7")
        rita = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))

        proposal = ledger.propose(
            agent, refund_order, order_id="ord-1001", amount_minor=30, currency="EUR"
        )
        ledger.approve(rita, proposal)
        result = ledger.perform(agent, proposal)
        print("perform:", result.outcome, result.state, result.provider_reference)

        stale = ledger.propose(
            agent, refund_order, order_id="ord-1001", amount_minor=5, currency="EUR"
        )
        ledger.approve(rita, stale)
        orders.change("acme", "ord-1001")  # the order changed after the approval
        late = ledger.perform(agent, stale)
        print("after the order changed:", late.outcome, late.reason)
        print("provider refunds:", payments.count())
        print("as JSON:", result.to_dict())
    payments.close()


if __name__ == "__main__":
    main()
