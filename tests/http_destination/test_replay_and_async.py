"""The replay window, the async path and cancellation, over real sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest

from effectledger import Context, ManualClock, Observation, OperationState
from effectledger.ledger import Ledger
from effectledger.model.operations import Outcome
from effectledger.receiver.server import RunningReceiver
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import reply_command
from tests.http_destination.support import admit_http, destination, last_evidence, window


def stepping_clock(*readings: float) -> Callable[[], float]:
    """A monotonic clock that returns ``readings`` in turn (then repeats the last)."""
    values: Iterator[float] = iter(readings)
    last = [readings[-1]]

    def now() -> float:
        last[0] = next(values, last[0])
        return last[0]

    return now


def test_resend_inside_the_window_settles_a_lost_reply_without_recovery(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """Inside the replay window a lost reply is resent with the same key and bytes: the receiver
    replays its answer, the operation is SUCCEEDED, and there is still one effect."""
    target = destination(served, contract=window(30))
    admit_http(ledger, context, target)
    served.faults.drop_after_commit = 1
    assert Executor(ledger, target).execute(context, "op-1").state is OperationState.SUCCEEDED
    document = last_evidence(ledger, context).document()
    assert (document["resends"], document["headers"]["idempotent-replayed"]) == (1, "true")
    counts = served.store.counts()
    assert (counts.submissions, counts.effects, counts.replays) == (2, 1, 1)
    target.close()


def test_closed_window_leaves_the_outcome_to_recovery(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """Once the window has passed no resend is made: OUTCOME_UNKNOWN after one request, and
    only a lookup settles it."""
    target = destination(served, contract=window(30))
    target.clock = stepping_clock(0.0, 60.0)
    admit_http(ledger, context, target)
    served.faults.drop_after_commit = 1
    assert Executor(ledger, target).execute(context, "op-1").state is (
        OperationState.OUTCOME_UNKNOWN
    )
    assert served.store.counts().submissions == 1
    clock.advance(ledger.settings.recover_after)
    RecoveryWorker(ledger, target).run_once()
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
    assert served.store.counts().effects == 1
    target.close()


def test_window_is_measured_from_the_first_send_and_never_extended(
    served: RunningReceiver,
) -> None:
    """A resend is allowed only if it ends inside the window counted from the first send: after
    one resend at 10 s, another at 29 s (ending at 31 s) is refused for a 30 s window."""
    target = destination(served, contract=window(30), deadline_s=2.0)
    target.clock = stepping_clock(0.0, 10.0, 29.0)
    served.faults.drop_after_commit = 3
    observation = target.submit(reply_command(), "key-window")
    assert observation.outcome is Outcome.UNKNOWN
    assert observation.evidence is not None
    assert observation.evidence.document()["resends"] == 1
    counts = served.store.counts()
    assert (counts.submissions, counts.effects) == (2, 1)
    target.close()


def test_no_resend_without_deduplication_by_key(served: RunningReceiver) -> None:
    """A contract that does not promise deduplication by key never resends."""
    target = destination(served)
    served.faults.drop_after_commit = 1
    assert target.submit(reply_command(), "key-once").outcome is Outcome.UNKNOWN
    assert served.store.counts().submissions == 1
    target.close()


def test_async_submit_and_lookup_classify_like_the_sync_path(served: RunningReceiver) -> None:
    """submit_async answers Accepted with the receiver's reference, and lookup_async finds it."""
    target = destination(served)

    async def story() -> tuple[Outcome, str | None, Outcome]:
        submitted = await target.submit_async(reply_command(), "key-async")
        looked = await target.lookup_async("key-async")
        await target.aclose()
        return submitted.outcome, submitted.provider_reference, looked.outcome

    outcome, reference, looked = asyncio.run(story())
    assert (outcome, looked) == (Outcome.ACCEPTED, Outcome.ACCEPTED)
    assert reference == served.store.reference("effects", "key-async")
    assert served.store.counts().effects == 1


def test_async_deadline_bounds_the_whole_exchange(served: RunningReceiver) -> None:
    """A reply slower than the deadline ends the async submit as Unknown within the deadline."""
    # Generous on purpose: a loaded machine must still finish a normal exchange in time; the
    # check is by order (ended before the reply would arrive), not by a tight duration.
    target = destination(served, deadline_s=1.0)
    served.faults.slow_reply_s = 3.0

    async def story() -> Observation:
        observation = await target.submit_async(reply_command(), "key-slow")
        await target.aclose()
        return observation

    observation = asyncio.run(story())
    # The reply, 3 s late, would have been Accepted: Unknown for a passed deadline says the
    # deadline ended the exchange before the reply came (an order, not a measured duration).
    assert observation.outcome is Outcome.UNKNOWN
    assert observation.evidence is not None
    assert observation.evidence.document()["reason"] == "deadline_passed"
    assert served.store.counts().effects == 1


@pytest.mark.slow
def test_cancelled_caller_never_turns_a_submission_into_a_failure(
    ledger: Ledger, context: Context, served: RunningReceiver
) -> None:
    """Cancelling the task awaiting execute_async mid-request lets the submission finish: the
    ledger records SUCCEEDED (not REJECTED or RETRY_PENDING) with one effect."""
    target = destination(served, deadline_s=3.0)
    admit_http(ledger, context, target)
    served.faults.slow_reply_s = 0.5
    executor = Executor(ledger, target)

    async def story() -> bool:
        task = asyncio.ensure_future(executor.execute_async(context, "op-1"))
        await asyncio.sleep(0.1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(story())
    deadline = time.monotonic() + 60  # a wait, generous under load; the check is the state
    while ledger.get(context, "op-1").state is OperationState.IN_PROGRESS:
        assert time.monotonic() < deadline, "the submission was never recorded"
        time.sleep(0.05)
    assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
    assert served.store.counts().effects == 1
    target.close()
