"""One parser for every tool: repeated keys, over 64 KiB, NaN, deep nesting and non-objects are
refused the same way by the function tools, the reviewer's tool and MCP, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectledger.callers.tools.function_tools import FunctionTools
from effectledger.callers.tools.review import PENDING_TOOL, ReviewTools
from effectledger.errors import InvalidInput
from effectledger.model.json_text import MAX_JSON_DEPTH, read_json, read_json_object
from tests.callers.paths import mcp_over_http
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels - 1):
        value = [value]
    return value


DEEP = {**REFUND_30, "order_id": _nested(MAX_JSON_DEPTH + 5)}
"""Arguments that nest deeper than the rules allow (the order id as a 69-deep array)."""
BAD_TEXTS = [
    pytest.param('{"limit": 5, "limit": 6}', "the key 'limit' is repeated", id="repeated-key"),
    pytest.param('{"a": "' + "x" * (64 * 1024) + '"}', "more than 65536 bytes", id="oversize"),
    pytest.param('{"limit": NaN}', "NaN is not JSON", id="nan"),
    pytest.param('{"a": ' + "[" * 70 + "]" * 70 + "}", "nested deeper than 64", id="deep"),
    pytest.param("[" * 5000 + "]" * 5000, "nested deeper than 64", id="very-deep"),
    pytest.param("[1, 2]", "not a JSON object", id="array"),
    pytest.param('{"a": ', "not valid JSON", id="broken"),
]
TOOLS = ["propose_refund_order", "perform_proposal", "operation_status", PENDING_TOOL]


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action registered."""
    with fresh_world(store_url, tmp_path) as made:
        yield made


def _nothing_written(world: World) -> None:
    for table in ("proposals", "approvals", "operations", "audit_events"):
        assert count_rows(world.store_url, table) == 0, table
    assert world.receiver.counts().submissions == 0


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("text", "says"), BAD_TEXTS)
def test_every_tool_refuses_text_that_breaks_the_rules(
    world: World, tool: str, text: str, says: str
) -> None:
    """Each tool, the reviewer's among them, answers ``invalid_input`` with the one parser's
    words for the text, and nothing is written."""
    if tool == PENDING_TOOL:
        answer = ReviewTools(world.app).call(REVIEWER, tool, text)
    else:
        answer = FunctionTools(world.app).call(AGENT, tool, text)
    assert answer.is_error
    error = answer.data["error"]
    assert error["code"] == "invalid_input"
    assert error["message"].startswith("tool arguments: ")
    assert says in error["message"]
    _nothing_written(world)


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_refuses_parsed_arguments_nested_too_deep(world: World, tool: str) -> None:
    """Arguments already parsed (as Anthropic's and MCP's are) are held to the same depth."""
    if tool == PENDING_TOOL:
        answer = ReviewTools(world.app).call(REVIEWER, tool, {"action": _nested(70)})
    else:
        answer = FunctionTools(world.app).call(AGENT, tool, DEEP)
    assert answer.data["error"]["code"] == "invalid_input"
    assert "tool arguments: nested deeper than 64 levels" in answer.data["error"]["message"]
    _nothing_written(world)


def test_mcp_tools_refuse_arguments_nested_too_deep(world: World) -> None:
    """Over a real MCP session the propose tool refuses a 69-deep argument as the function
    tools do, and a well-formed proposal still goes through."""
    with mcp_over_http(world.app) as mcp:
        refused = mcp.call(AGENT, "propose_refund_order", DEEP)
        assert refused["error"]["code"] == "invalid_input"
        assert "nested deeper than 64 levels" in refused["error"]["message"]
        _nothing_written(world)
        accepted = mcp.call(AGENT, "propose_refund_order", REFUND_30)
    assert "proposal_id" in accepted
    assert count_rows(world.store_url, "proposals") == 1


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '{"a": [[1]], "b": "x:y"}',
        '{"a": {"b": 1}}',
        "",
        '{"a": ' + "[" * 63 + "]" * 63 + "}",
    ],
)
def test_the_fast_object_read_equals_the_exact_read(text: str) -> None:
    """What the tools read quickly is what the exact reader reads, up to the deepest allowed."""
    exact = read_json(text, what="x") if text.strip() else {}
    assert read_json_object(text, what="x") == exact
    assert read_json_object(text.encode(), what="x") == exact


def test_the_http_rules_are_the_same_reader() -> None:
    """The HTTP API's body check answers with the same reader's words ("the body: ...")."""
    from effectledger.callers.http.bodies import json_body_problem

    problem = json_body_problem("application/json", b'{"a": 1, "a": 2}')
    assert problem == "the body: the key 'a' is repeated"
    with pytest.raises(InvalidInput) as refused:
        read_json(b'{"a": 1, "a": 2}', what="the body")
    assert refused.value.message == problem


@pytest.mark.parametrize("written", ["30.0", "3e1", "3.0E+1", "30"])
def test_a_whole_number_written_with_a_fraction_is_that_integer(world: World, written: str) -> None:
    """JSON Schema counts ``30.0`` as the integer 30: the tools record the integer 30, in text
    or in a parsed mapping; ``30.5`` stays a float and is refused for the integer field."""
    tools = FunctionTools(world.app)
    text = '{"order_id": "ord-1001", "amount_minor": ' + written + ', "currency": "EUR"}'
    for arguments in (text, {**REFUND_30, "amount_minor": 30.0}):
        answer = tools.call(AGENT, "propose_refund_order", arguments)
        assert not answer.is_error, answer.data
        recorded = world.app.proposal(AGENT, answer.data["proposal_id"]).arguments
        assert type(recorded["amount_minor"]) is int
        assert recorded["amount_minor"] == 30
    refused = tools.call(AGENT, "propose_refund_order", text.replace(written, "30.5"))
    assert refused.data["error"]["code"] == "invalid_input"
    assert count_rows(world.store_url, "proposals") == 2
    assert read_json("3" + "0" * 70 + ".0", what="x") == float("3" + "0" * 70)  # past 64 digits
