"""The MCP server end to end: the SDK's own client over streamable HTTP on 127.0.0.1 and stdio.

Identity comes from the bearer token (HTTP) or the launching host (stdio), never from
arguments; the tools and their annotations are the function tools'; bad credentials and bad
arguments are refused and leave nothing at the receiver.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from effectledger.callers.mcp import TENANT_META_KEY, TokenIdentities, token_digest
from effectledger.callers.tools.function_tools import FunctionTools
from effectledger.cli import build_parser
from effectledger.cli import main as cli_main
from tests.callers.paths import MCPCaller, http_client, mcp_over_http, result_json
from tests.callers.scenarios import AGENT, MALLORY, REFUND_30, REVIEWER, World, fresh_world
from tests.callers.stdio_app import RECEIVER_VARIABLE, STORE_VARIABLE, build
from tests.conftest import count_rows
from tests.support.served import MCP, served_address

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action registered."""
    with fresh_world(store_url, tmp_path) as made:
        yield made


@pytest.fixture
def mcp(world: World) -> Iterator[MCPCaller]:
    """An MCP server for the world on a free port of 127.0.0.1, and a connected caller."""
    with mcp_over_http(world.app) as caller:
        yield caller


def test_tools_over_mcp_are_the_function_tools(world: World, mcp: MCPCaller) -> None:
    """tools/list shows the function tools' names, schemas, descriptions and true annotations."""
    listed = mcp._portal.call(mcp.client(AGENT).list_tools).tools
    definitions = FunctionTools(world.app).definitions()
    assert [tool.name for tool in listed] == [d.name for d in definitions]
    for tool, definition in zip(listed, definitions, strict=True):
        assert tool.input_schema == dict(definition.parameters)
        assert tool.description == definition.description
        hints = tool.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
            definition.read_only,
            definition.destructive,
            definition.idempotent,
        )
    by_name = {tool.name: tool.annotations for tool in listed}
    assert by_name["perform_proposal"].destructive_hint is True  # type: ignore[union-attr]
    assert by_name["operation_status"].read_only_hint is True  # type: ignore[union-attr]


def _initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }


@pytest.mark.parametrize(
    "authorization", [None, "Bearer token-unknown", "Basic dG9rZW4tYWdlbnQtNw=="]
)
def test_missing_or_wrong_credentials_are_refused(
    world: World, mcp: MCPCaller, authorization: str | None
) -> None:
    """Without a known bearer token the endpoint answers 401 invalid_token and runs nothing."""
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "propose_refund_order", "arguments": REFUND_30},
    }
    for body in (_initialize(), call):
        response = httpx2.post(mcp._url, json=body, headers=headers, timeout=10)
        assert response.status_code == 401
        assert response.json()["error"] == "invalid_token"
    token = authorization.removeprefix("Bearer ") if authorization else None

    async def connect() -> None:
        async with http_client(mcp._url, token) as client:
            await client.call_tool("propose_refund_order", REFUND_30)

    with pytest.raises(ExceptionGroup) as refused:
        anyio.run(connect)
    assert refused.group_contains(MCPError)
    assert count_rows(world.store_url, "proposals") == 0
    assert world.receiver.counts().submissions == 0


def test_malformed_json_rpc_is_refused_before_any_tool(world: World, mcp: MCPCaller) -> None:
    """Malformed JSON and arguments that are not an object get JSON-RPC errors, nothing more."""
    headers = {
        "Authorization": "Bearer token-agent-7",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    broken = httpx2.post(mcp._url, content=b"{not json", headers=headers, timeout=10)
    assert (broken.status_code, broken.json()["error"]["code"]) == (400, -32700)
    opened = httpx2.post(mcp._url, json=_initialize(), headers=headers, timeout=10)
    session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx2.post(mcp._url, json=initialized, headers=session, timeout=10)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "propose_refund_order", "arguments": "order_id=ord-1"},
    }
    answer = httpx2.post(mcp._url, json=call, headers=session, timeout=10)
    assert "-32602" in answer.text, answer.text
    assert '"id":2' in answer.text
    assert count_rows(world.store_url, "proposals") == 0
    assert count_rows(world.store_url, "audit_events") == 0
    assert world.receiver.counts().submissions == 0


def test_identity_comes_from_the_token_never_from_arguments(world: World, mcp: MCPCaller) -> None:
    """Mallory's token cannot perform the agent's proposal, and naming the agent does not help."""
    proposal = mcp.propose(AGENT, REFUND_30)
    approval = world.service.approve(REVIEWER, proposal["proposal_id"], digest=proposal["digest"])
    ids = {"proposal_id": proposal["proposal_id"], "approval_id": approval.approval_id}
    smuggled = mcp.call(MALLORY, "perform_proposal", {**ids, "actor_id": "agent-7"})
    assert smuggled["error"]["code"] == "tool_arguments_rejected"
    as_mallory = mcp.call(MALLORY, "perform_proposal", ids)
    assert (as_mallory["outcome"], as_mallory["reason"]) == ("denied", "actor_mismatch")
    assert world.receiver.counts().submissions == 0
    stored = world.service.authority.get_proposal(AGENT, proposal["proposal_id"])
    assert (stored.proposer_id, stored.correlation["framework"]) == ("agent-7", "mcp")
    performed = mcp.call(AGENT, "perform_proposal", ids)
    assert (performed["outcome"], performed["state"]) == ("performed", "SUCCEEDED")
    assert world.receiver.counts().effects == 1


