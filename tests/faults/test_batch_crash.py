"""A worker claiming in batches, SIGKILLed at each of its crash points, loses and doubles nothing.

A real ``effectledger worker`` process (claim batch 16, the receiver taking four sends at once)
dispatches 32 READY refunds and kills itself at the armed point: right after the first batch's
claim committed (``after_batch_claim``), when half of a batch's replies are in and the rest in
flight or never sent (``mid_batch_sends``), when every reply of a batch is in and none recorded
(``after_batch_replies``), and with half of a batch's records written in its open transaction
(``inside_batch_record``). The rows and the receiver's own count are judged at the kill, then a
survivor recovers (lookups by key, never a resend) and dispatches what is still READY: every
refund ends SUCCEEDED with exactly one effect, or, claimed and never sent, in MANUAL_REVIEW
with none, exactly where a lone perform's crash at the same step leaves it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from effectledger import ManualClock, OperationState
from effectledger.clock import SystemClock
from effectledger.events.chain import verify_chain
from tests.acceptance.test_authority_matrix import REVIEWER
from tests.conftest import count_rows
from tests.faults._harness import CHILD_TIMEOUT_S, CRASH_ENV, SIGKILLED
from tests.worker.apps import RECEIVER_VARIABLE
from tests.worker.support import Refunds, refunds

ROOT = Path(__file__).resolve().parents[2]
READY = 32
BATCH = 16
UNSETTLED = "state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN')"

pytestmark = pytest.mark.slow


@dataclass(frozen=True, slots=True)
class AtKill:
    """What the rows and the receiver say right after the kill."""

    ready: int
    in_progress: int
    succeeded: int
    attempts: int
    prepared: int
    outcomes: int
    effects: int
    submissions: int


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[Refunds]:
    """32 approved refunds admitted READY, on the wall clock the worker process shares."""
    made = refunds(store_url, tmp_path, clock=SystemClock())
    made.ready(READY)
    yield made
    made.close()


def kill_worker_at(point: str, store_url: str, tmp_path: Path) -> None:
    """Run ``effectledger worker`` (dispatch only, claim batch 16) armed at ``point``; check that
    it was SIGKILLed there."""
    env = {
        **{name: value for name, value in os.environ.items() if name != CRASH_ENV},
        CRASH_ENV: point,
        RECEIVER_VARIABLE: str(tmp_path / "receiver.db"),
    }
    child = subprocess.run(
        [sys.executable, "-m", "effectledger.cli", "worker", "--db", store_url,
         "--app", "tests.worker.apps:refunds", "--claim-batch", str(BATCH),
         "--recovery-threads", "0", "--seal-interval", "0", "--dispatch-interval", "0.05"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert child.returncode == SIGKILLED, (child.returncode, child.stdout, child.stderr)


def at_kill(world: Refunds) -> AtKill:
    """The durable facts right after the kill."""
    url = world.store_url
    counts = world.receiver.counts()
    outcome = "event_type IN ('ProviderAcceptanceConfirmed', 'SubmissionOutcomeUnknown')"
    return AtKill(
        ready=count_rows(url, "operations", "state = 'READY'"),
        in_progress=count_rows(url, "operations", "state = 'IN_PROGRESS'"),
        succeeded=count_rows(url, "operations", "state = 'SUCCEEDED'"),
        attempts=count_rows(url, "attempts"),
        prepared=world.events("AttemptPrepared"),
        outcomes=count_rows(url, "audit_events", outcome),
        effects=counts.effects,
        submissions=counts.submissions,
    )


def check_at_kill(point: str, facts: AtKill) -> None:
    """Each operation is READY (its claim never committed) or IN_PROGRESS with its attempt
    (claimed, sent or not); nothing is recorded; nothing was sent twice."""
    assert facts.ready + facts.in_progress == READY
    assert facts.succeeded == facts.outcomes == 0
    assert facts.attempts == facts.prepared == facts.in_progress  # each claim: attempt + event
    assert facts.submissions == facts.effects <= facts.in_progress
    if point == "after_batch_claim":  # the first batch committed, nothing sent
        assert (facts.in_progress, facts.effects) == (BATCH, 0)
    elif point == "mid_batch_sends":  # half the first batch's replies in, the rest not all sent
        assert facts.in_progress in (BATCH, 2 * BATCH)  # the next batch may be claimed meanwhile
        assert BATCH // 2 <= facts.effects < BATCH
    else:  # the first batch sent; the second claimed before the first's record, or meanwhile
        assert facts.in_progress in (BATCH, 2 * BATCH)
        assert facts.effects == BATCH


def settle(world: Refunds, store_url: str) -> None:
    """A survivor recovers every claim by lookup (escalating what no lookup can settle), then
    dispatches what is still READY; every refund ends with its effect counted once."""
    later = datetime.now(UTC) + timedelta(seconds=31)
    survivor = refunds(store_url, world.receiver.path.parent, clock=ManualClock(later))
    try:
        settings = survivor.app.ledger.settings
        for _ in range(settings.max_inconclusive_lookups + 2):
            if count_rows(store_url, "operations", UNSETTLED) == 0:
                break
            report = survivor.app.recover(limit=100)
            assert report.failed == []
            survivor.app.ledger.clock.advance(settings.lookup_interval)  # type: ignore[attr-defined]
        assert count_rows(store_url, "operations", UNSETTLED) == 0
        survivor.app.dispatch_ready(limit=100, claim_batch=BATCH)
        operations = survivor.app.operations(REVIEWER, limit=100)
        assert len(operations) == READY
        for operation in operations:
            verify_chain(survivor.app.events(REVIEWER, operation.operation_id))
            effects = survivor.receiver.effects_for(operation.idempotency_key)
            # Sent once and recorded, or claimed and never sent: an attempt no lookup can prove
            # sent waits for a person, its effect never made a second time.
            expected = {OperationState.SUCCEEDED: 1, OperationState.MANUAL_REVIEW: 0}
            assert operation.state in expected, operation.state
            assert effects == expected[operation.state]
            where = f"operation_id = '{operation.operation_id}'"
            assert count_rows(store_url, "attempts", where) == 1
        counts = survivor.receiver.counts()
        assert counts.submissions == counts.effects  # nothing was ever sent twice
        assert counts.effects == count_rows(store_url, "operations", "state = 'SUCCEEDED'")
    finally:
        survivor.close()


@pytest.mark.parametrize(
    "point", ["after_batch_claim", "mid_batch_sends", "after_batch_replies", "inside_batch_record"]
)
def test_a_batch_worker_killed_loses_nothing_and_doubles_nothing(
    point: str, world: Refunds, store_url: str, tmp_path: Path
) -> None:
    """Killed at ``point``, the worker leaves each refund READY or claimed with its attempt,
    nothing recorded and nothing sent twice; recovery and a second dispatch settle all 32, each
    SUCCEEDED with one effect or, never sent, in MANUAL_REVIEW with none."""
    started = time.monotonic()
    kill_worker_at(point, store_url, tmp_path)
    assert time.monotonic() - started < CHILD_TIMEOUT_S
    check_at_kill(point, at_kill(world))
    settle(world, store_url)


def test_the_crash_points_kill_the_process_not_a_thread() -> None:
    """A crash point reached in a sending thread kills the whole process (SIGKILL)."""
    code = (
        "import threading; from effectledger._failpoints import crash_point; "
        "t = threading.Thread(target=crash_point, args=('mid_batch_sends',)); t.start(); "
        "t.join(); print('survived')"
    )
    child = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, CRASH_ENV: "mid_batch_sends"},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL
    assert "survived" not in child.stdout
