"""A service factory for ``effectledger serve --service tests.http_api.apps:refund_service``."""

from __future__ import annotations

import os

from effectledger import DestinationRef, EffectService, Ledger, SimulatedReceiver, open_store
from effectledger.actions import ActionRegistry
from effectledger.examples.refunds import OrderBook, refund_action

RECEIVER_VARIABLE = "EFFECTLEDGER_TEST_RECEIVER"


def refund_service(store_url: str) -> EffectService:
    """The refund action, bound to the simulated receiver in ``$EFFECTLEDGER_TEST_RECEIVER``."""
    receiver = SimulatedReceiver(os.environ[RECEIVER_VARIABLE], synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    registry = ActionRegistry([refund_action(orders=OrderBook(), destination=destination)])
    return EffectService(Ledger(open_store(store_url)), registry, [receiver])
