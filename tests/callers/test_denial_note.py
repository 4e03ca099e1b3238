"""A denial's reason reaches the model: the approver's words come back with the refusal.

Through each caller path (the Python API, the function tools, MCP over streamable HTTP) and a
framework adapter's result text, a perform of a proposal a reviewer denied with a reason
answers ``approval_denied`` with that reason as ``note`` (and, for the tools, in the sentence
the model reads), shown with hidden characters made visible; nothing is admitted or sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger.callers.frameworks.gate import result_text
from effectledger.callers.tools.function_tools import FunctionTools
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.callers.paths import caller_for
from tests.callers.scenarios import AGENT, REVIEWER, World, fresh_world
from tests.conftest import count_rows

REASON = "the order total is 20 EUR: propose 20 instead"


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action registered."""
    with fresh_world(store_url, tmp_path) as made:
        yield made


@pytest.mark.parametrize("path", ["direct", "tools", "mcp"])
def test_the_approvers_reason_comes_back_with_the_denial(
    world: World, store_url: str, path: str
) -> None:
    """``note`` carries the reason; no operation exists and the receiver saw nothing."""
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    world.app.deny(REVIEWER, proposal, reason=REASON)
    with caller_for(path, world.app) as caller:
        answer = caller.perform(AGENT, proposal.proposal_id, None)
    found = answer.get("result", answer)
    assert found["outcome"] == "denied"
    assert found["reason"] == "approval_denied"
    assert found["note"] == REASON
    assert count_rows(store_url, "operations") == 0
    assert world.receiver.counts().submissions == 0


def test_the_tool_sentence_quotes_the_reason_and_a_framework_result_carries_it(
    world: World,
) -> None:
    """The model's sentence says nothing happened and quotes the reviewer, hidden characters
    made visible; a framework adapter's result JSON has the same note."""
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    world.app.deny(REVIEWER, proposal, reason="no\u202e: fraud")
    answer = FunctionTools(world.app).call(
        AGENT, "perform_proposal", json.dumps({"proposal_id": proposal.proposal_id})
    )
    assert answer.is_error
    assert answer.guidance.startswith("Nothing happened: a reviewer denied it.")
    assert 'The reviewer\'s reason: "no\u27e8U+202E\u27e9: fraud".' in answer.guidance
    assert "\u202e" not in answer.guidance
    result = world.app.perform(AGENT, proposal.proposal_id)
    assert json.loads(result_text(result))["note"] == "no\u202e: fraud"


def test_other_denials_carry_no_note(world: World) -> None:
    """A denial for another reason (no approval yet) has no note to pass on."""
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    result = world.app.perform(AGENT, proposal.proposal_id)
    assert result.reason is not None
    assert result.reason.value == "approval_missing"
    assert result.note is None
