"""What a user's type checker sees of the public API (checked by mypy --strict, never run)."""

from __future__ import annotations

from typing import assert_type

from pydantic import BaseModel

import effectledger
from effectledger import (
    ActionHandle,
    Approval,
    AsyncEffectLedger,
    Context,
    DispatchResult,
    EffectLedger,
    EffectResult,
    Observation,
    Operation,
    Proposal,
    SimulatedReceiver,
)


class Refund(BaseModel):
    order_id: str
    amount_minor: int


async def check(ledger: EffectLedger, receiver: SimulatedReceiver, agent: Context) -> None:
    assert_type(effectledger.connect("sqlite:///x.db"), EffectLedger)
    assert_type(effectledger.__version__, str)
    refund = ledger.action(
        name="refund", contract="refund-v1", arguments=Refund, destination=receiver
    )
    assert_type(refund, ActionHandle)

    @ledger.action(contract="refund-v1", account="acct", endpoint="https://pay.example/v1")
    def refund_card(args: Refund, key: str) -> Observation:
        return Observation.unknown()

    assert_type(refund_card, ActionHandle)
    proposal = ledger.propose(agent, refund, order_id="o-1", amount_minor=30)
    assert_type(proposal, Proposal)
    assert_type(ledger.approve(agent, proposal), Approval)
    result = ledger.perform(agent, proposal)
    assert_type(result, EffectResult)
    assert_type(result.uncertain, bool)
    assert_type(ledger.status(agent, result), DispatchResult)
    assert_type(ledger.reconcile(agent, result), EffectResult)
    assert_type(ledger.dispatch(agent, "op-1"), DispatchResult)
    assert_type(ledger.operation(agent, "op-1"), Operation)
    aio = await effectledger.connect_async("sqlite:///x.db")
    assert_type(aio, AsyncEffectLedger)
    assert_type(await aio.perform(agent, proposal), EffectResult)
    assert_type(await aio.reconcile(agent, "op-1"), EffectResult)
