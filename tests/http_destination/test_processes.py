"""Races and crashes over real sockets: threads and processes against one operation and key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from effectledger import Context, ManualClock, OperationState
from effectledger.ledger import Ledger
from effectledger.model.operations import Outcome
from effectledger.receiver.server import RunningReceiver
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import count_rows, reply_command
from tests.http_destination.support import admit_http, destination

CHILD = Path(__file__).with_name("child.py")
CHILD_TIMEOUT_S = 60
ROOT = Path(__file__).resolve().parents[2]


def run_child(store_url: str, served: RunningReceiver, *, crash_at: str | None = None) -> int:
    """Run the child in a fresh interpreter; its return code (negative: killed by a signal)."""
    env = {k: v for k, v in os.environ.items() if k != "EFFECTLEDGER_CRASH_AT"}
    if crash_at is not None:
        env["EFFECTLEDGER_CRASH_AT"] = crash_at
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, str(CHILD), "--store", store_url, "--receiver", served.url,
         "--operation", "op-1"],
        env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    return done.returncode


def test_sixteen_threads_executing_one_operation_make_one_attempt_and_one_effect(
    ledger: Ledger, context: Context, served: RunningReceiver, store_url: str
) -> None:
    """Sixteen threads racing to execute one operation over HTTP make one attempt, one request
    and one effect; every caller reports the same recorded state."""
    target = destination(served)
    admit_http(ledger, context, target)
    executor = Executor(ledger, target)
    barrier = threading.Barrier(16)

    def race() -> OperationState:
        barrier.wait(timeout=10)
        return executor.execute(context, "op-1").state

    with ThreadPoolExecutor(16) as pool:
        states = list(pool.map(lambda _: race(), range(16)))
    final = ledger.get(context, "op-1").state
    assert final is OperationState.SUCCEEDED
    assert set(states) <= {OperationState.IN_PROGRESS, OperationState.SUCCEEDED}
    assert count_rows(store_url, "attempts") == 1
    counts = served.store.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    target.close()


def test_sixteen_threads_sending_one_key_get_one_effect_and_one_reference(
    served: RunningReceiver,
) -> None:
    """Sixteen identical requests under one key, sent at once, perform one effect at the
    receiver; each is Accepted with the same reference (a deadline long enough for sixteen
    exchanges on a loaded machine: each deadline bounds its whole exchange)."""
    target = destination(served, deadline_s=10.0)
    command = reply_command()
    barrier = threading.Barrier(16)

    def send(_: int) -> tuple[Outcome, str | None]:
        barrier.wait(timeout=10)
        observation = target.submit(command, "key-shared")
        return observation.outcome, observation.provider_reference

    with ThreadPoolExecutor(16) as pool:
        answers = set(pool.map(send, range(16)))
    assert answers == {(Outcome.ACCEPTED, served.store.reference("effects", "key-shared"))}
    counts = served.store.counts()
    assert (counts.submissions, counts.effects, counts.replays) == (16, 1, 15)
    target.close()


@pytest.mark.slow
def test_four_processes_executing_one_operation_make_one_effect(
    ledger: Ledger, context: Context, served: RunningReceiver, store_url: str
) -> None:
    """Four executor processes started together on one operation make one attempt and one
    effect at the receiver."""
    target = destination(served)
    admit_http(ledger, context, target)
    env = {k: v for k, v in os.environ.items() if k != "EFFECTLEDGER_CRASH_AT"}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, str(CHILD), "--store", store_url, "--receiver", served.url,
               "--operation", "op-1"]  # fmt: skip
    children = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    for child in children:
        child.communicate(timeout=CHILD_TIMEOUT_S)
        assert child.returncode == 0
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
    assert count_rows(store_url, "attempts") == 1
    counts = served.store.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
    target.close()


@pytest.mark.slow
def test_four_processes_sending_one_key_get_one_effect(served: RunningReceiver) -> None:
    """Four client processes sending the same request under one key at once leave one effect
    at the receiver and all see the same reference."""
    script = (
        "import os, sys\n"
        "from effectledger.destinations.secrets import env_secret\n"
        "from effectledger.receiver.contract import reference_destination\n"
        "from tests.conftest import reply_command\n"
        "target = reference_destination(sys.argv[1],"
        " token=env_secret('RECEIVER_TOKEN', 'Bearer {secret}'))\n"
        "answer = target.submit(reply_command(), 'key-processes')\n"
        "print(answer.outcome.value, answer.provider_reference)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen([sys.executable, "-c", script, served.url], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]  # fmt: skip
    outputs = {child.communicate(timeout=CHILD_TIMEOUT_S)[0].strip() for child in children}
    reference = served.store.reference("effects", "key-processes")
    assert outputs == {f"Accepted {reference}"}
    counts = served.store.counts()
    assert (counts.submissions, counts.effects) == (4, 1)


def test_executor_killed_between_send_and_record_leaves_one_effect_after_recovery(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock, store_url: str
) -> None:
    """An executor process killed after the receiver answered but before the ledger recorded
    it leaves IN_PROGRESS; recovery looks the key up and settles SUCCEEDED with one effect."""
    target = destination(served)
    admit_http(ledger, context, target)
    assert run_child(store_url, served, crash_at="after_reply") == -signal.SIGKILL
    assert ledger.get(context, "op-1").state is OperationState.IN_PROGRESS
    assert served.store.counts().effects == 1
    clock.advance(ledger.settings.recover_after)
    report = RecoveryWorker(ledger, target).run_once()
    assert len(report.resolved) == 1
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
    counts = served.store.counts()
    assert (counts.submissions, counts.effects, counts.lookups) == (1, 1, 1)
    target.close()
