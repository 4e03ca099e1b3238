"""Does a ``perform`` slow down as the ledger's history grows? Measured beside a raw read.

Run it from the repository root::

    .venv/bin/python benchmarks/history.py [--dir DIR] [--sizes 1000,10000,30000] [--timed N]

One SQLite ledger (``synchronous=OFF``, so the disk's flushes do not hide the statements' own
cost) and a simulated receiver are filled with approved refunds of one tenant. At each size the
last ``--timed`` of them are performed one by one through ``EffectLedger.perform``; the rest
are performed first, untimed, so the history holds operations, trails and consumed approvals.
Beside each figure, the same file's own limit at that size: a primary-key read of one approval
with plain ``sqlite3``. A statement that reads every row of the tenant shows here as a
``perform`` that grows with the history while the raw read stays flat (admission read every
approval of the tenant until migration 0008). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from effectledger import Context, DestinationRef, EffectLedger, OperationState, SimulatedReceiver
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.store import open_store

AGENT = Context(tenant_id="acme", actor_id="alice")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))


def _raw_read_us(path: Path, approval_id: str, count: int = 2000) -> float:
    """Median µs of a primary-key read of one approval with plain sqlite3, same file."""
    connection = sqlite3.connect(path)
    query = "SELECT * FROM approvals WHERE tenant_id = ? AND approval_id = ?"
    samples = []
    for _ in range(count):
        started = time.perf_counter_ns()
        connection.execute(query, ("acme", approval_id)).fetchone()
        samples.append((time.perf_counter_ns() - started) / 1000)
    connection.close()
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    """Fill the ledger size by size and print perform's cost beside the raw read's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="folder for the database files (default: temp)")
    parser.add_argument("--sizes", default="1000,10000,30000", help="history sizes (approvals)")
    parser.add_argument("--timed", type=int, default=500, help="timed performs per size (500)")
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    if not sizes or sizes[0] < args.timed:
        parser.error("every size must be at least --timed")

    folder = Path(tempfile.mkdtemp(prefix="effectledger-history-", dir=args.dir))
    print(
        f"effectledger history benchmark - Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, synchronous=OFF, {args.timed} timed performs per size"
    )
    print(f"{'approvals':>10}  {'perform µs':>10}  {'raw read µs':>11}  {'perform x first':>15}")
    store = open_store(f"sqlite:///{folder / 'ledger.db'}?synchronous=OFF")
    receiver = SimulatedReceiver(folder / "receiver.db", synchronous="OFF")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    action = refund_action(orders=OrderBook(), destination=destination)
    service = EffectLedger(Ledger(store), destinations=[receiver])
    service.register(action, receiver)
    first: float | None = None
    made = 0
    try:
        for size in sizes:
            ready: list[tuple[str, str]] = []
            for number in range(made, size):
                arguments = {"order_id": f"ord-{number}", "amount_minor": 30, "currency": "EUR"}
                proposal = service.propose(AGENT, "refund_order", arguments)
                approval = service.approve(RITA, proposal.proposal_id, digest=proposal.digest)
                ready.append((proposal.proposal_id, approval.approval_id))
                if (number + 1) % 5000 == 0:
                    sys.stderr.write(f"  proposed and approved {number + 1}/{size}\n")
            made = size
            untimed, timed = ready[: -args.timed], ready[-args.timed :]
            for proposal_id, approval_id in untimed:
                service.perform(AGENT, proposal_id, approval=approval_id)
            started = time.perf_counter()
            for proposal_id, approval_id in timed:
                result = service.perform(AGENT, proposal_id, approval=approval_id)
                if result.state is not OperationState.SUCCEEDED:  # pragma: no cover
                    raise SystemExit(f"perform ended {result.state}")
            perform_us = (time.perf_counter() - started) / len(timed) * 1e6
            raw_us = _raw_read_us(folder / "ledger.db", timed[-1][1])
            first = first or perform_us
            print(f"{size:>10}  {perform_us:>10.0f}  {raw_us:>11.1f}  {perform_us / first:>15.2f}")
    finally:
        store.close()
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
