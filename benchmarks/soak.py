"""A bounded soak: worker processes on PostgreSQL under lost replies, slow lookups and kills.

Run it from the repository root::

    .venv/bin/python benchmarks/soak.py [--url postgresql://...] [--operations 2000]
        [--workers 3] [--rate 40] [--lose-rate 0.1] [--slow-lookup-rate 0.1] [--kill-every 10]
    .venv/bin/python benchmarks/soak.py --short     # the form .ci/run runs

On a fresh schema of the database at ``--url`` (default ``$EFFECTLEDGER_TEST_POSTGRES_URL``) it
starts ``--workers`` ``effectledger worker`` processes (``--app soak_app:build``, loaded from
``benchmarks/soak/``: dispatch, recovery and sealing) and admits ``--operations`` approved
refunds at ``--rate`` per second. The destination performs each effect and loses the reply at
``--lose-rate``; lookups answer late at ``--slow-lookup-rate``; every ``--kill-every`` seconds
one worker (never the first, the memory witness) is killed with SIGKILL and replaced. Once
admission ends and the work has drained (or ``--drain-s`` passes), the workers get SIGTERM.

Every second it prints resolved operations and the witness worker's memory; at the end the
duration, throughput, p50/p99 latency from admission to the last recorded step of each
SUCCEEDED operation, the faults injected, memory at start and end, and the checks: duplicate
submissions (the receiver's replays) 0, lost operations 0, nothing left READY, every operation
resolved or visibly uncertain, every worker stopped by SIGTERM exited 0. Exit status 1 if a
check fails.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
APP_FOLDER = Path(__file__).resolve().parent / "soak"
sys.path.insert(0, str(APP_FOLDER))

from soak_app import build  # noqa: E402

from effectledger import Context, OperationState  # noqa: E402
from effectledger.audit.keys.signers import Signer  # noqa: E402

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
REVIEWER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
REFUND = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR", "reason": "soak"}
SETTLED = {"SUCCEEDED", "REJECTED", "RELEASED", "MANUAL_REVIEW"}
WARM_UP_S = 5.0
"""Memory is compared from this many seconds in: before, the worker is still importing."""


def _schema_url(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("schema", schema), ("pool_max_size", "8")]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Soak:
    """One run: its schema, receiver file, workers and counters."""

    def __init__(self, args: argparse.Namespace, url: str, folder: Path) -> None:
        self.args = args
        self.url = url
        self.env = {
            **os.environ,
            "SOAK_RECEIVER": str(folder / "receiver.db"),
            "SOAK_LOSE_RATE": str(args.lose_rate),
            "SOAK_SLOW_LOOKUP_RATE": str(args.slow_lookup_rate),
            "SOAK_SLOW_LOOKUP_S": str(args.slow_lookup_s),
            "SOAK_RECOVER_AFTER_S": str(args.recover_after_s),
            "EFFECTLEDGER_LOG_KEY": Signer("soak.example/log", os.urandom(32)).key_string(),
            # A PostgreSQL ledger keeps its trail key in a key directory: one for the soak,
            # made by the first connect() and shared by the admitting side and every worker.
            "EFFECTLEDGER_KEY_DIR": str(folder / "keys"),
        }
        self.env.pop("PYTHONPATH", None)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.kills = 0
        self.exit_codes: list[int] = []
        self.admitted: list[str] = []
        self.done = threading.Event()

    def start_worker(self) -> subprocess.Popen[bytes]:
        script = Path(sys.executable).parent / "effectledger"
        return subprocess.Popen(
            [str(script), "worker", "--db", self.url, "--app", "soak_app:build",
             "--dispatch-threads", "2", "--recovery-threads", "1", "--dispatch-interval", "0.05",
             "--recovery-interval", "0.2", "--seal-interval", "1"],
            cwd=APP_FOLDER, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def admit_all(self) -> None:
        ledger = build(self.url)
        try:
            authority = ledger.authority
            interval = 1.0 / self.args.rate
            start = time.monotonic()
            for index in range(self.args.operations):
                time.sleep(max(0.0, start + index * interval - time.monotonic()))
                proposal = ledger.propose(AGENT, "refund_order", REFUND)
                approval = ledger.approve(REVIEWER, proposal)
                operation = authority.admit(
                    AGENT, proposal.proposal_id, approval_id=approval.approval_id
                )
                self.admitted.append(operation.operation_id)
        finally:
            ledger.close()

    def kill_now_and_then(self) -> None:
        chooser = random.Random(7)
        while not self.done.wait(self.args.kill_every):
            if len(self.workers) < 2:
                continue
            index = chooser.randrange(1, len(self.workers))
            victim = self.workers[index]
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            self.kills += 1
            self.workers[index] = self.start_worker()

    def stop_workers(self) -> None:
        time.sleep(3.0)  # a replacement started by the last kill installs its handlers first
        for worker in self.workers:
            worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            self.exit_codes.append(worker.wait(timeout=120))


def _states(connection: psycopg.Connection[tuple[object, ...]]) -> dict[str, int]:
    rows = connection.execute("SELECT state, count(*) FROM operations GROUP BY state").fetchall()
    return {str(state): int(str(count)) for state, count in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("EFFECTLEDGER_TEST_POSTGRES_URL"))
    parser.add_argument("--operations", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=40.0, help="admissions per second")
    parser.add_argument("--lose-rate", type=float, default=0.1)
    parser.add_argument("--slow-lookup-rate", type=float, default=0.1)
    parser.add_argument("--slow-lookup-s", type=float, default=0.5)
    parser.add_argument("--kill-every", type=float, default=10.0, help="seconds between kills")
    parser.add_argument("--recover-after-s", type=float, default=2.0)
    parser.add_argument("--drain-s", type=float, default=120.0)
    parser.add_argument("--short", action="store_true", help="the CI form: 150 ops, 2 workers")
    args = parser.parse_args()
    if args.short:
        args.operations, args.workers, args.rate, args.kill_every = 150, 2, 30.0, 2.0
        args.drain_s = 90.0
    if not args.url:
        parser.error("give --url or set EFFECTLEDGER_TEST_POSTGRES_URL")
    schema = f"soak_{os.getpid()}"
    url = _schema_url(args.url, schema)
    with tempfile.TemporaryDirectory() as folder:
        try:
            return _run(args, url, schema, Path(folder))
        finally:
            with psycopg.connect(args.url, autocommit=True) as connection:
                connection.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


def _run(args: argparse.Namespace, url: str, schema: str, folder: Path) -> int:
    soak = Soak(args, url, folder)
    for name in ("SOAK_RECEIVER", "EFFECTLEDGER_KEY_DIR"):  # the admitting side's build()
        os.environ[name] = soak.env[name]
    build(url).close()  # migrate once before the workers start
    soak.workers = [soak.start_worker() for _ in range(args.workers)]
    witness = soak.workers[0]
    memory: list[int] = []
    started = time.monotonic()
    admission = threading.Thread(target=soak.admit_all)
    killer = threading.Thread(target=soak.kill_now_and_then, daemon=True)
    admission.start()
    killer.start()
    connection = psycopg.connect(args.url, autocommit=True)
    connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    deadline: float | None = None
    while True:
        time.sleep(1.0)
        states = _states(connection)
        rss = _rss_kb(witness.pid)
        elapsed = time.monotonic() - started
        if rss is not None and elapsed >= WARM_UP_S:
            memory.append(rss)
        print(f"{elapsed:6.1f}s admitted {len(soak.admitted):5d}  states {states}  "
              f"witness RSS {rss} kB  kills {soak.kills}", file=sys.stderr)  # fmt: skip
        if admission.is_alive():
            continue
        deadline = deadline or time.monotonic() + args.drain_s
        if set(states) <= SETTLED or time.monotonic() > deadline:
            break
    soak.done.set()
    killer.join()
    duration = time.monotonic() - started
    soak.stop_workers()

    states = _states(connection)
    events = dict(
        connection.execute(
            "SELECT event_type, count(*) FROM audit_events GROUP BY event_type"
        ).fetchall()
    )
    latencies = [
        (int(str(updated)) - int(str(created))) / 1000
        for created, updated in connection.execute(
            "SELECT created_us, updated_us FROM operations WHERE state = 'SUCCEEDED'"
        ).fetchall()
    ]
    stored = {str(row[0]) for row in connection.execute("SELECT operation_id FROM operations")}
    sealed = connection.execute("SELECT count(*) FROM log_entries").fetchone()
    connection.close()
    from effectledger import SimulatedReceiver

    receiver = SimulatedReceiver(folder / "receiver.db", create=False)
    counts = receiver.counts()
    receiver.close()

    lost = len(set(soak.admitted) - stored)
    uncertain = sum(n for state, n in states.items() if OperationState(state).uncertain)
    checks = {
        "duplicate submissions (receiver replays) == 0": counts.replays == 0,
        "lost operations == 0": lost == 0,
        "nothing left READY": states.get("READY", 0) == 0,
        "effects == SUCCEEDED + uncertain with an effect (<= admitted)": counts.effects
        <= len(soak.admitted),
        "every SUCCEEDED has its effect": states.get("SUCCEEDED", 0) <= counts.effects,
        "workers stopped by SIGTERM exited 0": all(code == 0 for code in soak.exit_codes),
    }
    print(f"duration {duration:.1f} s, operations {len(soak.admitted)}, workers {args.workers}")
    print(f"throughput {states.get('SUCCEEDED', 0) / duration:.1f} SUCCEEDED/s")
    if latencies:
        p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]
        print(f"latency admission->recorded: p50 {statistics.median(latencies):.1f} ms, "
              f"p99 {p99:.1f} ms")  # fmt: skip
    print(f"faults: lost replies {events.get('SubmissionOutcomeUnknown', 0)}, lookups "
          f"{counts.lookups}, kills {soak.kills}")  # fmt: skip
    print(f"states at end {states}; uncertain {uncertain} (visible as uncertain)")
    print(f"receiver: submissions {counts.submissions}, effects {counts.effects}, "
          f"replays {counts.replays}; sealed events {sealed[0] if sealed else 0}")  # fmt: skip
    if memory:
        start, end, peak = memory[0], memory[-1], max(memory)
        print(f"witness worker RSS after {WARM_UP_S:g} s warm-up: start {start} kB, "
              f"end {end} kB, max {peak} kB")  # fmt: skip
    print(f"duplicates {counts.replays}, lost {lost}; worker exit codes {soak.exit_codes}")
    for name, passed in checks.items():
        print(f"{'ok  ' if passed else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
