"""The caller paths the scenario table runs through: direct Python, function tools, MCP.

Each is built from the same :class:`~effectledger.EffectLedger`, as a host builds it, and
returns plain JSON. The MCP path talks to a real server on 127.0.0.1 through the
SDK's own client (streamable HTTP, one authenticated session per caller identity) or to a
server process over stdio; a blocking portal lets synchronous scenario code drive it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

import anyio.from_thread
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from effectledger import Context, EffectLedger, EffectLedgerError
from effectledger.callers.mcp import (
    TENANT_META_KEY,
    TokenIdentities,
    build_server,
    serve_http_in_thread,
)
from effectledger.callers.tools.function_tools import FunctionTools
from tests.callers.scenarios import AGENT, JSON, MALLORY, OUTSIDER

TOKENS = {"token-agent-7": AGENT, "token-mallory": MALLORY, "token-outsider": OUTSIDER}
TOKEN_OF = {context: token for token, context in TOKENS.items()}


class DirectCaller:
    """The Python API: ``EffectLedger`` called in process."""

    name = "direct"

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger

    def propose(self, context: Context, arguments: Mapping[str, Any]) -> JSON:
        try:
            proposal = self.ledger.propose(context, "refund_order", arguments)
        except EffectLedgerError as exc:
            return {"error": exc.to_dict()}
        return {
            "outcome": "proposed",
            "proposal_id": proposal.proposal_id,
            "operation_id": proposal.operation_id,
            "digest": proposal.digest,
        }

    def perform(
        self,
        context: Context,
        proposal_id: str,
        approval_id: str | None,
        tenant_id: str | None = None,
    ) -> JSON:
        result = self.ledger.perform(
            context, proposal_id, approval=approval_id, tenant_id=tenant_id
        )
        return result.to_dict()

    def status(self, context: Context, operation_id: str) -> JSON:
        return {"outcome": "recorded", **self.ledger.status(context, operation_id).to_dict()}


def _ids(proposal_id: str, approval_id: str | None) -> dict[str, str]:
    ids = {"proposal_id": proposal_id}
    if approval_id is not None:
        ids["approval_id"] = approval_id
    return ids


class ToolCaller:
    """The function tools, called as a host answers a model's tool call (JSON text in)."""

    name = "tools"

    def __init__(self, ledger: EffectLedger) -> None:
        self.tools = FunctionTools(ledger)

    def propose(self, context: Context, arguments: Mapping[str, Any]) -> JSON:
        return self.tools.call(context, "propose_refund_order", json.dumps(arguments)).data

    def perform(
        self,
        context: Context,
        proposal_id: str,
        approval_id: str | None,
        tenant_id: str | None = None,
    ) -> JSON:
        arguments = json.dumps(_ids(proposal_id, approval_id))
        return self.tools.call(context, "perform_proposal", arguments, tenant_id=tenant_id).data

    def status(self, context: Context, operation_id: str) -> JSON:
        return self.tools.call(context, "operation_status", {"operation_id": operation_id}).data


def result_json(result: CallToolResult) -> JSON:
    """The JSON a tool result carries, read from its text (what a model sees)."""
    text = result.content[0].text  # type: ignore[union-attr]
    data: JSON = json.loads(text.split("\n", 1)[0])
    assert data == result.structured_content
    assert result.is_error == ("error" in data or data.get("outcome") == "denied")
    return data


@asynccontextmanager
async def http_client(url: str, token: str | None):  # type: ignore[no-untyped-def]
    """The SDK's client over streamable HTTP, presenting ``token`` as a bearer token."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


class MCPCaller:
    """The MCP server over a real transport, one client session per caller identity."""

    name = "mcp"

    def __init__(self, portal: anyio.from_thread.BlockingPortal, stack: ExitStack, url: str):
        self._portal = portal
        self._stack = stack
        self._url = url
        self._clients: dict[Context, Client] = {}

    def client(self, context: Context) -> Client:
        """The session authenticated as ``context`` (opened on first use)."""
        if context not in self._clients:
            manager = http_client(self._url, TOKEN_OF[context])
            self._clients[context] = self._stack.enter_context(
                self._portal.wrap_async_context_manager(manager)
            )
        return self._clients[context]

    def call(
        self,
        context: Context,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any] | None = None,
    ) -> JSON:
        """One tools/call as ``context`` (with the request's ``_meta``, if any); its JSON."""
        call = functools.partial(self.client(context).call_tool, name, arguments, meta=meta)
        return result_json(self._portal.call(call))

    def propose(self, context: Context, arguments: Mapping[str, Any]) -> JSON:
        return self.call(context, "propose_refund_order", dict(arguments))

    def perform(
        self,
        context: Context,
        proposal_id: str,
        approval_id: str | None,
        tenant_id: str | None = None,
    ) -> JSON:
        meta = None if tenant_id is None else {TENANT_META_KEY: tenant_id}
        return self.call(context, "perform_proposal", _ids(proposal_id, approval_id), meta)

    def status(self, context: Context, operation_id: str) -> JSON:
        return self.call(context, "operation_status", {"operation_id": operation_id})


@contextmanager
def mcp_over_http(ledger: EffectLedger) -> Iterator[MCPCaller]:
    """An MCP server for ``ledger`` on a free port of 127.0.0.1, and a caller connected to it."""
    identities = TokenIdentities.from_tokens(TOKENS)
    with ExitStack() as stack:
        url = stack.enter_context(
            serve_http_in_thread(
                lambda url: build_server(ledger, identities=identities, server_url=url)
            )
        )
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        with ExitStack() as sessions:  # closed before the portal and the server
            yield MCPCaller(portal, sessions, url)


@contextmanager
def caller_for(name: str, ledger: EffectLedger) -> Iterator[Any]:
    """The caller path called ``name`` over ``ledger``."""
    if name == "direct":
        yield DirectCaller(ledger)
    elif name == "tools":
        yield ToolCaller(ledger)
    elif name == "mcp":
        with mcp_over_http(ledger) as caller:
            yield caller
    else:  # pragma: no cover
        raise AssertionError(name)
