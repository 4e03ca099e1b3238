"""Benchmark the lifecycle through the HTTP destination beside the simulated receiver, same run.

Run it from the repository root (needs the ``http`` and ``receiver`` extras)::

    .venv/bin/python benchmarks/http_destination.py [--dir DIR] [--ops N] [--rounds N]
        [--store URL]

The reference receiver runs in a child process (uvicorn on 127.0.0.1, its own SQLite file), so
client and server do not share an interpreter. In each round, blocks of 50 operations alternate
between:

* **http lifecycle**: admit -> claim -> HTTP submit (``Idempotency-Key``, bearer token from the
  environment, evidence captured and stored) -> record, through the real ledger and executor;
* **http floor**: the same POST with a fresh key sent with plain ``httpx`` on one kept-alive
  connection — the transport's and the receiver's own limit, without the ledger;
* **simulated lifecycle**: the same lifecycle with the in-process simulated receiver.

It prints operations per second for each (median over rounds), the ratio of the HTTP lifecycle
to the HTTP floor and to the simulated lifecycle. With the ledger on an SQLite file at
synchronous=FULL, both lifecycles are bound by the ledger's durable commits (see
``benchmarks/ledger_sqlite.py`` for that floor), not by HTTP. Every loop is bounded by ``--ops``
and ``--rounds``; the child is stopped at the end. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from effectledger import Command, Context, DestinationRef, OperationState, SimulatedReceiver
from effectledger.destinations.http import HttpDestination
from effectledger.destinations.secrets import env_secret
from effectledger.ledger import Ledger
from effectledger.receiver.contract import reference_destination
from effectledger.store import open_store
from effectledger.workers import Executor

BLOCK = 50
START_TIMEOUT_S = 20.0
TOKEN_VARIABLE = "EFFECTLEDGER_BENCH_RECEIVER_TOKEN"
CONTEXT = Context(tenant_id="acme", actor_id="alice")
COMMAND = Command(
    action="send_support_reply",
    contract_version="reply-v1",
    arguments={"recipient": "customer@example.com", "body": "Your refund is on its way."},
)
_SERVER = (
    "import sys\n"
    "from effectledger.receiver.server import run_receiver\n"
    "run_receiver(sys.argv[1], port=int(sys.argv[2]), token=sys.argv[3])\n"
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_receiver(db: Path, token: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start the reference receiver in a child process; wait until it answers."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(db), str(port), token],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            httpx.get(f"{url}/_receiver/stats", timeout=1).raise_for_status()
            return child, url
        except httpx.HTTPError:
            if time.monotonic() > deadline or child.poll() is not None:
                child.kill()
                raise SystemExit("the reference receiver did not start") from None
            time.sleep(0.1)


class Lifecycle:
    """admit -> execute through one destination, operation ids numbered from a prefix."""

    def __init__(self, ledger: Ledger, destination: HttpDestination | SimulatedReceiver) -> None:
        self.ledger = ledger
        self.executor = Executor(ledger, destination)
        self.bound = DestinationRef(
            account_id=destination.account_id, endpoint=destination.endpoint
        )

    def run(self, prefix: str, numbers: range) -> None:
        """Take operations ``numbers`` through their whole lifecycle."""
        for number in numbers:
            operation_id = f"{prefix}-{number}"
            self.ledger.admit(
                CONTEXT,
                operation_id=operation_id,
                revision="rev-1",
                command=COMMAND,
                destination=self.bound,
                admission_reference=f"approval/{operation_id}",
            )
            result = self.executor.execute(CONTEXT, operation_id)
            if result.state is not OperationState.SUCCEEDED:  # pragma: no cover - a broken run
                raise SystemExit(f"{operation_id} ended {result.state}")


class Floor:
    """The same POST as the destination sends, with plain httpx on one connection."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})
        self.body = (
            b'{"action":"send_support_reply","arguments":{"body":"Your refund is on its way.",'
            b'"recipient":"customer@example.com"}}'
        )

    def run(self, prefix: str, numbers: range) -> None:
        """Send one request per number, each under a fresh key."""
        for number in numbers:
            answer = self.client.post(
                "/v1/effects",
                content=self.body,
                headers={
                    "Idempotency-Key": f"{prefix}-{number}",
                    "Content-Type": "application/json",
                },
            )
            if answer.status_code != 201:  # pragma: no cover - a broken run
                raise SystemExit(f"floor request answered {answer.status_code}")


