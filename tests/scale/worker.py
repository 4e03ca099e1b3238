"""A worker process for the multi-process tests: ``python -m tests.scale.worker ROLE ...``.

It opens its own store and receiver, prints ``ready``, waits for ``go`` on stdin (so that every
worker starts at once), does its role's work and prints one JSON line with what it did. The
clock is fixed by the parent (``--clock-us``): no worker sleeps through a time window.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

from effectledger import (
    Context,
    DestinationRef,
    LookupMode,
    ManualClock,
    SimulatedReceiver,
)
from effectledger.actions.policy import RulePolicy
from effectledger.actions.registry import ActionRegistry
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.model.operations import from_micros
from effectledger.store import open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.support.app import ledger_over

# The role-based policy of the guarded pool: only actors with the ``agent`` role may request.
ROLE_POLICY = RulePolicy(version="refund-policy-roles", proposer_roles=frozenset({"agent"}))


def main() -> int:
    """Run one worker role and report on stdout."""
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["execute", "pool", "guarded-pool", "recover"])
    parser.add_argument("--db", required=True)
    parser.add_argument("--receiver", required=True)
    parser.add_argument("--clock-us", type=int, required=True)
    parser.add_argument("--operations", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=25)
    parser.add_argument("--lookup", choices=[mode.value for mode in LookupMode], default="answer")
    parser.add_argument("--account", default="acct-demo")
    args = parser.parse_args()

    store = open_store(args.db)
    ledger = Ledger(store, clock=ManualClock(from_micros(args.clock_us)))
    receiver = SimulatedReceiver(
        args.receiver,
        account_id=args.account,
        synchronous="NORMAL",
        lookup_mode=LookupMode(args.lookup),
    )
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2

    done = 0
    if args.role == "execute":
        context = Context(tenant_id="acme", actor_id="alice")
        executor = Executor(ledger, receiver)
        order = [f"op-{index}" for index in range(args.operations)]
        random.Random(args.seed).shuffle(order)
        for operation_id in order:
            executor.execute(context, operation_id)
            done += 1
    elif args.role == "pool":
        executor = Executor(ledger, receiver)
        while batch := executor.run_ready(limit=args.limit):
            done += len(batch)
    elif args.role == "guarded-pool":
        # The executor EffectLedger builds: with the dispatch-time recheck.
        bound = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
        registry = ActionRegistry(
            [refund_action(orders=OrderBook(), destination=bound, policy=ROLE_POLICY)]
        )
        executor = ledger_over(ledger, registry, [receiver]).executor_for(bound)
        while batch := executor.run_ready(limit=args.limit):
            done += len(batch)
    else:
        worker = RecoveryWorker(ledger, receiver)
        while True:
            report = worker.run_once(limit=args.limit)
            if report.failed:
                print(json.dumps({"failed": report.failed}), flush=True)
                return 1
            if report.due == 0:
                break
            done += report.looked_up
    print(json.dumps({"done": done}), flush=True)
    store.close()
    receiver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
