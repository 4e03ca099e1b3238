"""16 performers sharing commits (group commit on) in a child SIGKILLed mid-flight lose nothing.

The child (:mod:`tests.faults.group_performer`) performs 16 approved refunds from 16 threads
released together; it is killed right after a batch of two or more writes committed, before
anyone was answered or anything sent (``after_group_commit``), or right after a destination's
reply, before its record (``after_reply``). A survivor then judges the durable facts: every
operation is recorded or left IN_PROGRESS for recovery, no caller was told of anything not
durable, and after recovery (which asks the destination, never resends) and the agent's retries
every refund is SUCCEEDED with one effect at the receiver, by its own count, or, claimed and
never sent, in MANUAL_REVIEW with none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from effectledger import EffectLedger, OperationState, SimulatedReceiver
from effectledger.events.chain import verify_chain
from effectledger.model.authority import Proposal
from tests.conftest import count_rows, with_options
from tests.faults._harness import CHILD_TIMEOUT_S, CRASH_ENV, SIGKILLED
from tests.races.world import AGENT, REFUND_30, approver, build, close

PERFORMERS = 16
ROOT = Path(__file__).resolve().parents[2]
UNSETTLED = "state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')"
SETTLED = {OperationState.SUCCEEDED: 1, OperationState.MANUAL_REVIEW: 0}
"""Where each refund ends, and its effects at the receiver."""


def grouped(store_url: str) -> str:
    """``store_url`` with group commit on (whatever the test run's own setting)."""
    if "group_commit=" in store_url:
        return store_url
    if store_url.startswith("sqlite:"):
        return f"{store_url}?group_commit=on"
    return with_options(store_url, group_commit="on")


def _propose(service: EffectLedger) -> list[tuple[Proposal, str]]:
    made = []
    for index in range(PERFORMERS):
        arguments = {**REFUND_30, "order_id": f"ord-{5000 + index}"}
        proposal = service.propose(AGENT, "refund_order", arguments)
        approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
        made.append((proposal, approval.approval_id))
    return made


def _kill_at(point: str, url: str, folder: Path, calls: list[list[str]]) -> list[str]:
    """Run the child armed at ``point``; check it was SIGKILLed; return its printed lines."""
    calls_file = folder / "calls.json"
    calls_file.write_text(json.dumps(calls), "utf-8")
    env = {**os.environ, CRASH_ENV: point}
    child = subprocess.run(
        [sys.executable, "-m", "tests.faults.group_performer", "--store", url,
         "--folder", str(folder), "--calls", str(calls_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert child.returncode == SIGKILLED, (child.returncode, child.stdout, child.stderr)
    return child.stdout.splitlines()


def _receiver(folder: Path) -> SimulatedReceiver:
    return SimulatedReceiver(folder / "receiver.db", synchronous="NORMAL")


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_group_commit", "after_reply"])
def test_sixteen_grouped_performers_killed_lose_nothing_and_double_nothing(
    point: str, store_url: str, tmp_path: Path
) -> None:
    """After the kill every operation is recorded or IN_PROGRESS and every answered perform is
    durable; recovery and retries settle all 16, each with one effect or, never sent, none."""
    url = grouped(store_url)
    service = build(url, tmp_path)
    made = _propose(service)
    close(service)
    lines = _kill_at(point, url, tmp_path, [[p.proposal_id, a] for p, a in made])

    operations = count_rows(url, "operations")
    assert operations >= 1
    succeeded = count_rows(url, "operations", "state = 'SUCCEEDED'")
    # Nothing admitted is lost between the commit and the send: claimed, or already recorded.
    assert count_rows(url, "operations", "state = 'IN_PROGRESS'") + succeeded == operations
    assert count_rows(url, "attempts") == operations
    assert count_rows(url, "approval_consumptions") == operations
    answered = {line.split()[1] for line in lines if line.startswith("performed ")}
    durable = {row[0] for row in _rows(url, "SELECT proposal_id FROM proposals")}
    assert answered <= durable
    for proposal, _ in made:  # a caller was told SUCCEEDED only of a durable SUCCEEDED row
        if proposal.proposal_id in answered:
            where = f"operation_id = '{proposal.operation_id}' AND state = 'SUCCEEDED'"
            assert count_rows(url, "operations", where) == 1
    receiver = _receiver(tmp_path)
    try:
        effects_at_kill = receiver.counts().effects
        if point == "after_group_commit":
            assert operations >= 2  # the point is reached only by a batch of two or more
        else:
            assert effects_at_kill > succeeded  # one effect at least was sent and not recorded
    finally:
        receiver.close()

    survivor = build(url, tmp_path)
    try:
        clock = survivor.ledger.clock
        for _ in range(12):  # recovery asks the receiver about each unanswered attempt
            if count_rows(url, "operations", UNSETTLED) == 0:
                break
            clock.advance(survivor.ledger.settings.recover_after)  # type: ignore[attr-defined]
            assert survivor.recover().failed == []
        assert count_rows(url, "operations", UNSETTLED) == 0
        for proposal, approval_id in made:  # the agent retries every call it was not answered
            result = survivor.perform(AGENT, proposal.proposal_id, approval=approval_id)
            assert result.state in SETTLED, result
        receiver = survivor.destinations[next(iter(survivor.destinations))]
        for proposal, _ in made:
            operation = survivor.ledger.get(AGENT, proposal.operation_id)
            verify_chain(survivor.ledger.events(AGENT, operation.operation_id))
            # Sent once and recorded, or claimed and never sent: recovery never resends, so an
            # attempt nobody can prove was sent waits in review, its one effect never doubled.
            effects = receiver.effects_for(operation.idempotency_key)  # type: ignore[attr-defined]
            assert effects == SETTLED[operation.state], (operation.state, effects)
    finally:
        close(survivor)
    assert count_rows(url, "operations") == PERFORMERS  # nothing lost: every proposal admitted
    assert count_rows(url, "attempts") == PERFORMERS
    assert count_rows(url, "approval_consumptions") == PERFORMERS
    receiver = _receiver(tmp_path)
    try:
        assert receiver.counts().effects == count_rows(url, "operations", "state = 'SUCCEEDED'")
    finally:
        receiver.close()


def _rows(url: str, statement: str) -> list[tuple[object, ...]]:
    from tests.conftest import raw_sql

    return raw_sql(url, statement)
