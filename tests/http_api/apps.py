"""An application factory for ``effectledger serve --app tests.http_api.apps:refund_service``."""

from __future__ import annotations

import os

from effectledger import DestinationRef, EffectLedger, SimulatedReceiver, connect
from effectledger.examples.refunds import OrderBook, refund_action

RECEIVER_VARIABLE = "EFFECTLEDGER_TEST_RECEIVER"


def refund_service(store_url: str) -> EffectLedger:
    """The refund action, bound to the simulated receiver in ``$EFFECTLEDGER_TEST_RECEIVER``."""
    receiver = SimulatedReceiver(os.environ[RECEIVER_VARIABLE], synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ledger = connect(store_url)
    ledger.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return ledger