def test_a_call_the_host_addresses_to_another_tenant_stops_at_the_tenant_step(
    world: World, mcp: MCPCaller
) -> None:
    """The client names the tenant a call is addressed to in the request's ``_meta``: another
    tenant than the token's is refused first (a perform's denial ``tenant_mismatch`` with the
    trace ``request``, ``tenant``; a propose or a status ``admission_denied`` /
    ``tenant_mismatch``), nothing read, written or sent; the token's own tenant performs; a
    ``tenant_id`` among the model's arguments is still refused, and a ``_meta`` value that is no
    tenant id is ``invalid_input``."""
    proposal = mcp.propose(AGENT, REFUND_30)
    approval = world.service.approve(REVIEWER, proposal["proposal_id"], digest=proposal["digest"])
    ids = {"proposal_id": proposal["proposal_id"], "approval_id": approval.approval_id}
    events = count_rows(world.store_url, "audit_events")
    elsewhere = {TENANT_META_KEY: "globex"}
    denied = mcp.call(AGENT, "perform_proposal", ids, elsewhere)
    assert (denied["outcome"], denied["reason"]) == ("denied", "tenant_mismatch")
    assert denied["trace"] == [["request", "received"], ["tenant", "rejected"]]
    assert (
        denied
        == FunctionTools(world.app).call(AGENT, "perform_proposal", ids, tenant_id="globex").data
    )
    for name, arguments in (
        ("propose_refund_order", REFUND_30),
        ("operation_status", {"operation_id": proposal["operation_id"]}),
    ):
        refused = mcp.call(AGENT, name, arguments, elsewhere)["error"]
        assert (refused["code"], refused["details"]["reason"]) == (
            "admission_denied",
            "tenant_mismatch",
        )
    smuggled = mcp.call(AGENT, "perform_proposal", {**ids, "tenant_id": "acme"})
    assert smuggled["error"]["code"] == "tool_arguments_rejected"
    malformed = mcp.call(AGENT, "perform_proposal", ids, {TENANT_META_KEY: 42})["error"]
    assert (malformed["code"], malformed["details"]["field"]) == (
        "invalid_input",
        f"_meta.{TENANT_META_KEY}",
    )
    assert count_rows(world.store_url, "audit_events") == events
    assert count_rows(world.store_url, "proposals") == 1
    assert world.receiver.counts().submissions == 0
    done = mcp.call(AGENT, "perform_proposal", ids, {TENANT_META_KEY: "acme"})
    assert (done["outcome"], done["state"]) == ("performed", "SUCCEEDED")
    assert world.receiver.counts().effects == 1


def test_bad_arguments_over_mcp_write_nothing(world: World, mcp: MCPCaller) -> None:
    """Wrong types, invented fields and malformed ids are refused with the tools' codes."""
    cases = [
        ("propose_refund_order", {**REFUND_30, "amount_minor": "30"}, "invalid_input"),
        ("propose_refund_order", {**REFUND_30, "tenant_id": "globex"}, "tool_arguments_rejected"),
        ("perform_proposal", {"proposal_id": "no such/../id!"}, "invalid_input"),
        ("perform_proposal", {"proposal_id": ["prop-1"]}, "invalid_input"),
        ("operation_status", {"operation_id": "op-unknown"}, "not_found"),
    ]
    for name, arguments, code in cases:
        assert mcp.call(AGENT, name, arguments)["error"]["code"] == code
    assert count_rows(world.store_url, "proposals") == 0
    assert count_rows(world.store_url, "audit_events") == 0
    assert world.receiver.counts().submissions == 0


def _stdio_server(world: World, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "effectledger.cli", "mcp", "--app", "tests.callers.stdio_app:service",
              *extra],
        env={
            STORE_VARIABLE: world.store_url,
            RECEIVER_VARIABLE: str(world.directory / "receiver.db"),
            "PYTHONPATH": str(ROOT),
        },
        cwd=str(ROOT),
    )  # fmt: skip


