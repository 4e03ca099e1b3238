"""The applications ``effectledger worker --app tests.worker.apps:...`` loads in the tests.

Each builds the refund ledger over the store URL it is given and the simulated receiver file
named by ``$EFFECTLEDGER_TEST_RECEIVER``, with the wall clock, so test and worker processes
agree on time. ``$EFFECTLEDGER_TEST_RECOVER_AFTER_S`` shortens the wait before recovery.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from effectledger import DestinationRef, EffectLedger, LedgerSettings, SimulatedReceiver, connect
from effectledger.examples.refunds import OrderBook, refund_action

RECEIVER_VARIABLE = "EFFECTLEDGER_TEST_RECEIVER"
RECOVER_AFTER_VARIABLE = "EFFECTLEDGER_TEST_RECOVER_AFTER_S"


def settings() -> LedgerSettings:
    """Default timing, with ``recover_after`` from the environment when it is set."""
    seconds = os.environ.get(RECOVER_AFTER_VARIABLE)
    if seconds is None:
        return LedgerSettings()
    return LedgerSettings(recover_after=timedelta(seconds=float(seconds)))


def refunds(store_url: str) -> EffectLedger:
    """The refund action bound to the simulated receiver in ``$EFFECTLEDGER_TEST_RECEIVER``."""
    receiver = SimulatedReceiver(os.environ[RECEIVER_VARIABLE], synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ledger = connect(store_url, settings=settings())
    ledger.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return ledger


LOADING_VARIABLE = "EFFECTLEDGER_TEST_LOADING_MARK"


def slow_refunds(store_url: str) -> EffectLedger:
    """``refunds``, after marking the file ``$EFFECTLEDGER_TEST_LOADING_MARK`` and two seconds
    of loading: a window in which a signal reaches a worker that is still loading its app."""
    Path(os.environ[LOADING_VARIABLE]).touch()
    time.sleep(2.0)
    return refunds(store_url)
