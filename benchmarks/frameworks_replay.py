"""Replay cost per agent framework, beside the direct ``perform`` replay and the bare loop.

Run it from the repository root (the four framework extras installed)::

    .venv/bin/python benchmarks/frameworks_replay.py [--store URL] [--rounds N] [--calls N]

For each framework, a scripted model's refund is paused in the framework's own loop, proposed,
approved and performed once by resuming the saved state; then the same saved state is resumed
again and again (each answers ``replayed``, no new effect). Measured per call, in rounds that
alternate the paths (a framework and its floor call by call) so drift slows each alike:

* ``direct perform``: ``EffectLedger.perform`` repeated in process (one ledger read, nothing
  sent);
* ``gate``: the adapters' ledger gate alone (reread the proposal, compare, perform);
* ``<framework>``: the resume through the framework and its adapter: the saved state loaded,
  the framework's approval applied, the tool dispatched, the ledger's gate (reread the
  proposal, compare, perform → ``replayed``) and the model's next turn;
* ``<framework> floor``: the same resume with the ledger's gate replaced by a function that
  returns the recorded result: the framework's own loop without the ledger.

It prints p50 and mean (µs) per call and the ledger's share: (framework - floor) / framework.
Every replay is checked to report ``replayed`` with exactly one effect at the receiver.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, build_world
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS

from effectledger import EffectResult, ManualClock
from effectledger.callers.frameworks.gate import Grant, LedgerGate


@contextmanager
def gate_answers(result: EffectResult) -> Iterator[None]:
    """Every ledger gate answers ``result`` at once: the framework's loop without the ledger."""
    original = LedgerGate.perform

    def recorded(self: LedgerGate, *args: object, **kwargs: object) -> EffectResult:
        return result

    LedgerGate.perform = recorded  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        LedgerGate.perform = original  # type: ignore[method-assign]


def timed(call: Callable[[], object], calls: int) -> list[float]:
    """Seconds per call of ``calls`` calls."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="ledger URL (default: a fresh SQLite file)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    options = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="el-frameworks-bench-"))
    url = options.store or f"sqlite:///{directory / 'ledger.db'}"
    world = build_world(url, directory, ManualClock())
    samples: dict[str, list[float]] = {}
    try:
        resumes = {}
        recorded: EffectResult | None = None
        for number, framework in enumerate(FRAMEWORKS):
            driver = DRIVERS[framework](world.app)
            arguments = {**REFUND_30, "order_id": f"ord-{1001 + number}"}
            world.orders.change("acme", arguments["order_id"])  # a known resource version
            paused = driver.pause(AGENT, arguments, f"bench-{framework}")
            proposal = driver.propose(AGENT, paused)
            world.app.approve(REVIEWER, proposal)
            grant = Grant.of(proposal)
            assert driver.resume(paused, AGENT, grant)["outcome"] == "performed"
            assert driver.resume(paused, AGENT, grant)["outcome"] == "replayed"
            resumes[framework] = lambda d=driver, p=paused, g=grant: d.resume(p, AGENT, g)
            recorded = world.app.perform(AGENT, proposal)
            assert recorded.outcome == "replayed"
        assert recorded is not None
        gate = LedgerGate(world.app, "refund_order", framework="benchmark")
        arguments = dict(proposal.arguments)
        for _ in range(options.rounds):
            samples.setdefault("direct perform", []).extend(
                timed(lambda: world.app.perform(AGENT, proposal), options.calls)
            )
            samples.setdefault("gate (reread + perform)", []).extend(
                timed(
                    lambda: gate.perform(
                        AGENT, grant, tool_name="refund_order", arguments=arguments
                    ),
                    options.calls,
                )
            )
            for framework, resume in resumes.items():
                # one call each in turn, so a framework's growing state slows both alike
                for call in range(options.calls):
                    for floor in (False, True) if call % 2 else (True, False):
                        name = f"{framework} floor" if floor else framework
                        with gate_answers(recorded) if floor else contextlib.nullcontext():
                            samples.setdefault(name, []).extend(timed(resume, 1))
        assert world.receiver.counts().effects == len(FRAMEWORKS)
    finally:
        world.close()
    print(f"store: {url.split(':', 1)[0]}  rounds: {options.rounds} x {options.calls} calls")
    print(f"{'path':<26}{'p50 µs':>10}{'mean µs':>10}{'ledger share':>14}")
    for path, values in samples.items():
        p50 = statistics.median(values) * 1e6
        mean = statistics.fmean(values) * 1e6
        share = ""
        if path in resumes:
            floor = statistics.median(samples[f"{path} floor"]) * 1e6
            share = f"{(p50 - floor) / p50:>13.0%}"
        print(f"{path:<26}{p50:>10.0f}{mean:>10.0f}{share:>14}")


if __name__ == "__main__":
    main()
