"""A framework's "edit" decision is never performed under the approval of the unedited call.

Pydantic AI's ``ToolApproved(override_args=...)`` and a LangGraph reviewer's ``edit`` in
``HumanInTheLoopMiddleware`` change the arguments the framework runs; the ledger refuses them
under the old grant (``digest_mismatch``), and the edited call performs only as a proposal of
its own, approved as shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import ACTION, LangGraphDriver, PydanticAIDriver, tool_json

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
        driver._agent({}, "call-1").run(
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


def test_langgraph_reviewer_edit_is_refused_then_proposed_anew(world: World) -> None:
    """A LangGraph ``edit`` decision is refused under the old grant; its own proposal performs."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    driver = LangGraphDriver(world.app)
    gate = driver.adapter
    hitl = HumanInTheLoopMiddleware(interrupt_on={ACTION: True})
    graph = create_agent(
        _scripted(REFUND_30, "call-1"),
        checkpointer=driver.saver,
        middleware=[hitl, gate.middleware],
    )
    config = {"configurable": {"thread_id": "edit"}}
    first = graph.invoke(
        {"messages": [{"role": "user", "content": "refund"}]}, config, context=AGENT, version="v2"
    )
    (review,) = first.interrupts  # HumanInTheLoopMiddleware's own pause
    original = gate.gate.propose(AGENT, "call-1", REFUND_30)
    world.app.approve(REVIEWER, original)
    edit = {"type": "edit", "edited_action": {"name": ACTION, "args": EDITED}}
    second = graph.invoke(
        _command({review.id: {"decisions": [edit]}}), config, context=AGENT, version="v2"
    )
    (ours,) = second.interrupts
    assert ours.value["args"] == EDITED
    refused = graph.invoke(gate.resume({ours.id: original}), config, context=AGENT, version="v2")
    text = [m for m in refused.value["messages"] if m.type == "tool"][-1].content
    answer = tool_json(text[text.rindex('{"outcome"') :])  # after the note on the edit
    assert (answer["outcome"], answer["reason"]) == ("denied", "digest_mismatch")
    assert world.receiver.counts().effects == 0
    # the edited call, proposed as itself (a new call id) and approved as shown, performs
    edited = gate.gate.propose(AGENT, "call-1-edited", EDITED)
    world.app.approve(REVIEWER, edited)
    assert world.app.perform(AGENT, edited).outcome == "performed"
    assert world.receiver.counts().effects == 1
    assert world.app.capacity(REVIEWER, "refunds").committed == 25


def _scripted(arguments: dict[str, Any], call_id: str) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    class Model(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    call = {"name": ACTION, "args": dict(arguments), "id": call_id}
    return Model(responses=[AIMessage(content="", tool_calls=[call])] + [AIMessage("done")] * 4)


def _command(resume: dict[str, Any]) -> Any:
    from langgraph.types import Command

    return Command(resume=resume)


def test_grant_round_trip() -> None:
    """A grant read back from its mapping is the same grant; a malformed one is refused."""
    grant = Grant(proposal_id="prop-1", digest="v2:ab", approval_id="appr-1")
    assert Grant.coerce(grant.to_dict()) == grant
    from effectledger import InvalidInput

    with pytest.raises(InvalidInput):
        Grant.coerce({"proposal_id": 7, "digest": "x"})