@pytest.mark.slow
def test_stdio_server_end_to_end(world: World) -> None:
    """Over stdio the host's context acts: propose, perform once, replay, refuse forged args."""
    reviewer_side = build(world.store_url, world.directory / "receiver.db")
    server = _stdio_server(world, "--tenant", "acme", "--actor", "agent-7", "--roles", "agent")
    results: dict[str, Any] = {}

    async def session() -> None:
        async with Client(server) as client:
            proposed = result_json(await client.call_tool("propose_refund_order", REFUND_30))
            approval = await anyio.to_thread.run_sync(
                lambda: reviewer_side.approve(
                    REVIEWER, proposed["proposal_id"], digest=proposed["digest"]
                )
            )
            ids = {"proposal_id": proposed["proposal_id"], "approval_id": approval.approval_id}
            forged = {**ids, "tenant_id": "globex"}
            results["forged"] = result_json(await client.call_tool("perform_proposal", forged))
            results["first"] = result_json(await client.call_tool("perform_proposal", ids))
            results["again"] = result_json(await client.call_tool("perform_proposal", ids))
            results["proposal"] = proposed

    try:
        anyio.run(session)
    finally:
        reviewer_side.close()
    assert results["forged"]["error"]["code"] == "tool_arguments_rejected"
    assert (results["first"]["outcome"], results["first"]["state"]) == ("performed", "SUCCEEDED")
    assert results["again"]["outcome"] == "replayed"
    assert world.receiver.counts().effects == 1
    stored = world.service.authority.get_proposal(AGENT, results["proposal"]["proposal_id"])
    assert stored.proposer_id == "agent-7"


@pytest.mark.slow
def test_four_stdio_server_processes_racing_make_one_effect(world: World) -> None:
    """Four MCP server processes performing the same proposal at once make exactly one effect."""
    reviewer_side = build(world.store_url, world.directory / "receiver.db")
    try:
        proposal = reviewer_side.propose(AGENT, "refund_order", REFUND_30)
        approval = reviewer_side.approve(REVIEWER, proposal.proposal_id, digest=proposal.digest)
    finally:
        reviewer_side.close()
    ids = {"proposal_id": proposal.proposal_id, "approval_id": approval.approval_id}
    server = _stdio_server(world, "--tenant", "acme", "--actor", "agent-7", "--roles", "agent")
    outcomes: list[str] = []

    async def race() -> None:
        ready = anyio.Event()
        connected: list[int] = []

        async def deliver() -> None:
            async with Client(server) as client:
                connected.append(1)
                if len(connected) == 4:
                    ready.set()
                await ready.wait()
                outcomes.append(
                    result_json(await client.call_tool("perform_proposal", ids))["outcome"]
                )

        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(deliver)

    anyio.run(race)
    assert sorted(outcomes) == ["performed", "replayed", "replayed", "replayed"]
    assert count_rows(world.store_url, "attempts") == 1
    assert world.receiver.counts().effects == 1


def test_mcp_command_is_registered_with_help() -> None:
    """The ``mcp`` command has help for every option and a handler that serves."""
    parser = build_parser()
    args = parser.parse_args(["mcp", "--app", "pkg:make", "--transport", "streamable-http"])
    assert args.handler.__module__ == "effectledger.cli.mcp"
    assert (args.host, args.port, args.path) == ("127.0.0.1", 8000, "/mcp")
    mcp_parser = parser._subparsers._group_actions[0].choices["mcp"]  # type: ignore[union-attr]
    for action in mcp_parser._actions:
        assert action.help, action.dest


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--app", "tests.callers.stdio_app:service"], "needs --tenant and --actor"),
        (["--app", "tests.callers.stdio_app:service", "--transport", "streamable-http"],
         "needs --tokens"),
        (["--app", "no_such_module:make", "--tenant", "t", "--actor", "a"], "cannot load"),
        (["--app", "nocolon", "--tenant", "t", "--actor", "a"], "module:attribute"),
    ],
)  # fmt: skip
def test_mcp_command_refuses_to_start_without_identity(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command will not serve without a source of identity, or without an application."""
    assert cli_main(["mcp", *argv]) == 1
    err = capsys.readouterr().err
    assert "error [invalid_input]" in err
    assert message in err


@pytest.mark.slow
def test_mcp_command_serves_streamable_http(world: World, tmp_path: Path) -> None:
    """``effectledger mcp --transport streamable-http`` serves the tools to a token holder."""
    tokens = tmp_path / "tokens.json"
    entry = {"token_sha256": token_digest("secret-1"), "tenant": "acme", "actor": "agent-7",
             "roles": ["agent"]}  # fmt: skip
    tokens.write_text(json.dumps([entry]))
    assert TokenIdentities.from_file(tokens)
    env = {
        **os.environ,
        STORE_VARIABLE: world.store_url,
        RECEIVER_VARIABLE: str(world.directory / "receiver.db"),
        "PYTHONPATH": str(ROOT),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "effectledger.cli", "mcp", "--app",
         "tests.callers.stdio_app:service", "--transport", "streamable-http", "--port", "0",
         "--tokens", str(tokens)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = served_address(process, says=MCP).base
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert process.poll() is None, "the server ended"
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)

        async def propose() -> dict[str, Any]:
            async with http_client(url, "secret-1") as client:
                return result_json(await client.call_tool("propose_refund_order", REFUND_30))

        proposal = anyio.run(propose)
        assert proposal["outcome"] == "proposed"
        stored = world.service.authority.get_proposal(AGENT, proposal["proposal_id"])
        assert (stored.tenant_id, stored.proposer_id) == ("acme", "agent-7")
    finally:
        process.terminate()
        process.wait(timeout=60)
