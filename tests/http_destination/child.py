"""A child process for the HTTP tests: executes one operation through the HTTP destination.

Run by path: ``python child.py --store URL --receiver URL --operation OP``. It executes ``OP``
(already admitted) with a :class:`~effectledger.workers.executor.Executor` over
:func:`~effectledger.receiver.contract.reference_destination`, the token read from
``RECEIVER_TOKEN``, and prints the resulting state. ``EFFECTLEDGER_CRASH_AT`` (read when
:mod:`effectledger` is imported) makes it SIGKILL itself at that crash point. The ledger clock is
a :class:`~effectledger.clock.ManualClock` at the parent's fixed start, so no one sleeps.
"""

from __future__ import annotations

import argparse
import sys

from effectledger import Context, ManualClock
from effectledger.destinations.secrets import env_secret
from effectledger.ledger import Ledger
from effectledger.receiver.contract import reference_destination
from effectledger.store import open_store
from effectledger.workers import Executor


def main() -> int:
    """Execute the operation once; print ``state <STATE>``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--receiver", required=True)
    parser.add_argument("--operation", required=True)
    args = parser.parse_args()
    store = open_store(args.store)
    target = reference_destination(
        args.receiver, token=env_secret("RECEIVER_TOKEN", "Bearer {secret}")
    )
    try:
        ledger = Ledger(store, clock=ManualClock())
        result = Executor(ledger, target).execute(
            Context(tenant_id="acme", actor_id="alice"), args.operation
        )
        sys.stdout.write(f"state {result.state.value}\n")
    finally:
        target.close()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
