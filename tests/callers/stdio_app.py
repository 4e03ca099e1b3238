"""The application an ``effectledger mcp`` process loads in the tests (``--app``).

It builds the refund ledger over the store and receiver named by environment variables, with
the wall clock, so the test process and the server process agree on time.
"""

from __future__ import annotations

import os
from pathlib import Path

from effectledger import DestinationRef, EffectLedger, LedgerSettings, SimulatedReceiver
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store

STORE_VARIABLE = "EFFECTLEDGER_MCP_TEST_STORE"
RECEIVER_VARIABLE = "EFFECTLEDGER_MCP_TEST_RECEIVER"


def build(store_url: str, receiver_path: Path) -> EffectLedger:
    """The refund ledger over ``store_url`` and the receiver file at ``receiver_path``."""
    receiver = SimulatedReceiver(receiver_path, synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ledger = EffectLedger(open_store(store_url), settings=LedgerSettings())
    ledger.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return ledger


def service() -> EffectLedger:
    """The factory named by ``--app tests.callers.stdio_app:service``."""
    return build(os.environ[STORE_VARIABLE], Path(os.environ[RECEIVER_VARIABLE]))
