"""Many processes, one ledger: each operation is claimed once and looked up once per window.

Every test starts real worker processes (``tests/scale/worker.py``) against the same store and
the same receiver file, releases them together, and then checks the durable facts: attempt
rows, audit events, and the receiver's own counts of submissions, lookups and effects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, OperationState, SimulatedReceiver, SubmitMode
from effectledger.ledger import Ledger
from effectledger.model.operations import to_micros
from effectledger.workers import Executor, RecoveryWorker
from tests.acceptance.test_authority_matrix import AGENT, build_world
from tests.conftest import admit, run_sql
from tests.scale.worker import ROLE_POLICY

pytestmark = pytest.mark.slow

_ROOT = Path(__file__).resolve().parents[2]


def _start(role: str, args: Sequence[str], *, crash_at: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop("EFFECTLEDGER_CRASH_AT", None)
    if crash_at is not None:
        env["EFFECTLEDGER_CRASH_AT"] = crash_at
    return subprocess.Popen(
        [sys.executable, "-m", "tests.scale.worker", role, *args],
        cwd=_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _run_together(
    role: str, count: int, args: Sequence[str], *, crash_at: str | None = None
) -> list[tuple[int, dict[str, int]]]:
    """Start ``count`` workers, release them at once, return ``(exit code, report)`` of each."""
    workers = [
        _start(role, [*args, "--seed", str(index)], crash_at=crash_at) for index in range(count)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = []
        for worker in workers:
            out, _ = worker.communicate(timeout=120)
            lines = out.strip().splitlines()
            results.append((worker.returncode, json.loads(lines[-1]) if lines else {}))
        return results
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
            for pipe in (worker.stdin, worker.stdout):
                if pipe is not None:
                    pipe.close()  # an unclosed pipe would warn whenever it is collected


def _scalar(store_url: str, statement: str, params: tuple[object, ...] = ()) -> int:
    return int(run_sql(store_url, statement, params)[0][0])


def _per_operation(store_url: str, event_type: str) -> dict[str, int]:
    rows = run_sql(
        store_url,
        "SELECT operation_id, count(*) FROM audit_events WHERE event_type = ? "
        "GROUP BY operation_id",
        (event_type,),
    )
    return {str(operation): int(count) for operation, count in rows}


def test_eight_processes_racing_for_500_operations_make_one_attempt_each(
    store_url: str,
    ledger: Ledger,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """Eight processes calling execute on the same 500 operations make exactly one attempt each."""
    for index in range(500):
        admit(ledger, context, receiver, f"op-{index}")
    args = ["--db", store_url, "--receiver", str(receiver.path)]
    args += ["--clock-us", str(to_micros(clock.now())), "--operations", "500"]

    results = _run_together("execute", 8, args)

    assert [code for code, _ in results] == [0] * 8
    assert _scalar(store_url, "SELECT count(*) FROM attempts") == 500
    assert _per_operation(store_url, "AttemptPrepared") == {f"op-{i}": 1 for i in range(500)}
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (500, 500)
    # A result write that found the file busy past its budget under this contention left its
    # operation IN_PROGRESS (uncertain, never failed); recovery settles it without resending.
    clock.advance(ledger.settings.recover_after)
    RecoveryWorker(ledger, receiver).run_once(limit=500)
    states = run_sql(store_url, "SELECT state, count(*) FROM operations GROUP BY state")
    assert {str(state): int(count) for state, count in states} == {"SUCCEEDED": 500}
    assert receiver.counts().submissions == 500


def _lose_replies(ledger: Ledger, context: Context, receiver: SimulatedReceiver, n: int) -> None:
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    executor = Executor(ledger, receiver)
    for index in range(n):
        admit(ledger, context, receiver, f"op-{index}")
        executor.execute(context, f"op-{index}")
    receiver.submit_mode = SubmitMode.ACCEPT


def test_four_recovery_workers_look_up_1000_operations_once_per_window(
    store_url: str,
    ledger: Ledger,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """Four recovery processes look each of 1,000 due operations up once in each window."""
    _lose_replies(ledger, context, receiver, 1000)
    base = ["--db", store_url, "--receiver", str(receiver.path), "--limit", "25"]
    first_window = clock.advance(ledger.settings.recover_after)
    second_window = first_window + ledger.settings.lookup_interval

    first = _run_together(
        "recover", 4, [*base, "--clock-us", str(to_micros(first_window)), "--lookup", "unknown"]
    )

    assert [code for code, _ in first] == [0] * 4
    assert sum(report["done"] for _, report in first) == 1000
    assert sum(report["done"] > 0 for _, report in first) >= 2  # the work was shared
    assert receiver.counts().lookups == 1000
    assert _per_operation(store_url, "ReconciliationStarted") == {f"op-{i}": 1 for i in range(1000)}

    second = _run_together("recover", 4, [*base, "--clock-us", str(to_micros(second_window))])

    assert [code for code, _ in second] == [0] * 4
    assert receiver.counts().lookups == 2000
    assert _per_operation(store_url, "ReconciliationStarted") == {f"op-{i}": 2 for i in range(1000)}
    assert _scalar(store_url, "SELECT count(*) FROM operations WHERE state = 'SUCCEEDED'") == 1000
    assert receiver.counts().submissions == 1000  # recovery never resubmits


def test_four_guarded_executor_processes_perform_role_approved_work_once(
    store_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    """Four processes draining with the dispatch guard perform 40 role-approved refunds once."""
    world = build_world(store_url, tmp_path, clock, ROLE_POLICY)
    try:
        for _ in range(40):
            proposal, approval = world.approved()
            world.service.authority.admit(
                AGENT, proposal.proposal_id, approval_id=approval.approval_id
            )
        args = ["--db", store_url, "--receiver", str(world.receiver.path), "--limit", "5"]

        results = _run_together(
            "guarded-pool", 4, [*args, "--clock-us", str(to_micros(clock.now()))]
        )

        assert [code for code, _ in results] == [0] * 4
        assert _scalar(store_url, "SELECT count(*) FROM attempts") == 40
        states = run_sql(store_url, "SELECT state, count(*) FROM operations GROUP BY state")
        assert {str(state): int(count) for state, count in states} == {"SUCCEEDED": 40}
        assert _per_operation(store_url, "OperationReleased") == {}
        counts = world.receiver.counts()
        assert (counts.submissions, counts.effects) == (40, 40)
    finally:
        world.ledger.store.close()
        world.receiver.close()


def test_four_recovery_processes_of_another_destination_spend_no_lookup_window(
    store_url: str,
    ledger: Ledger,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
    tmp_path: Path,
) -> None:
    """Recovery processes bound to another account reserve, look up and write nothing."""
    _lose_replies(ledger, context, receiver, 100)
    due = clock.advance(ledger.settings.recover_after)
    events = _scalar(store_url, "SELECT count(*) FROM audit_events")
    windows = run_sql(store_url, "SELECT attempt_id, recover_after_us FROM attempts ORDER BY 1")
    other = ["--db", store_url, "--receiver", str(tmp_path / "other.db"), "--account", "acct-b"]

    results = _run_together("recover", 4, [*other, "--clock-us", str(to_micros(due))])

    assert results == [(0, {"done": 0})] * 4
    assert _scalar(store_url, "SELECT count(*) FROM audit_events") == events
    assert run_sql(store_url, "SELECT attempt_id, recover_after_us FROM attempts ORDER BY 1") == (
        windows
    )
    assert receiver.counts().lookups == 0


@pytest.mark.parametrize("crash_at", ["destination_committed", "inside_record"])
def test_executor_killed_mid_flight_loses_nothing(
    store_url: str,
    ledger: Ledger,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
    crash_at: str,
) -> None:
    """An executor SIGKILLed mid-operation leaves work that others finish, each effect once."""
    for index in range(20):
        admit(ledger, context, receiver, f"op-{index}")
    args = ["--db", store_url, "--receiver", str(receiver.path)]
    now = ["--clock-us", str(to_micros(clock.now()))]

    ((killed, _),) = _run_together("pool", 1, [*args, *now], crash_at=crash_at)
    survivors = _run_together("pool", 2, [*args, *now])
    later = clock.now() + ledger.settings.recover_after
    recovery = _run_together("recover", 2, [*args, "--clock-us", str(to_micros(later))])

    assert killed == -signal.SIGKILL
    assert sum(report["done"] for _, report in survivors) == 19
    assert sum(report["done"] for _, report in recovery) == 1
    assert all(ledger.get(context, f"op-{i}").state is OperationState.SUCCEEDED for i in range(20))
    counts = receiver.counts()
    assert (counts.submissions, counts.effects) == (20, 20)


def test_recovery_worker_killed_after_reserving_loses_nothing(
    store_url: str,
    ledger: Ledger,
    clock: ManualClock,
    receiver: SimulatedReceiver,
    context: Context,
) -> None:
    """A recovery process SIGKILLed after reserving lookups leaves them to the next window."""
    _lose_replies(ledger, context, receiver, 10)
    args = ["--db", store_url, "--receiver", str(receiver.path), "--limit", "4"]
    first_window = clock.advance(ledger.settings.recover_after)
    second_window = first_window + ledger.settings.lookup_interval

    ((killed, _),) = _run_together(
        "recover", 1, [*args, "--clock-us", str(to_micros(first_window))], crash_at="after_reserve"
    )
    same_window = _run_together("recover", 2, [*args, "--clock-us", str(to_micros(first_window))])
    next_window = _run_together("recover", 2, [*args, "--clock-us", str(to_micros(second_window))])

    assert killed == -signal.SIGKILL
    assert sum(report["done"] for _, report in same_window) == 6  # the 4 reserved wait
    assert sum(report["done"] for _, report in next_window) == 4
    assert all(ledger.get(context, f"op-{i}").state is OperationState.SUCCEEDED for i in range(10))
    assert receiver.counts().submissions == 10
