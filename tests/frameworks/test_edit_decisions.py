"""A framework's "edit" decision is never performed under the approval of the unedited call.

Pydantic AI's ``ToolApproved(override_args=...)`` and arguments edited in a paused LangGraph
checkpoint change what the framework runs; the ledger refuses them under the old grant
(``digest_mismatch``). A LangGraph reviewer's ``edit`` decision performs only as a proposal of
its own, approved as shown (``test_langgraph_review.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import (
    APPROVE,
    LangGraphDriver,
    LangGraphHost,
    PydanticAIDriver,
    last_tool_message,
    tool_json,
)

EDITED = {**REFUND_30, "amount_minor": 25}


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def test_pydantic_ai_override_args_is_refused(world: World) -> None:
    """``ToolApproved(override_args=...)`` under the original grant is refused with no effect."""
    from pydantic_ai import DeferredToolResults, ToolApproved
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

    driver = PydanticAIDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    results = DeferredToolResults(
        approvals={"call-1": ToolApproved(override_args=EDITED)},
        metadata={"call-1": Grant.of(proposal).to_dict()},
    )
    out = asyncio.run(
        driver._agent([]).run(
            message_history=ModelMessagesTypeAdapter.validate_json(paused.saved),
            deferred_tool_results=results,
            deps=AGENT,
        )
    )
    (part,) = [p for m in out.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    answer = tool_json(part.content)
    assert (answer["outcome"], answer["reason"]) == ("denied", "digest_mismatch")
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "operations") == 0


def test_langgraph_edit_in_the_saved_review_is_never_performed_under_the_old_grant(
    world: World,
) -> None:
    """A LangGraph ``approve`` whose call was edited in the checkpoint, under the grant of the
    unedited call, is refused with nothing written; a reviewer's change of the arguments goes
    through the ``edit`` decision instead, as a proposal of its own."""
    driver = LangGraphDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    original = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, original)
    host = LangGraphHost(AGENT, {"call-1": original}, reviewer=REVIEWER)
    tampered = driver.edited(paused, 25)
    refused = last_tool_message(driver.decide(tampered, host, APPROVE))
    answer = tool_json(refused.content)
    assert (answer["outcome"], answer["reason"]) == ("denied", "digest_mismatch")
    assert world.receiver.counts().effects == 0
    assert count_rows(world.store_url, "operations") == 0


def test_grant_round_trip() -> None:
    """A grant read back from its mapping is the same grant; a malformed one is refused."""
    grant = Grant(proposal_id="prop-1", digest="v2:ab", approval_id="appr-1")
    assert Grant.coerce(grant.to_dict()) == grant
    from effectledger import InvalidInput

    with pytest.raises(InvalidInput):
        Grant.coerce({"proposal_id": 7, "digest": "x"})
