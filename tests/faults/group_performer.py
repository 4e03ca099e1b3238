"""A child for the group-commit kill tests: ``python -m tests.faults.group_performer ...``.

It opens the refund world over the ledger and the receiver file (group commit on, as the URL
says), reads the proposals and approvals the parent made from a JSON file, and performs them
from 16 threads released together, one proposal each; the parent arms a crash point
(``EFFECTLEDGER_CRASH_AT``) that kills the whole process while the batches are in flight. Each
finished perform prints one line ``performed <proposal_id> <state>``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from tests.races.world import AGENT, build, close


def main() -> int:
    """Perform every listed proposal, one thread each, all released at once."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--calls", required=True, help="JSON file of [proposal_id, approval_id]")
    args = parser.parse_args()
    calls = json.loads(Path(args.calls).read_text("utf-8"))
    service = build(args.store, Path(args.folder))
    barrier = threading.Barrier(len(calls))
    lock = threading.Lock()

    def perform(proposal_id: str, approval_id: str) -> None:
        barrier.wait()
        result = service.perform(AGENT, proposal_id, approval=approval_id)
        with lock:
            print(f"performed {proposal_id} {result.state}", flush=True)

    threads = [threading.Thread(target=perform, args=tuple(call)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    close(service)
    return 0


if __name__ == "__main__":
    sys.exit(main())
