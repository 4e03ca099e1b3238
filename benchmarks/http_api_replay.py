"""Benchmark a repeated perform over the HTTP API, beside the direct call, in the same run.

Run it from the repository root (the ``server`` extra installed)::

    .venv/bin/python benchmarks/http_api_replay.py [--db URL] [--replays N] [--rounds N]

One refund is proposed, approved and performed once (SUCCEEDED, one receiver effect). Then, on
the same ledger, each path repeats the perform of that operation and must get ``replayed`` /
``SUCCEEDED``; the receiver's effect count is checked to still be one at the end. It prints, per
path, latency p50/p99 (µs) and bytes allocated per call (tracemalloc's peak above the baseline,
process-wide: the server runs in a thread of this process, so client and server are both in it):

* ``direct``: ``EffectLedger.perform`` called in-process (the ledger's own cost);
* ``http perform``: ``POST /v1/proposals/{id}/perform`` with an API key, over one kept-alive
  connection to uvicorn on 127.0.0.1 (a real socket);
* the transport's own cost on the same server and connection, no ledger involved:
  ``http livez`` (GET, no body, no key), ``http trivial`` (POST of the same body, parsed into
  the same request model, the same size of answer) and ``http trivial+key`` (that, plus the API
  key check: one indexed read of the key row).

``ledger share`` is ``http perform`` minus ``http trivial+key``: what the ledger adds behind the
transport; compare it with ``direct``. Paths alternate round by round so drift affects all alike.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
import uvicorn
from allocation import peak_bytes_per_call
from fastapi import Depends
from fastapi.responses import JSONResponse

from effectledger import Context, DestinationRef, EffectLedger, SimulatedReceiver
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import authenticated, create_app
from effectledger.callers.http.models import PerformRequest
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
REVIEWER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
REFUND = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR", "reason": "damaged"}


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free port of 127.0.0.1 in a thread; yield its base URL."""
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it, and without
    # it every small response waits out a delayed ACK (about 40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def time_calls(call: Callable[[], object], count: int) -> list[float]:
    """Microseconds of each of ``count`` calls."""
    samples = []
    for _ in range(count):
        start = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def build(store_url: str, folder: Path) -> tuple[EffectLedger, SimulatedReceiver, ApiKeys]:
    """A refund ledger over ``store_url`` with a simulated receiver in ``folder``."""
    receiver = SimulatedReceiver(folder / "receiver.db", synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ledger = EffectLedger(open_store(store_url))
    ledger.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return ledger, receiver, ApiKeys(ledger.store)


def add_transport_floors(app: Any) -> None:
    """Routes with the API's own machinery and no ledger: the transport's cost alone."""
    fastapi_app = app.app
    answer = {
        "outcome": "replayed",
        "operation_id": "op-" + "0" * 32,
        "state": "SUCCEEDED",
        "reason": None,
        "provider_reference": "rcpt-" + "0" * 20,
        "uncertain": False,
        "trace": [["request", "received"], ["tenant", "accepted"]],
    }

    @fastapi_app.post("/bench/trivial", include_in_schema=False)
    def trivial(body: PerformRequest) -> JSONResponse:
        return JSONResponse(answer)

    @fastapi_app.post("/bench/trivial-key", include_in_schema=False)
    def trivial_key(
        context: Annotated[Context, Depends(authenticated)], body: PerformRequest
    ) -> JSONResponse:
        return JSONResponse(answer)


def main() -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="store URL (default: a new SQLite file, synchronous=FULL)")
    parser.add_argument("--replays", type=int, default=400, help="calls per path per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--allocations", type=int, default=200, help="calls traced per path")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="el-http-bench-"))
    store_url = args.db or f"sqlite:///{folder / 'ledger.db'}"
    ledger, receiver, keys = build(store_url, folder)
    token = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"]).token
    proposal = ledger.propose(AGENT, "refund_order", REFUND)
    approval = ledger.approve(REVIEWER, proposal)
    first = ledger.perform(AGENT, proposal, approval=approval)
    assert (first.outcome, first.state) == ("performed", "SUCCEEDED"), first
    app = create_app(ledger, keys)
    add_transport_floors(app)
    body = {"approval_id": approval.approval_id}
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with serving(app) as base, httpx.Client(base_url=base) as client:

            def direct() -> None:
                result = ledger.perform(AGENT, proposal, approval=approval)
                assert result.outcome == "replayed"

            def http_perform() -> None:
                response = client.post(
                    f"/v1/proposals/{proposal.proposal_id}/perform", json=body, headers=headers
                )
                assert response.json()["outcome"] == "replayed", response.text

            def livez() -> None:
                assert client.get("/livez").status_code == 200

            def trivial() -> None:
                assert client.post("/bench/trivial", json=body).status_code == 200

            def trivial_key() -> None:
                response = client.post("/bench/trivial-key", json=body, headers=headers)
                assert response.status_code == 200

            paths = {
                "direct": direct,
                "http perform": http_perform,
                "http livez": livez,
                "http trivial": trivial,
                "http trivial+key": trivial_key,
            }
            for call in paths.values():  # warm-up: connections, caches, code paths
                time_calls(call, 100)
            samples: dict[str, list[float]] = {name: [] for name in paths}
            for round_number in range(args.rounds):
                order = list(paths.items())
                if round_number % 2:
                    order.reverse()
                for name, call in order:
                    samples[name].extend(time_calls(call, args.replays))
                print(f"  round {round_number + 1}/{args.rounds}", file=sys.stderr)
            allocations = {
                name: peak_bytes_per_call(call, args.allocations) for name, call in paths.items()
            }
        assert receiver.counts().effects == 1, "a replay made a second effect"
    finally:
        ledger.close()
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"effectledger HTTP replay benchmark on {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, store {store_url.split(':')[0]}"
    )
    print(
        f"{args.rounds} rounds x {args.replays} calls per path; allocations over "
        f"{args.allocations} calls\n"
    )
    print(f"{'path':<18} {'p50 µs':>9} {'p99 µs':>9} {'bytes/call':>11}")
    for name, values in samples.items():
        print(
            f"{name:<18} {percentile(values, 0.5):>9.0f} {percentile(values, 0.99):>9.0f} "
            f"{allocations[name]:>11.0f}"
        )
    p50 = {name: percentile(values, 0.5) for name, values in samples.items()}
    share = p50["http perform"] - p50["http trivial+key"]
    print(
        f"\nledger behind HTTP (perform - trivial+key, p50): {share:+.0f} µs; the direct call "
        f"takes {p50['direct']:.0f} µs = {p50['direct'] / p50['http perform']:.1%} of an HTTP "
        "replay, so the difference is the transport's own noise when it is near or below that"
    )
    print(
        f"transport (trivial+key, p50): {p50['http trivial+key']:.0f} µs; "
        f"HTTP perform / direct: {p50['http perform'] / p50['direct']:.0f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
