"""Replay cost per caller: a repeated perform on a SUCCEEDED operation, beside the direct path.

Run it from the repository root (the ``mcp`` extra installed)::

    .venv/bin/python benchmarks/callers_replay.py [--store URL] [--replays N] [--mcp-replays N]

One refund is proposed, approved and performed once; then the same perform is repeated through

* ``direct``: ``EffectLedger.perform`` in process, the public Python API (one ledger read,
  nothing sent);
* ``service``: ``EffectLedger.perform``, the layer beneath it, for reference;
* ``tool``: ``FunctionTools(ledger).call`` with the JSON text a model sends, answered with the
  text the model reads (parse, check, the same ledger call, ``to_dict``, JSON, guidance);
* ``mcp``: the SDK's client calling ``perform_proposal`` on the MCP server over streamable HTTP
  on 127.0.0.1 (bearer-token authentication, JSON-RPC, the thread hop to the ledger);
* ``mcp floor``: the same client, server class, authentication and transport calling a tool that
  returns a result of the same size without touching the ledger: the transport's own cost.

It prints p50/p99/mean per call (µs) and bytes allocated per call (tracemalloc's peak above the
baseline during the call; for MCP it covers client and server, both in this process). Direct,
service and tool alternate in rounds, and the two MCP servers in blocks of 50 calls, so drift
slows each alike; the tool/direct ratio is the median of the per-round p50 ratios. Target: tool
<= 1.3 x direct. Every path is checked to report ``replayed`` / ``SUCCEEDED`` with exactly one
effect at the receiver.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx2
from allocation import peak_bytes_per_call
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import CallToolResult, TextContent
from pydantic import AnyHttpUrl

from effectledger import Context, DestinationRef, EffectLedger, LedgerSettings, SimulatedReceiver
from effectledger.callers.mcp import (
    TokenIdentities,
    _RawArguments,
    build_server,
    serve_http_in_thread,
)
from effectledger.callers.tools.function_tools import FunctionTools
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.store import open_store as open_ledger_store

TOOL_RATIO_TARGET = 1.3
AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
REVIEWER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
TOKEN = "bench-token"


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


@dataclass(frozen=True)
class Figures:
    """Latency (µs) and allocation (bytes) per call of one path."""

    p50_us: float
    p99_us: float
    mean_us: float
    peak_bytes: float

    def line(self, label: str) -> str:
        return (
            f"  {label:<10} p50 {self.p50_us:9.1f} µs  p99 {self.p99_us:9.1f} µs  "
            f"mean {self.mean_us:9.1f} µs  allocated {self.peak_bytes:10,.0f} B/call"
        )


def _summarise(samples: list[float], peak_bytes: float) -> Figures:
    samples.sort()
    return Figures(
        p50_us=percentile(samples, 0.50),
        p99_us=percentile(samples, 0.99),
        mean_us=statistics.fmean(samples),
        peak_bytes=peak_bytes,
    )


def time_calls(call: Callable[[], object], count: int) -> list[float]:
    """``count`` timed calls one by one, in µs."""
    samples: list[float] = []
    clock = time.perf_counter_ns
    gc.collect()
    for _ in range(count):
        started = clock()
        call()
        samples.append((clock() - started) / 1000)
    return samples


def build_ledger(store_url: str, directory: Path) -> tuple[EffectLedger, SimulatedReceiver]:
    """The refund ledger over ``store_url`` and a receiver file in ``directory``."""
    receiver = SimulatedReceiver(directory / "receiver.db", synchronous="NORMAL")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ledger = EffectLedger(open_ledger_store(store_url), settings=LedgerSettings())
    ledger.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return ledger, receiver


def floor_server(result: CallToolResult, url: str) -> MCPServer[Any]:
    """The same server class, authentication and argument handling, with a ledger-free tool."""

    async def perform_proposal(arguments: dict[str, Any]) -> CallToolResult:
        return result

    tool = Tool(
        fn=perform_proposal,
        name="perform_proposal",
        title=None,
        description="floor",
        parameters={"type": "object"},
        fn_metadata=FuncMetadata(arg_model=_RawArguments),
        is_async=True,
        annotations=None,
    )
    identities = TokenIdentities.from_tokens({TOKEN: AGENT})
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(url),
        resource_server_url=AnyHttpUrl(url),
        validate_token_resource=False,
    )
    return MCPServer(
        "floor", token_verifier=identities, auth=auth, tools=[tool], log_level="WARNING"
    )


def measure_mcp(
    urls: dict[str, str], arguments: dict[str, str], count: int, block: int = 50
) -> tuple[dict[str, Figures], CallToolResult]:
    """Timed ``tools/call`` round trips, one authenticated session per server, alternating.

    The servers take turns in blocks of ``block`` calls, so load that comes and goes on the
    machine slows each of them alike. Returns the figures per name and the last ``mcp`` result.
    """
    outcome: dict[str, Any] = {"figures": {}}

    async def run() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with contextlib.AsyncExitStack() as stack:
            calls: dict[str, Callable[[], Awaitable[CallToolResult]]] = {}
            for name, url in urls.items():
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0))
                )
                client = await stack.enter_async_context(
                    Client(streamable_http_client(url, http_client=http))
                )
                calls[name] = functools.partial(client.call_tool, "perform_proposal", arguments)
            samples: dict[str, list[float]] = {name: [] for name in calls}
            for name, call in calls.items():
                for _ in range(min(200, count)):
                    outcome[name] = await call()
            for _ in range(0, count, block):
                for name, call in calls.items():
                    samples[name] += await _time_async(call, block)
            for name, call in calls.items():
                peak = await _peak_async(call, max(50, count // 10))
                outcome["figures"][name] = _summarise(samples[name], peak)

    anyio.run(run)
    return outcome["figures"], outcome["mcp"]


async def _time_async(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    samples: list[float] = []
    clock = time.perf_counter_ns
    gc.collect()
    for _ in range(count):
        started = clock()
        await call()
        samples.append((clock() - started) / 1000)
    return samples


async def _peak_async(call: Callable[[], Awaitable[object]], count: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        peaks = 0
        for _ in range(count):
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            await call()
            _, peak = tracemalloc.get_traced_memory()
            peaks += peak - before
    finally:
        tracemalloc.stop()
    return peaks / count


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures; exit 1 if a path misreports or makes an effect."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="ledger store URL (default: SQLite in a temporary folder)")
    parser.add_argument("--replays", type=int, default=5000, help="replays per round, in process")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--mcp-replays", type=int, default=1000, help="MCP round trips")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        store_url = args.store or f"sqlite:///{directory / 'ledger.db'}"
        ledger, receiver = build_ledger(store_url, directory)
        try:
            return run(args, ledger, receiver, store_url)
        finally:
            ledger.close()
            receiver.close()


def run(
    args: argparse.Namespace, ledger: EffectLedger, receiver: SimulatedReceiver, store: str
) -> int:
    """Set up one SUCCEEDED operation and measure every path against it."""
    refund = {"order_id": "ord-1", "amount_minor": 30, "currency": "EUR"}
    proposal = ledger.propose(AGENT, "refund_order", refund)
    approval = ledger.approve(REVIEWER, proposal)
    first = ledger.perform(AGENT, proposal, approval=approval)
    assert first.outcome == "performed", first
    ids = {"proposal_id": proposal.proposal_id, "approval_id": approval.approval_id}
    text = json.dumps(ids)
    tools = FunctionTools(ledger)
    service = ledger

    def direct() -> object:
        return ledger.perform(AGENT, proposal, approval=approval)

    def beneath() -> object:
        return service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)

    def tool() -> object:
        return tools.call(AGENT, "perform_proposal", text).text

    paths = {"direct": direct, "service": beneath, "tool": tool}
    for name, call in paths.items():
        for _ in range(1000):
            call()
        print(f"warmed {name}", file=sys.stderr)
    samples: dict[str, list[float]] = {name: [] for name in paths}
    ratios: list[float] = []
    service_ratios: list[float] = []
    for round_number in range(args.rounds):
        medians = {}
        for name, call in paths.items():
            timed = time_calls(call, args.replays)
            medians[name] = statistics.median(timed)
            samples[name] += timed
        ratios.append(medians["tool"] / medians["direct"])
        service_ratios.append(medians["tool"] / medians["service"])
        print(f"round {round_number + 1}/{args.rounds}: ratio {ratios[-1]:.3f}", file=sys.stderr)
    direct_figures = _summarise(samples["direct"], peak_bytes_per_call(direct, 2000))
    service_figures = _summarise(samples["service"], peak_bytes_per_call(beneath, 2000))
    tool_figures = _summarise(samples["tool"], peak_bytes_per_call(tool, 2000))
    replay = tools.call(AGENT, "perform_proposal", text)

    floor_result = CallToolResult(
        content=[TextContent(type="text", text=replay.text)], structured_content=replay.data
    )
    identities = TokenIdentities.from_tokens({TOKEN: AGENT})
    with contextlib.ExitStack() as stack:
        urls = {
            "mcp": stack.enter_context(
                serve_http_in_thread(
                    lambda u: build_server(ledger, identities=identities, server_url=u)
                )
            ),
            "floor": stack.enter_context(
                serve_http_in_thread(lambda u: floor_server(floor_result, u))
            ),
        }
        figures, mcp_last = measure_mcp(urls, ids, args.mcp_replays)
    mcp_figures, floor_figures = figures["mcp"], figures["floor"]

    checks = {
        "direct": ledger.perform(AGENT, proposal, approval=approval).to_dict(),
        "tool": replay.data,
        "mcp": mcp_last.structured_content,
    }
    effects = receiver.counts().effects
    problems = [
        name
        for name, data in checks.items()
        if (data["outcome"], data["state"]) != ("replayed", "SUCCEEDED")
    ]
    ratio = statistics.median(ratios)
    verdict = "met" if ratio <= TOOL_RATIO_TARGET else "MISSED"
    above_floor = mcp_figures.p50_us - floor_figures.p50_us
    lines = [
        f"replay of a SUCCEEDED perform, store {store.split(':', 1)[0]}, {args.rounds} rounds x "
        f"{args.replays} in process, {args.mcp_replays} over MCP streamable HTTP",
        direct_figures.line("direct"),
        service_figures.line("service"),
        tool_figures.line("tool"),
        mcp_figures.line("mcp"),
        floor_figures.line("mcp floor"),
        f"  tool / direct (median of per-round p50 ratios): {ratio:.3f} "
        f"(target <= {TOOL_RATIO_TARGET}: {verdict}); tool / service "
        f"{statistics.median(service_ratios):.3f}",
        f"  mcp transport's own cost (floor p50): {floor_figures.p50_us:.1f} µs; mcp above its "
        f"floor: {above_floor:.1f} µs (direct ledger p50 {direct_figures.p50_us:.1f} µs)",
        f"  receiver effects: {effects}; every path reported replayed/SUCCEEDED: {not problems}",
    ]
    print("\n".join(lines))
    return 0 if effects == 1 and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
