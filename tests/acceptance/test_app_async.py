"""The async twin: the same surface as the sync object, and no outcome lost to a cancellation."""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

import pytest

from effectledger import (
    AsyncEffectLedger,
    Command,
    EffectLedger,
    EffectOutcome,
    ManualClock,
    Observation,
    OperationState,
    SimulatedReceiver,
    SubmitMode,
    connect_async,
)
from effectledger.app.aio import SYNC_ONLY
from tests.acceptance.app_support import AGENT, REFUND, RITA, Refund, declare_refund
from tests.conftest import count_rows


def _public_methods(cls: type) -> dict[str, object]:
    """Public functions defined on ``cls`` or its bases (``object`` aside)."""
    return {
        name: member
        for klass in reversed(cls.__mro__[:-1])
        for name, member in vars(klass).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_every_sync_method_has_an_awaitable_twin_with_its_signature() -> None:
    """Each public method of EffectLedger has a coroutine twin with the identical signature."""
    sync = _public_methods(EffectLedger)
    twins = _public_methods(AsyncEffectLedger)
    # action and register are the declaring part's own methods, bound on each instance.
    parts = {"action", "register"}
    assert parts.isdisjoint(sync)
    assert sync.keys() | parts >= SYNC_ONLY
    assert sync.keys() - SYNC_ONLY == twins.keys()
    for name in sync.keys() - SYNC_ONLY:
        assert inspect.iscoroutinefunction(twins[name]), name
        assert inspect.signature(twins[name]) == inspect.signature(sync[name]), name  # type: ignore[arg-type]
        assert twins[name].__doc__, name  # type: ignore[attr-defined]
    assert {"__aenter__", "__aexit__"} <= set(vars(AsyncEffectLedger))


def test_async_story_matches_the_sync_story(
    store_url: str, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """propose, approve, perform and recover awaited: the lost reply is reconciled, one effect."""
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY

    async def story() -> tuple[EffectOutcome, OperationState | None, OperationState]:
        async with await connect_async(store_url, clock=clock) as app:
            refund = declare_refund(app.sync, receiver)
            proposal = await app.propose(AGENT, refund, **REFUND)
            await app.approve(RITA, proposal)
            result = await app.perform(AGENT, proposal)
            clock.advance(31)
            await app.recover()
            status = await app.status(AGENT, proposal)
            return result.outcome, result.state, status.state

    assert asyncio.run(story()) == (
        EffectOutcome.PERFORMED,
        OperationState.OUTCOME_UNKNOWN,
        OperationState.SUCCEEDED,
    )
    assert receiver.counts().effects == 1


def test_cancelled_perform_still_records_its_outcome(
    store_url: str, receiver: SimulatedReceiver, clock: ManualClock
) -> None:
    """Cancelling the awaiting caller mid-submission leaves the effect done and recorded once."""
    entered = threading.Event()
    release = threading.Event()

    async def story() -> str:
        app = await connect_async(store_url, clock=clock)

        @app.action(contract="refund-v1", account=receiver.account_id, endpoint=receiver.endpoint)
        def refund_order(args: Refund, key: str) -> Observation:
            entered.set()
            release.wait(timeout=30)
            command = Command(
                action="refund_order", contract_version="refund-v1", arguments=args.model_dump()
            )
            return receiver.submit(command, key)

        proposal = await app.propose(AGENT, refund_order, **REFUND)
        await app.approve(RITA, proposal)
        waiting = asyncio.ensure_future(app.perform(AGENT, proposal))
        await asyncio.to_thread(entered.wait, 30)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        await app.close()  # waits for the shielded call to finish recording
        return proposal.operation_id

    operation_id = asyncio.run(story())
    states = count_rows(store_url, "operations", f"operation_id = '{operation_id}'")
    succeeded = count_rows(
        store_url, "operations", f"operation_id = '{operation_id}' AND state = 'SUCCEEDED'"
    )
    assert (states, succeeded) == (1, 1)
    assert count_rows(store_url, "attempts") == 1
    assert receiver.counts().effects == 1


def test_declaring_stays_synchronous(tmp_path: Path) -> None:
    """action and register are the sync object's own, so a decorator works on the async twin."""

    async def declared() -> bool:
        async with await connect_async(f"sqlite:///{tmp_path / 'ledger.db'}") as app:
            return app.action == app.sync.action and app.register == app.sync.register

    assert asyncio.run(declared())
