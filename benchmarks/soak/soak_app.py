"""The soak's application: the refund action behind a destination that injects faults.

``effectledger worker --app soak_app:build`` loads it from this folder. The faults come from
the environment the soak driver sets: ``SOAK_LOSE_RATE`` (the receiver performs the effect and
the reply is lost), ``SOAK_SLOW_LOOKUP_RATE`` and ``SOAK_SLOW_LOOKUP_S`` (a lookup answers late),
``SOAK_RECOVER_AFTER_S`` (the ledger's recovery delay).
"""

from __future__ import annotations

import os
import random
import time
from datetime import timedelta

from effectledger import (
    Command,
    DeliveryUncertain,
    DestinationRef,
    EffectLedger,
    LedgerSettings,
    Observation,
    SimulatedReceiver,
    connect,
)
from effectledger.examples.refunds import OrderBook, refund_action


class FaultyDestination:
    """The simulated receiver, losing replies and answering lookups late at set rates."""

    def __init__(self, receiver: SimulatedReceiver) -> None:
        self.receiver = receiver
        self.account_id = receiver.account_id
        self.endpoint = receiver.endpoint
        self.lose_rate = float(os.environ.get("SOAK_LOSE_RATE", "0"))
        self.slow_rate = float(os.environ.get("SOAK_SLOW_LOOKUP_RATE", "0"))
        self.slow_s = float(os.environ.get("SOAK_SLOW_LOOKUP_S", "0"))
        self.random = random.Random()

    def submit(self, command: Command, idempotency_key: str) -> Observation:
        """Submit; with ``lose_rate`` the effect happens and the reply is lost."""
        observation = self.receiver.submit(command, idempotency_key)
        if self.random.random() < self.lose_rate:
            raise DeliveryUncertain("soak: the reply was lost")
        return observation

    def lookup(self, idempotency_key: str) -> Observation:
        """Look up; with ``slow_rate`` the answer comes ``slow_s`` late."""
        if self.random.random() < self.slow_rate:
            time.sleep(self.slow_s)
        return self.receiver.lookup(idempotency_key)


def build(store_url: str) -> EffectLedger:
    """The refund application over ``store_url`` and the receiver file ``$SOAK_RECEIVER``."""
    receiver = SimulatedReceiver(os.environ["SOAK_RECEIVER"], synchronous="NORMAL")
    ref = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    delay = timedelta(seconds=float(os.environ.get("SOAK_RECOVER_AFTER_S", "2")))
    ledger = connect(store_url, settings=LedgerSettings(recover_after=delay, lookup_interval=delay))
    ledger.register(refund_action(orders=OrderBook(), destination=ref), FaultyDestination(receiver))
    return ledger
