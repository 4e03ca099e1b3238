"""Benchmark ``audit verify`` on bundles as the sealer writes them, beside the hashing floor.

Run it from the repository root::

    .venv/bin/python benchmarks/verify_speed.py [--events N]

A sealer under a steady load signs a checkpoint for every few events (one batch per pass), so a
real bundle carries many checkpoints, each with its consistency proof. This writes bundles of the
same events with a checkpoint every 5 events (what a sealer looping under load writes without a
minimum batch), every 100, and every 1,000 events (a looping ``audit seal``'s minimum batch now),
verifies each with ``verify_bundle`` (best of ``--repeat`` runs), and prints the events per
second beside the floor measured right before each of them: two SHA-256 per event (the event
hash and the leaf hash) over the same canonical bytes, nothing else. On a shared machine the
ratio to the floor is the steadier figure, and the ratio of CPU times (also printed) steadier
still. Target: at least 200,000 events/s at the cadence the
looping sealer writes now (``LOOP_MIN_BATCH``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from audit import SIGNER, hash_floor, synthesize, write_bundle

from effectledger.audit.verify import verify_bundle
from effectledger.cli.audit_log import LOOP_MIN_BATCH

TARGET = 200_000


def main(argv: list[str] | None = None) -> int:
    """Write the bundles, verify each, print events/s and the ratio to the floor."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per bundle")
    parser.add_argument("--repeat", type=int, default=3, help="runs per bundle (best is shown)")
    args = parser.parse_args(argv)
    entries = synthesize(args.events)
    with tempfile.TemporaryDirectory() as folder:
        for every in (5, 100, LOOP_MIN_BATCH):
            bundle = Path(folder) / f"every-{every}.jsonl"
            write_bundle(bundle, entries, every)
            best_floor = best = cpu_floor = cpu = float("inf")
            for _ in range(max(1, args.repeat)):
                cpu_started = time.process_time()
                best_floor = min(best_floor, hash_floor(entries))
                cpu_floor = min(cpu_floor, time.process_time() - cpu_started)
                started, cpu_started = time.perf_counter(), time.process_time()
                report = verify_bundle(bundle, [SIGNER.verifier()])
                best = min(best, time.perf_counter() - started)
                cpu = min(cpu, time.process_time() - cpu_started)
                if not report.ok:  # pragma: no cover - a broken run
                    raise SystemExit(f"verify failed: {report.findings[:3]}")
            rate, floor = args.events / best, args.events / best_floor
            print(
                f"checkpoint every {every:>5} events ({report.checkpoints:,} checkpoints): "
                f"{rate:,.0f} events/s; floor (two SHA-256 per event) {floor:,.0f}/s; "
                f"{rate / floor:.2f} x floor ({cpu_floor / cpu:.2f} in CPU time); "
                f"{'meets' if rate >= TARGET else 'under'} {TARGET:,}/s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
