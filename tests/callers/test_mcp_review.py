"""The reviewer's MCP tool: the queue over the SDK's own client, read-only, for reviewers only."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from mcp import Client

from effectledger.callers.mcp import (
    TENANT_META_KEY,
    TokenIdentities,
    build_server,
    serve_http_in_thread,
)
from effectledger.callers.tools.review import PENDING_TOOL, ReviewTools
from tests.callers.paths import TOKENS, http_client, result_json
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.callers.stdio_app import build
from tests.callers.test_mcp import _stdio_server
from tests.conftest import count_rows

REVIEWER_TOKEN = "token-rita"


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action registered."""
    with fresh_world(store_url, tmp_path) as made:
        yield made


def test_reviewer_lists_the_queue_over_mcp(world: World, store_url: str) -> None:
    """pending_proposals is read-only and answers the reviewer's queue; an agent is refused,
    and so is a call the client addresses to another tenant than the reviewer's."""
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    identities = TokenIdentities.from_tokens({**TOKENS, REVIEWER_TOKEN: REVIEWER})
    with ExitStack() as stack:
        url = stack.enter_context(
            serve_http_in_thread(
                lambda url: build_server(
                    world.app, identities=identities, server_url=url, review=True
                )
            )
        )
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        with ExitStack() as sessions:
            rita = sessions.enter_context(
                portal.wrap_async_context_manager(http_client(url, REVIEWER_TOKEN))
            )
            agent = sessions.enter_context(
                portal.wrap_async_context_manager(http_client(url, "token-agent-7"))
            )
            listed = {tool.name: tool for tool in portal.call(rita.list_tools).tools}
            assert listed[PENDING_TOOL].annotations is not None
            assert listed[PENDING_TOOL].annotations.read_only_hint is True
            queue = result_json(portal.call(rita.call_tool, PENDING_TOOL, {"limit": 10}))
            (entry,) = queue["proposals"]
            assert entry["proposal_id"] == proposal.proposal_id
            assert entry["digest"] == proposal.digest
            assert entry["approvals_remaining"] == 1
            assert entry["expires"].startswith("expires in")
            refused = result_json(portal.call(agent.call_tool, PENDING_TOOL, {}))
            assert refused["error"]["code"] == "not_permitted"
            bad = result_json(portal.call(rita.call_tool, PENDING_TOOL, {"approved_by": "x"}))
            assert bad["error"]["code"] == "invalid_input"
            for tenant, listed_ids in (("globex", None), ("acme", [proposal.proposal_id])):
                call = functools.partial(
                    rita.call_tool, PENDING_TOOL, {}, meta={TENANT_META_KEY: tenant}
                )
                answer = result_json(portal.call(call))
                if listed_ids is None:  # addressed to another tenant: refused, nothing read
                    assert answer["error"]["details"]["reason"] == "tenant_mismatch"
                else:
                    assert [p["proposal_id"] for p in answer["proposals"]] == listed_ids
    assert count_rows(store_url, "approvals") == 0
    assert world.receiver.counts().effects == 0


@pytest.mark.slow
def test_mcp_command_with_review_offers_the_queue_over_stdio(world: World) -> None:
    """``effectledger mcp --review`` over stdio answers the queue for the host's reviewer."""
    # The server process runs on the real clock: propose on it too, so the proposal is live.
    with build(world.store_url, world.directory / "receiver.db") as live:
        proposal = live.propose(AGENT, "refund_order", REFUND_30)
    server = _stdio_server(
        world, "--review", "--tenant", "acme", "--actor", "rita", "--roles", "approver"
    )
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with Client(server) as client:
            seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
            seen["queue"] = result_json(await client.call_tool(PENDING_TOOL, {}))

    anyio.run(session)
    assert PENDING_TOOL in seen["tools"]
    assert [p["proposal_id"] for p in seen["queue"]["proposals"]] == [proposal.proposal_id]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"limit": 5, "limit": 500}', "the key 'limit' is repeated"),
        ('{"action": "' + "a" * (64 * 1024) + '"}', "more than 65536 bytes"),
        ('{"limit": NaN}', "not JSON"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_the_reviewer_tool_parses_its_arguments_by_the_tool_rules(
    world: World, text: str, says: str
) -> None:
    """pending_proposals refuses a repeated key, over 64 KiB, NaN and a non-object as
    invalid_input, like every other tool."""
    world.app.propose(AGENT, "refund_order", REFUND_30)
    answer = ReviewTools(world.app).call(REVIEWER, PENDING_TOOL, text)
    assert answer.is_error
    assert answer.data["error"]["code"] == "invalid_input"
    assert says in answer.data["error"]["message"]
    listed = ReviewTools(world.app).call(REVIEWER, PENDING_TOOL, '{"limit": 5}')
    assert not listed.is_error
    assert len(listed.data["proposals"]) == 1
