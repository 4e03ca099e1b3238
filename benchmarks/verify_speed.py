"""Benchmark ``audit verify`` on bundles as the sealer writes them, beside the hashing floor.

Run it from the repository root::

    .venv/bin/python benchmarks/verify_speed.py [--events N] [--repeat R] [--jobs J] [--every E]

A sealer under a steady load signs a checkpoint for every few events (one batch per pass), so a
real bundle carries many checkpoints, each with its consistency proof. This writes bundles of the
same events with a checkpoint every 5 events (what a sealer looping under load writes without a
minimum batch), every 100, and every 1,000 events (a looping ``audit seal``'s minimum batch now),
and verifies each with ``verify_bundle`` (best of ``--repeat`` runs) twice: serially
(``jobs=1``) beside the floor of one process — two SHA-256 per event (the event hash and the
leaf hash) over the same canonical bytes, nothing else — and split into ``J`` processes (default:
what ``audit verify`` uses, ``os.cpu_count()``) beside the same floor computed by ``J`` processes
over ``J`` slices of the events, each process started for it as the split verify starts its
own. Each floor is measured right before its verify. On a shared machine the ratio to the floor
is the steadier figure, and the ratio of CPU times (the children's included) steadier still.
Target: at least 200,000 events/s at the cadence the looping sealer writes now
(``LOOP_MIN_BATCH``), the way ``audit verify`` runs by default.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from audit import SIGNER, hash_floor, synthesize, write_bundle

from effectledger.audit.bundles.split import PARALLEL_MIN_BYTES
from effectledger.audit.bundles.verify import VerificationReport, verify_bundle
from effectledger.audit.log.note import _verified
from effectledger.cli.audit_log import LOOP_MIN_BATCH

TARGET = 200_000
_ENTRIES: list[bytes] = []


def _slice_floor(index: int, jobs: int) -> float:
    """The floor over one of ``jobs`` contiguous slices of the events (in a worker)."""
    share = -(-len(_ENTRIES) // jobs)
    return hash_floor(_ENTRIES[index * share : (index + 1) * share])


def _parallel_floor(jobs: int) -> None:
    """The floor in ``jobs`` processes: ``jobs - 1`` forked workers and this one."""
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(jobs - 1, mp_context=context) as pool:
        tasks = [pool.submit(_slice_floor, index, jobs) for index in range(1, jobs)]
        _slice_floor(0, jobs)
        for task in tasks:
            task.result()


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _timed(run: Callable[[], object]) -> tuple[float, float, object]:
    started, cpu_started = time.perf_counter(), _cpu()
    result = run()
    return time.perf_counter() - started, _cpu() - cpu_started, result


def _measure(
    floor: Callable[[], object], verify: Callable[[], object], repeat: int
) -> tuple[float, float, float, float, VerificationReport]:
    """Best wall and CPU seconds of the floor and of the verify, each floor right before."""
    best_floor = best = cpu_floor = cpu = float("inf")
    report = None
    for _ in range(max(1, repeat)):
        wall, spent, _ = _timed(floor)
        best_floor, cpu_floor = min(best_floor, wall), min(cpu_floor, spent)
        _verified.cache_clear()  # each run opens its checkpoints cold, as a new `audit verify`
        wall, spent, report = _timed(verify)
        best, cpu = min(best, wall), min(cpu, spent)
        assert isinstance(report, VerificationReport)
        if not report.ok:  # pragma: no cover - a broken run
            raise SystemExit(f"verify failed: {report.findings[:3]}")
    assert isinstance(report, VerificationReport)
    return best_floor, best, cpu_floor, cpu, report


def main(argv: list[str] | None = None) -> int:
    """Write the bundles, verify each both ways, print events/s and the ratios to the floors."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per bundle")
    parser.add_argument("--repeat", type=int, default=3, help="runs per bundle (best is shown)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes of the split verify"
    )
    parser.add_argument(
        "--every",
        type=int,
        action="append",
        help=f"a checkpoint cadence to measure (repeatable; default 5, 100, {LOOP_MIN_BATCH})",
    )
    args = parser.parse_args(argv)
    _ENTRIES[:] = synthesize(args.events)
    jobs = max(2, args.jobs)
    print(f"{args.events:,} events; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        for every in args.every or (5, 100, LOOP_MIN_BATCH):
            bundle = Path(folder) / f"every-{every}.jsonl"
            write_bundle(bundle, _ENTRIES, every)
            default = "" if bundle.stat().st_size >= PARALLEL_MIN_BYTES else " (not the default)"
            runs = (
                ("serial", 1, functools.partial(hash_floor, _ENTRIES)),
                (f"{jobs} processes{default}", jobs, functools.partial(_parallel_floor, jobs)),
            )
            for label, count, floor_run in runs:
                best_floor, best, cpu_floor, cpu, report = _measure(
                    floor_run,
                    functools.partial(verify_bundle, bundle, [SIGNER.verifier()], jobs=count),
                    args.repeat,
                )
                rate, floor = args.events / best, args.events / best_floor
                print(
                    f"checkpoint every {every:>5} events ({report.checkpoints:,} checkpoints), "
                    f"{label}: {rate:,.0f} events/s; floor (two SHA-256 per event, "
                    f"{'1 process' if count == 1 else f'{count} processes'}) {floor:,.0f}/s; "
                    f"{rate / floor:.2f} x floor "
                    f"({cpu_floor / cpu:.2f} in CPU time); "
                    f"{'meets' if rate >= TARGET else 'under'} {TARGET:,}/s"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
