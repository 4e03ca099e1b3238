"""Benchmark ``audit verify`` on bundles as the sealer writes them, beside the hashing floor.

Run it from the repository root::

    .venv/bin/python benchmarks/verify_speed.py [--events N]

A sealer under a steady load signs a checkpoint for every few events (one batch per pass), so a
real bundle carries many checkpoints, each with its consistency proof. This writes bundles of the
same events with a checkpoint every 5 events (what a sealer looping under load writes without a
minimum batch), every 100, and every 1,000 events (a looping ``audit seal``'s minimum batch now),
verifies each with ``verify_bundle``, and
prints the events per second beside the floor measured in the same run: two SHA-256 per event
(the event hash and the leaf hash) over the same canonical bytes, nothing else. Target: at least
200,000 events/s at the cadence the looping sealer writes now.
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

TARGET = 200_000


def main(argv: list[str] | None = None) -> int:
    """Write the bundles, verify each, print events/s and the ratio to the floor."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per bundle")
    args = parser.parse_args(argv)
    entries = synthesize(args.events)
    floor = args.events / min(hash_floor(entries) for _ in range(3))
    print(f"floor, two SHA-256 per event: {floor:,.0f} events/s")
    with tempfile.TemporaryDirectory() as folder:
        for every in (5, 100, 1000):
            bundle = Path(folder) / f"every-{every}.jsonl"
            write_bundle(bundle, entries, every)
            started = time.perf_counter()
            report = verify_bundle(bundle, [SIGNER.verifier()])
            elapsed = time.perf_counter() - started
            if not report.ok:  # pragma: no cover - a broken run
                raise SystemExit(f"verify failed: {report.findings[:3]}")
            rate = args.events / elapsed
            print(
                f"checkpoint every {every:>5} events ({report.checkpoints:,} checkpoints): "
                f"{rate:,.0f} events/s, {rate / floor:.2f} x floor, "
                f"{'meets' if rate >= TARGET else 'under'} {TARGET:,}/s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