def timed(run: Callable[[str, range], None], prefix: str, numbers: range) -> float:
    """Seconds taken by ``run(prefix, numbers)``."""
    started = time.perf_counter()
    run(prefix, numbers)
    return time.perf_counter() - started


def main() -> int:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="folder for the files (a temp dir)")
    parser.add_argument("--ops", type=int, default=300, help="operations per kind per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median reported)")
    parser.add_argument("--store", default=None, help="ledger store URL (default: SQLite file)")
    args = parser.parse_args()
    if not 1 <= args.ops <= 20_000 or not 1 <= args.rounds <= 20:
        raise SystemExit("--ops must be 1..20000 and --rounds 1..20")
    folder = args.dir or Path(tempfile.mkdtemp(prefix="effectledger-bench-http-"))
    folder.mkdir(parents=True, exist_ok=True)
    token = os.urandom(16).hex()
    os.environ[TOKEN_VARIABLE] = token
    child, url = start_receiver(folder / "receiver.db", token)
    rates: dict[str, list[float]] = {"http": [], "floor": [], "simulated": []}
    try:
        for round_number in range(1, args.rounds + 1):
            store = open_store(args.store or f"sqlite:///{folder / f'ledger-{round_number}.db'}")
            ledger = Ledger(store)
            http = reference_destination(
                url, token=env_secret(TOKEN_VARIABLE, "Bearer {secret}"), submit_deadline_s=10.0
            )
            simulated = SimulatedReceiver(folder / f"simulated-{round_number}.db")
            kinds: dict[str, Callable[[str, range], None]] = {
                "http": Lifecycle(ledger, http).run,
                "floor": Floor(url, token).run,
                "simulated": Lifecycle(ledger, simulated).run,
            }
            spent = dict.fromkeys(kinds, 0.0)
            for start in range(0, args.ops, BLOCK):
                numbers = range(start, min(args.ops, start + BLOCK))
                for kind, run in kinds.items():
                    spent[kind] += timed(run, f"r{round_number}-{kind}", numbers)
            for kind in kinds:
                rates[kind].append(args.ops / spent[kind])
            sys.stderr.write(
                f"  round {round_number}: "
                + ", ".join(f"{kind} {rates[kind][-1]:.0f}/s" for kind in kinds)
                + "\n"
            )
            http.close()
            simulated.close()
            store.close()
    finally:
        child.terminate()
        child.wait(timeout=15)
    if args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    median = {kind: statistics.median(values) for kind, values in rates.items()}
    backend = "SQLite file" if args.store is None else "--store URL"
    print(f"platform: {platform.platform()}, python {platform.python_version()}")
    print(f"cpus: {os.cpu_count()}, ledger: {backend}")
    print(f"ops per kind per round: {args.ops}, rounds: {args.rounds} (median reported)")
    rows = [
        ("http lifecycle (ledger + HttpDestination + receiver)", median["http"]),
        ("http floor (plain httpx POST to the same receiver)", median["floor"]),
        ("simulated lifecycle (ledger + SimulatedReceiver)", median["simulated"]),
    ]
    for label, rate in rows:
        print(f"{label:<56}{rate:8.0f} ops/s")
    print(f"{'http lifecycle / http floor':<56}{median['http'] / median['floor']:8.2f}")
    print(
        f"{'http lifecycle / simulated lifecycle':<56}{median['http'] / median['simulated']:8.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
