"""Where a batch worker's CPU goes, and what it sends: the steps of claiming in batches, profiled.

Run it from the repository root::

    .venv/bin/python benchmarks/profile_worker_batch.py [--ops N] [--batch 32]
        [--backends sqlite,postgres] [--url postgresql://...]

Over approved refunds admitted beforehand (as ``worker_batch.py`` does: trail key, simulated
receiver with WAL and ``synchronous=FULL``), it prints for each backend:

* the CPU of each step of a batch per operation, measured in the thread that runs it
  (``time.thread_time``): the read of the READY queue, the recheck, the claim transaction, the
  sends (the simulated receiver's own work and its commit included), the record transaction;
  with the receiver taking four sends at once, as in the benchmark;
* counts that do not depend on the machine, with the receiver taking one send at a time so
  that everything runs in one thread: Python function calls per operation (cProfile) and the
  statements per operation (SQLite: the driver's ``execute``, the receiver's included;
  PostgreSQL: the store's named statements and transactions), for ``claim_batch=1`` (the
  per-operation path) and for ``--batch``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import worker_batch

import effectledger.workers.batches as batches
from effectledger import EffectLedger
from effectledger.events.authentication import new_trail_key

STEPS = ("queue read", "recheck", "claim", "sends", "record")


def _timed(name: str, spent: Counter[str], call: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return call(*args, **kwargs)
        finally:
            spent[name] += time.thread_time() - began

    return timed


@contextmanager
def _steps(app: EffectLedger, spent: Counter[str]) -> Iterator[None]:
    """Time each step of the batch path while the block runs."""
    (executor,) = app._declared.executors.values()
    saved = (batches.ready_batch, batches.claim_batch, batches.record_batch)
    guard, send = executor.batch_guard, executor._send
    batches.ready_batch = _timed("queue read", spent, batches.ready_batch)  # type: ignore[assignment]
    batches.claim_batch = _timed("claim", spent, batches.claim_batch)  # type: ignore[assignment]
    batches.record_batch = _timed("record", spent, batches.record_batch)  # type: ignore[assignment]
    executor.batch_guard = _timed("recheck", spent, guard) if guard else None
    executor._send = _timed("sends", spent, send)  # type: ignore[method-assign]
    try:
        yield
    finally:
        batches.ready_batch, batches.claim_batch, batches.record_batch = saved  # type: ignore[assignment]
        executor.batch_guard = guard
        executor._send = send  # type: ignore[method-assign]


def _ledger_url(backend: str, folder: Path, name: str, url: str | None) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / f'{name}.db'}"
    import ledger_postgres

    assert url is not None
    return ledger_postgres._with_schema(url, f"el_profile_{os.getpid()}_{uuid.uuid4().hex[:8]}")


def _prepared(
    backend: str, folder: Path, name: str, ops: int, url: str | None, sends: int
) -> tuple[str, EffectLedger]:
    """A fresh ledger with ``ops`` READY refunds and its app, its receiver taking ``sends``."""
    ledger_url = _ledger_url(backend, folder, name, url)
    receiver, key = folder / f"{name}-receiver.db", new_trail_key()
    worker_batch.prepare(ledger_url, receiver, key, ops)
    app = worker_batch.service(ledger_url, receiver, key)
    for destination in app.destinations.values():
        destination.concurrent_sends = sends  # type: ignore[attr-defined]
    return ledger_url, app


def _drain(app: EffectLedger, claim_batch: int) -> int:
    done = 0
    while taken := len(app.dispatch_ready(limit=100, claim_batch=claim_batch)):
        done += taken
    return done


def steps(backend: str, folder: Path, ops: int, batch: int, url: str | None) -> dict[str, float]:
    """CPU per operation of each step (µs), the receiver taking four sends at once."""
    ledger_url, app = _prepared(backend, folder, "steps", ops, url, 4)
    spent: Counter[str] = Counter()
    try:
        with _steps(app, spent):
            done = _drain(app, batch)
    finally:
        worker_batch.close(app)
        if backend != "sqlite":
            worker_batch._drop(ledger_url)
    return {name: spent[name] / done * 1e6 for name in STEPS}


def counts(
    backend: str, folder: Path, ops: int, claim_batch: int, url: str | None
) -> tuple[float, float]:
    """Python calls and statements per operation, everything in one thread."""
    ledger_url, app = _prepared(backend, folder, f"counts-{claim_batch}", ops, url, 1)
    profile = cProfile.Profile()
    try:
        profile.enable()
        done = _drain(app, claim_batch)
        profile.disable()
    finally:
        worker_batch.close(app)
        if backend != "sqlite":
            worker_batch._drop(ledger_url)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    if backend == "sqlite":
        sent = sum(
            entry[0]
            for (_, _, name), entry in stats.items()
            if name == "<method 'execute' of 'sqlite3.Connection' objects>"
        )
    else:
        sent = sum(
            entry[0]
            for (path, _, name), entry in stats.items()
            if (path.endswith("postgres_transaction.py") and name in {"one", "all", "run", "queue"})
            or (path.endswith(os.path.join("store", "postgres.py")) and name in {"one", "_attempt"})
        )
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    return calls / done, sent / done


def main(argv: list[str] | None = None) -> int:
    """Profile each backend and print the steps and the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=512, help="refunds per run (512)")
    parser.add_argument("--batch", type=int, default=32, help="the claim batch profiled (32)")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "EFFECTLEDGER_BENCH_POSTGRES_URL", os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL")
        ),
        help="a PostgreSQL database the benchmark may create schemas in",
    )
    args = parser.parse_args(argv)
    backends = [name for name in args.backends.split(",") if name != "postgres" or args.url]
    folder = Path(tempfile.mkdtemp(prefix="effectledger-profile-batch-"))
    try:
        for backend in backends:
            sys.stderr.write(f"{backend}: steps\n")
            found = steps(backend, folder, args.ops, args.batch, args.url)
            shown = ", ".join(f"{name} {found[name]:.0f}" for name in STEPS)
            print(f"{backend}, claim batch {args.batch}: CPU per operation (µs) by step: {shown}")
            for claim_batch in (1, args.batch):
                sys.stderr.write(f"{backend}: counts, claim batch {claim_batch}\n")
                calls, sent = counts(backend, folder, args.ops, claim_batch, args.url)
                print(
                    f"{backend}, claim batch {claim_batch}: {calls:.0f} Python calls and "
                    f"{sent:.1f} statements per operation"
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
