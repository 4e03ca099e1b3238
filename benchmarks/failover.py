"""Performs through PostgreSQL failovers, beside the same load on a single server.

Run it as root from the repository root (PostgreSQL runs as the ``postgres`` user; Debian's
``patroni`` and ``etcd-server`` must be installed)::

    .venv/bin/python benchmarks/failover.py [--kills 10] [--switchovers 2] [--processes 4]
        [--threads 4] [--single postgresql://postgres@127.0.0.1:5432/test] [--seed 1]

It starts a three-node Patroni cluster (synchronous mode) in a temporary folder, runs
``--processes`` performer processes of ``--threads`` threads each (half of them with
``group_commit=on``) through the multi-host URL, and kills the primary's postmaster
``--kills`` times, stops its node cleanly once and switches over ``--switchovers`` times at
random moments. It prints performs per second before, during and after the failures; the
window in which no refund was performed after each failure (p50 and max); the calls refused,
by error code; the operations left uncertain at the end and how long the recovery worker took
to settle them; and the checks counted from the rows and the receiver's records: refunds
answered performed but not SUCCEEDED (lost), operations with more than one effect or an effect
and no success (doubled). The floor is the same load for the same time on one server that
never fails (``--single``, default ``$EFFECTLEDGER_BENCH_POSTGRES_URL``, then the local
``test`` database), measured in the same run. Exit status 1 if anything was lost or doubled.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import run_sql  # noqa: E402
from tests.faults._patroni import missing, start_cluster  # noqa: E402
from tests.faults.failover_load import Load, every_operation, figures, inflict, settle  # noqa: E402
from tests.worker.support import Refunds, refunds  # noqa: E402

from effectledger import LedgerSettings, OperationState  # noqa: E402
from effectledger.clock import SystemClock  # noqa: E402

DEFAULT_SINGLE = "postgresql://postgres@127.0.0.1:5432/test"


def _urls(url: str, processes: int) -> list[str]:
    """The performers' URLs: half of them with group commit on."""
    return [url if i % 2 == 0 else f"{url}&group_commit=on" for i in range(processes)]


SETTLED = frozenset({OperationState.SUCCEEDED, OperationState.READY, OperationState.RELEASED})


def _check(world: Refunds, load: Load, url: str) -> tuple[int, int]:
    """(lost, doubled): answered refunds not SUCCEEDED; operations whose effects are wrong."""
    rows = run_sql(url, "SELECT operation_id, state, idempotency_key FROM operations")
    states = {str(op): str(state) for op, state, _ in rows}
    lost = sum(
        1
        for answer in load.performed()
        if answer["state"] == "SUCCEEDED" and states.get(answer["operation"]) != "SUCCEEDED"
    )
    doubled = 0
    for _, state, key in rows:
        effects = world.receiver.effects_for(str(key))
        if effects != (1 if state == "SUCCEEDED" else 0):
            doubled += 1
    return lost, doubled


def single_server(url: str, seconds: float, processes: int, threads: int) -> float:
    """Performs per second of the same load on one server that never fails."""
    schema_url = f"{url}?schema=fo_single_{uuid.uuid4().hex[:8]}"
    folder = Path(tempfile.mkdtemp(prefix="effectledger-single-"))
    world = refunds(schema_url, folder, clock=SystemClock())
    load = Load(folder)
    load.start(_urls(schema_url, processes), threads)
    time.sleep(3)
    started = time.time()
    time.sleep(seconds)
    ended = time.time()
    load.stop()
    world.close()
    shutil.rmtree(folder, ignore_errors=True)
    done = [a["t"] for a in load.answers if a.get("outcome") == "performed"]
    return sum(started <= t < ended for t in done) / (ended - started)


def main() -> int:
    """Run the failover load, then the single-server floor, and print both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--switchovers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--answers", type=Path, help="write every answer here as JSON lines")
    parser.add_argument(
        "--single", default=os.environ.get("EFFECTLEDGER_BENCH_POSTGRES_URL", DEFAULT_SINGLE)
    )
    args = parser.parse_args()
    reason = missing()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="effectledger-ha-"))
    os.chmod(folder, 0o755)
    cluster = start_cluster(folder, synchronous=True)
    try:
        url = cluster.url(schema=f"fo_{uuid.uuid4().hex[:10]}")
        world = refunds(
            url, folder, clock=SystemClock(), settings=LedgerSettings(recover_after=timedelta(0))
        )
        load = Load(folder)
        load.start(_urls(url, args.processes), args.threads)
        time.sleep(3)
        started = time.time()
        time.sleep(5)  # the steady rate before the first failure
        inflicted = inflict(cluster, args.kills, args.switchovers, 1, seed=args.seed)
        time.sleep(5)  # and after the last
        ended = time.time()
        load.stop()
        uncertain = [op for op, state, _ in every_operation(url) if state not in SETTLED]
        settle_start = time.monotonic()
        settle(world, url)
        settle_s = time.monotonic() - settle_start
        lost, doubled = _check(world, load, url)
        counts = world.receiver.counts()
        world.close()
    finally:
        cluster.close()
        shutil.rmtree(folder, ignore_errors=True)
    if args.answers is not None:
        lines = [json.dumps(a) for a in load.answers]
        lines += [
            json.dumps({"inflicted": i.action, "at": i.at, "healthy_at": i.healthy_at})
            for i in inflicted
        ]
        args.answers.write_text("\n".join(lines) + "\n", "utf-8")
    floor = single_server(args.single, ended - started, args.processes, args.threads)
    found = figures(load.answers, inflicted, started, ended)
    print(f"failover: {args.processes} processes x {args.threads} threads, synchronous mode")
    print(f"failures inflicted: {', '.join(i.action for i in inflicted)}")
    print("figure | measured | floor (one server, same load)")
    print(f"performs/s before the failures | {found['before_per_s']:.1f} | {floor:.1f}")
    print(f"performs/s during the failures | {found['during_per_s']:.1f} | {floor:.1f}")
    print(f"performs/s after the failures | {found['after_per_s']:.1f} | {floor:.1f}")
    print(
        f"no refund performed after a failure, s | p50 {found['refused_p50_s']:.2f}, "
        f"max {found['refused_max_s']:.2f} | -"
    )
    print(f"calls refused, by code | {found['errors']} | -")
    print(f"operations uncertain at the end | {len(uncertain)} | -")
    print(f"recovery settled them in, s | {settle_s:.2f} | -")
    print(f"receiver: submissions {counts.submissions}, effects {counts.effects}")
    print(f"lost | {lost} | 0")
    print(f"doubled | {doubled} | 0")
    return 1 if lost or doubled else 0


if __name__ == "__main__":
    sys.exit(main())
