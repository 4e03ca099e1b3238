"""A tool-call id is not unique across conversations: each adapter scopes its proposals.

Models reuse call ids (local models and scripted tests number them from ``call-1``). Through
each framework's own loop, on both backends: two conversations calling ``call-1`` are two
proposals and two effects at the receiver; the same conversation proposing its paused call
again is the same proposal; a grant of one conversation's call presented on another's resume
is refused with nothing sent, and that conversation's own grant still performs. The adapters
whose framework keeps no conversation identity the tool can read (OpenAI Agents, MAF without
a session) refuse a proposal without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger.callers.frameworks.gate import Grant
from effectledger.errors import InvalidInput
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_conversations_reusing_one_call_id_are_two_effects(
    world: World, framework: str
) -> None:
    """``call-1`` in two conversations: two proposals, each approved and performed, two
    effects; each conversation's paused call proposed again is its own proposal."""
    driver = DRIVERS[framework](world.app)
    first = driver.pause(AGENT, REFUND_30, "call-1")
    second = driver.pause(AGENT, REFUND_30, "call-1")
    assert first.scope != second.scope
    proposals = [driver.propose(AGENT, paused) for paused in (first, second)]
    assert proposals[0].proposal_id != proposals[1].proposal_id
    assert driver.propose(AGENT, first).proposal_id == proposals[0].proposal_id
    for proposal in proposals:
        world.app.approve(REVIEWER, proposal)
    answers = [
        driver.resume(paused, AGENT, Grant.of(proposal))
        for paused, proposal in zip((first, second), proposals, strict=True)
    ]
    assert [answer["outcome"] for answer in answers] == ["performed", "performed"]
    assert answers[0]["operation_id"] != answers[1]["operation_id"]
    assert count_rows(world.store_url, "proposals") == 2
    assert count_rows(world.store_url, "attempts") == 2
    assert world.receiver.counts().effects == 2


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_another_conversations_grant_is_refused_and_sends_nothing(
    world: World, framework: str
) -> None:
    """Conversation A performed ``call-1``; B paused on its own ``call-1`` with the same
    arguments. B resumed with A's grant is refused (never A's recorded result) and sends
    nothing; B resumed with its own grant performs: two effects in all."""
    driver = DRIVERS[framework](world.app)
    first = driver.pause(AGENT, REFUND_30, "call-1")
    proposal_a = driver.propose(AGENT, first)
    world.app.approve(REVIEWER, proposal_a)
    assert driver.resume(first, AGENT, Grant.of(proposal_a))["outcome"] == "performed"
    second = driver.pause(AGENT, REFUND_30, "call-1")
    proposal_b = driver.propose(AGENT, second)
    world.app.approve(REVIEWER, proposal_b)

    crossed = driver.resume(second, AGENT, Grant.of(proposal_a))
    assert (crossed["outcome"], crossed["reason"]) == ("denied", "digest_mismatch")
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1

    own = driver.resume(second, AGENT, Grant.of(proposal_b))
    assert own["outcome"] == "performed"
    assert world.receiver.counts().effects == 2


@pytest.mark.parametrize("scope", ["", " ", "x" * 257])
def test_openai_agents_proposal_needs_a_conversation(world: World, scope: str) -> None:
    """The OpenAI Agents SDK keeps no conversation the tool can read: a proposal without the
    host's scope is refused (``invalid_input``, field ``scope``) and nothing is written."""
    driver = DRIVERS["openai_agents"](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    with pytest.raises(InvalidInput) as refused:
        driver.adapter.propose_item(AGENT, paused.handle, scope=scope)  # type: ignore[attr-defined]
    assert refused.value.details["field"] == "scope"
    assert count_rows(world.store_url, "proposals") == 0


def test_maf_proposal_needs_a_session(world: World) -> None:
    """A MAF call proposed without its session is refused (field ``scope``), nothing written."""
    driver = DRIVERS["maf"](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    with pytest.raises(InvalidInput) as refused:
        driver.adapter.propose_request(AGENT, paused.handle, session=None)  # type: ignore[attr-defined]
    assert refused.value.details["field"] == "scope"
    assert count_rows(world.store_url, "proposals") == 0


def test_langgraph_checkpoint_namespace_drops_task_ids() -> None:
    """The LangGraph scope is the thread and the nodes' path: a re-run of the node (a new
    task id) is the same conversation, another thread or subgraph is not."""
    from effectledger.callers.frameworks.langgraph import conversation_scope

    assert conversation_scope("t1", "tools:1f0c") == conversation_scope("t1", "tools:9a9b")
    assert conversation_scope("t1", "tools:1f0c") != conversation_scope("t2", "tools:1f0c")
    assert conversation_scope("t1", "agent:ab|tools:cd") != conversation_scope("t1", "tools:cd")
    with pytest.raises(InvalidInput):
        conversation_scope(None, "tools:1f0c")
