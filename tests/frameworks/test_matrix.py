"""The acceptance matrix through each framework's own loop, held to the direct caller's record.

The model's side runs in the framework (a scripted model calls the refund tool and the
framework pauses for approval); the host proposes the paused call as its context, and
performing is resuming the saved state with that context and the grant. Each (scenario,
framework) pair runs from fresh databases on each backend and must leave exactly the
scenario's expected results, receiver effects, units, approval consumption and trail.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from effectledger import Context, EffectLedger, EffectLedgerError
from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import JSON, SCENARIOS, Scenario, fresh_world, play
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS, Answered, Paused


class FrameworkCaller:
    """A scenario caller whose propose pauses the framework and whose perform resumes it."""

    def __init__(self, framework: str, app: EffectLedger) -> None:
        self.name = framework
        self.app = app
        self.driver = DRIVERS[framework](app)
        self.paused: dict[str, tuple[Paused, str]] = {}
        self.last: Paused | None = None
        self.calls = itertools.count(1)
        self.lock = threading.Lock()
        # LangGraph hands a resume of the thread's latest checkpoint the writes another run made
        # there: concurrent resumes may be given the one performed answer (docs/frameworks.md).
        self.hands_back_answers = framework == "langgraph"

    def propose(self, context: Context, arguments: Mapping[str, Any]) -> JSON:
        call_id = f"call-{next(self.calls)}"
        try:
            paused = self.driver.pause(context, arguments, call_id)
            proposal = self.driver.propose(context, paused)
        except EffectLedgerError as exc:
            return {"error": exc.to_dict()}
        except Answered as answered:
            return answered.answer
        self.paused[proposal.proposal_id] = (paused, proposal.digest)
        self.last = paused
        return {
            "outcome": "proposed",
            "proposal_id": proposal.proposal_id,
            "operation_id": proposal.operation_id,
            "digest": proposal.digest,
        }

    def perform(
        self,
        context: Context,
        proposal_id: str,
        approval_id: str | None,
        tenant_id: str | None = None,
    ) -> JSON:
        paused, digest = self.paused.get(proposal_id, (self.last, ""))
        assert paused is not None
        grant = Grant(
            proposal_id=proposal_id, digest=digest, approval_id=approval_id, tenant_id=tenant_id
        )
        return self.driver.resume(paused, context, grant)

    def status(self, context: Context, operation_id: str) -> JSON:
        return {"outcome": "recorded", **self.app.status(context, operation_id).to_dict()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_through_framework(
    scenario: Scenario, framework: str, store_url: str, tmp_path: Path
) -> None:
    """The scenario leaves the direct caller's results, receiver effects, units and trail."""
    with fresh_world(store_url, tmp_path / framework) as world:
        observed = play(scenario, world, FrameworkCaller(framework, world.app))
    assert observed == scenario.expected
