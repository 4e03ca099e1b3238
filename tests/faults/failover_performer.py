"""A child for the failover tests: ``python -m tests.faults.failover_performer ...``.

It opens the refund world over the cluster's multi-host URL and the shared receiver file, and
runs ``--threads`` threads that each propose, approve and perform refunds one after another
until the stop file appears (or ``--seconds`` pass), whatever the database does meanwhile,
resting ``--pause`` seconds after each performed refund (none by default). Each
call's answer is one JSON line on standard output: the time, the step, the proposal, and either
the operation with its outcome and state or the error's stable code. The parent reads only
these lines and the durable rows; the answers are what it checks the rows against.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

from effectledger import EffectLedgerError, LedgerSettings, StorageError
from effectledger.clock import SystemClock
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.worker.support import refunds


def main() -> int:
    """Perform refunds from several threads until told to stop; print every answer."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()
    opening = time.monotonic() + 120
    while True:  # the cluster may be failing over as this process starts: open when it answers
        try:
            world = refunds(
                args.store,
                Path(args.folder),
                clock=SystemClock(),
                settings=LedgerSettings(recover_after=timedelta(seconds=5)),
            )
            break
        except StorageError:
            if time.monotonic() > opening:
                raise
            time.sleep(0.5)
    stop = Path(args.stop_file)
    until = time.monotonic() + args.seconds
    lock = threading.Lock()

    def say(**line: object) -> None:
        with lock:
            print(json.dumps({"t": time.time(), **line}), flush=True)

    def loop() -> None:
        while not stop.exists() and time.monotonic() < until:
            began = time.time()
            proposal_id = None
            step = "propose"
            try:
                proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
                proposal_id = proposal.proposal_id
                step = "approve"
                world.app.approve(REVIEWER, proposal)
                step = "perform"
                result = world.app.perform(AGENT, proposal)
            except EffectLedgerError as exc:
                say(step=step, proposal=proposal_id, error=exc.code, began=began)
                time.sleep(0.05)
                continue
            say(
                step="perform",
                proposal=proposal_id,
                operation=result.operation_id,
                outcome=str(result.outcome),
                state=str(result.state),
                began=began,
            )
            if args.pause:
                time.sleep(args.pause)

    threads = [threading.Thread(target=loop) for _ in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    world.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
