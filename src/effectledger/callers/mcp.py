"""The function tools as an MCP server, built on the official ``mcp`` SDK's ``MCPServer``.

A host builds it from its :class:`~effectledger.EffectLedger`: ``build_server(ledger,
identities=...)`` for streamable HTTP, ``build_server(ledger, context=...)`` for stdio, or runs
it with :func:`serve_stdio` and :func:`serve_streamable_http` (what ``effectledger mcp`` calls).
The server lists exactly the tools of
:class:`~effectledger.callers.tools.function_tools.FunctionTools`
(same names, schemas and descriptions), with annotations that tell the truth: the propose tools
only record, ``perform_proposal`` may change the world but repeating it adds nothing, and
``operation_status`` only reads. A call is answered by the same host dispatch as a function
tool, so its result, its error codes and its audit trail are the same.

Identity never comes from arguments. Over streamable HTTP it comes from the SDK's bearer-token
authentication: :class:`TokenIdentities` maps each token (kept only as its SHA-256) to a tenant,
an actor and roles, and a request without a known token is refused with HTTP 401 before any
tool runs. Over stdio there is no header to read: the process that launched the server is the
boundary, and it names the one context the server acts for.

A host may name the tenant a call is addressed to in the request's ``_meta``, under
:data:`TENANT_META_KEY` (``{"_meta": {"effectledger/tenant_id": "acme"}}``), as
``FunctionTools.call(..., tenant_id=...)`` takes it: compared first with the authenticated
tenant, another one is refused at the tenant step (``tenant_mismatch``) with nothing read or
written; it can only narrow what the identity reaches. ``_meta`` is the client's, never the
model's: a ``tenant_id`` among a tool's arguments is refused like any field the tool does not take.

Requires the ``mcp`` extra (``pip install effectledger[mcp]``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context as MCPContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AnyHttpUrl, ConfigDict

from effectledger.app.ledger import EffectLedger
from effectledger.callers.tools.function_tools import FunctionTools, ToolDefinition, ToolResult
from effectledger.callers.tools.review import ReviewTools
from effectledger.errors import EffectLedgerError, InvalidInput, NotPermitted
from effectledger.model.authority import Correlation
from effectledger.model.operations import Context

__all__ = [
    "SERVER_NAME",
    "TENANT_META_KEY",
    "TokenIdentities",
    "build_server",
    "serve_http_in_thread",
    "serve_stdio",
    "serve_streamable_http",
    "token_digest",
]

SERVER_NAME = "effectledger"
TENANT_META_KEY = "effectledger/tenant_id"
"""The ``_meta`` key of a ``tools/call`` under which a host names the tenant it addresses."""
_CLAIM = "effectledger_context"


def token_digest(token: str) -> str:
    """The SHA-256 hex digest under which a bearer token is kept (never the token itself)."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenIdentities:
    """The SDK's token verifier: a bearer token's SHA-256 names one tenant, actor and roles.

    Unknown tokens verify as ``None``, which the SDK answers with HTTP 401. The verified
    context travels in the access token's claims; a tool reads it from there and nowhere else.
    """

    def __init__(self, identities: Mapping[str, Context]) -> None:
        self._by_digest: dict[str, Context] = {}
        for digest, context in identities.items():
            if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
                raise InvalidInput("token digests must be SHA-256 hex (64 lowercase hex digits)")
            if not isinstance(context, Context):
                raise InvalidInput("each token digest must map to a Context")
            self._by_digest[digest] = context

    @classmethod
    def from_tokens(cls, tokens: Mapping[str, Context]) -> TokenIdentities:
        """Identities for plain tokens (hashed on the way in; for tests and local setups)."""
        return cls({token_digest(token): context for token, context in tokens.items()})

    @classmethod
    def from_file(cls, path: str | Path) -> TokenIdentities:
        """Read ``[{"token_sha256", "tenant", "actor", "roles"}, ...]`` from a JSON file."""
        try:
            entries = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(entries, list):
                raise TypeError("not a list")
            return cls(
                {
                    str(entry["token_sha256"]): Context(
                        tenant_id=entry["tenant"],
                        actor_id=entry["actor"],
                        roles=frozenset(str(role) for role in entry.get("roles", [])),
                    )
                    for entry in entries
                }
            )
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise InvalidInput(f"the token file {path} is unreadable or malformed: {exc}") from exc

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token for a known bearer token, or ``None``."""
        context = self._by_digest.get(token_digest(token))
        if context is None:
            return None
        return AccessToken(
            token=token,
            client_id=context.actor_id,
            subject=f"{context.tenant_id}/{context.actor_id}",
            scopes=[],
            claims={
                _CLAIM: {
                    "tenant_id": context.tenant_id,
                    "actor_id": context.actor_id,
                    "roles": sorted(context.roles),
                }
            },
        )


class _RawArguments(ArgModelBase):
    """Hands the tool every argument as sent, so the host dispatch can refuse invented ones.

    The SDK's usual argument model is derived from a function signature and ignores unknown
    keys; here nothing may be dropped silently, and the ledger's own checks give the error codes.
    """

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.model_extra or {})}


def _annotations(definition: ToolDefinition) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=definition.read_only,
        destructive_hint=definition.destructive,
        idempotent_hint=definition.idempotent,
        open_world_hint=definition.open_world,
    )


def _call_result(result: ToolResult) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.text)],
        structured_content=result.data,
        is_error=result.is_error,
    )


def _authenticated_context() -> Context:
    token = get_access_token()
    claims = None if token is None else (token.claims or {}).get(_CLAIM)
    if not isinstance(claims, dict):
        raise NotPermitted("this server needs an authenticated caller; none was presented")
    return Context(
        tenant_id=claims["tenant_id"],
        actor_id=claims["actor_id"],
        roles=frozenset(claims["roles"]),
    )


def _addressed_tenant(ctx: MCPContext) -> str | None:
    """The tenant the host names in the request's ``_meta`` (:data:`TENANT_META_KEY`), if any;
    :class:`InvalidInput` when it names something other than a tenant id."""
    meta = ctx.request_context.meta or {}
    named = meta.get(TENANT_META_KEY)
    if named is None:
        return None
    if not isinstance(named, str) or not named or len(named) > 128:
        raise InvalidInput(
            f"_meta {TENANT_META_KEY} names the tenant a call is addressed to: a tenant id",
            field=f"_meta.{TENANT_META_KEY}",
        )
    return named


def _tool(
    tools: FunctionTools | ReviewTools, definition: ToolDefinition, context: Context | None
) -> Tool:
    name = definition.name

    async def handler(arguments: dict[str, Any], ctx: MCPContext) -> CallToolResult:
        try:
            caller = context if context is not None else _authenticated_context()
            tenant_id = _addressed_tenant(ctx)
        except EffectLedgerError as exc:
            return _call_result(
                ToolResult(
                    tool=name,
                    data={"error": exc.to_dict()},
                    guidance="The call was refused and nothing was recorded.",
                    is_error=True,
                )
            )
        correlation = Correlation(tool_call_id=f"mcp:{ctx.request_id}"[:256], framework="mcp")
        call = functools.partial(
            tools.call, caller, name, arguments, correlation=correlation, tenant_id=tenant_id
        )
        # The ledger is synchronous: run it off the event loop, one whole call per thread hop.
        return _call_result(await anyio.to_thread.run_sync(call))

    return Tool(
        fn=handler,
        name=name,
        title=None,
        description=definition.description,
        parameters=dict(definition.parameters),
        fn_metadata=FuncMetadata(arg_model=_RawArguments),
        is_async=True,
        context_kwarg="ctx",
        annotations=_annotations(definition),
    )


def build_server(
    ledger: EffectLedger,
    *,
    identities: TokenIdentities | None = None,
    context: Context | None = None,
    server_url: str = "http://127.0.0.1:8000/mcp",
    instructions: str | None = None,
    review: bool = False,
) -> MCPServer[Any]:
    """An ``MCPServer`` exposing the ledger's function tools; pass exactly one source of identity.

    ``identities`` (for streamable HTTP): every request must carry a bearer token they know.
    ``context`` (for stdio): the launching host's context, used for every call. ``server_url``
    is the public URL of the HTTP endpoint (the resource the tokens are for). ``review`` adds
    the reviewer's read-only ``pending_proposals`` tool (:mod:`effectledger.callers.tools.review`)
    for servers that reviewers, not agents, connect to.
    """
    if (identities is None) == (context is None):
        raise InvalidInput("pass exactly one of identities (HTTP) or context (stdio)")
    auth = None
    if identities is not None:
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(server_url),
            resource_server_url=AnyHttpUrl(server_url),
            # The verifier's tokens are issued for this server only; it checks them itself.
            validate_token_resource=False,
        )
    tools = FunctionTools(ledger)
    registered: list[Tool] = [_tool(tools, d, context) for d in tools.definitions()]
    if review:
        desk = ReviewTools(ledger)
        registered += [_tool(desk, d, context) for d in desk.definitions()]
    return MCPServer(
        SERVER_NAME,
        instructions=instructions
        or (
            "Propose consequential actions with the propose tools; perform them only with "
            "perform_proposal once approved. Who you act for comes from your credentials, "
            "never from arguments. Report an uncertain result as pending."
        ),
        token_verifier=identities,
        auth=auth,
        tools=registered,
        log_level="WARNING",
    )


def serve_stdio(ledger: EffectLedger, context: Context, *, review: bool = False) -> None:
    """Serve the ledger's tools over stdio, acting for ``context``, until the host closes it.

    ``review`` adds the reviewer's ``pending_proposals`` tool (see :func:`build_server`).
    """
    build_server(ledger, context=context, review=review).run(transport="stdio")


def serve_streamable_http(
    ledger: EffectLedger,
    identities: TokenIdentities,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    public_url: str | None = None,
    review: bool = False,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the ledger's tools over streamable HTTP to bearer-token holders until interrupted.

    ``public_url`` is the endpoint's URL as clients reach it (default ``http://HOST:PORT/PATH``);
    ``review`` adds the reviewer's ``pending_proposals`` tool (see :func:`build_server`). The
    port is bound first (``port=0`` takes a free one), so the server knows its own URL, which
    ``announce`` is given before the server starts.
    """
    import uvicorn

    listener = _listen(host, port)
    try:
        url = public_url or f"http://{host}:{listener.getsockname()[1]}{path}"
        server = build_server(ledger, identities=identities, server_url=url, review=review)
        app = server.streamable_http_app(streamable_http_path=path, host=host)
        if announce is not None:
            announce(url)
        config = uvicorn.Config(app, host=host, port=listener.getsockname()[1], lifespan="on")
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        listener.close()


def _listen(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP spelled out: asyncio turns Nagle off (TCP_NODELAY) only for sockets whose
    # proto says TCP, and a socket made with proto 0 would hold every response body back for
    # the client's delayed ACK (about 40 ms per request on loopback).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    return listener


@contextlib.contextmanager
def serve_http_in_thread(
    build: Callable[[str], MCPServer[Any]],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    path: str = "/mcp",
    json_response: bool = False,
    startup_timeout: float = 15.0,
) -> Iterator[str]:
    """Serve ``build(url)`` over streamable HTTP in a background thread; yield its URL.

    Binds first (``port=0`` picks a free port) so the server is built knowing its own URL, and
    stops the server and joins the thread on exit. ``json_response`` answers each POST with one
    JSON body instead of an SSE stream. For tests, benchmarks and embedding.
    """
    import uvicorn

    listener = _listen(host, port)
    url = f"http://{host}:{listener.getsockname()[1]}{path}"
    app = build(url).streamable_http_app(
        streamable_http_path=path, host=host, json_response=json_response
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the MCP server at {url} did not start")
            time.sleep(0.01)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=startup_timeout)
        listener.close()
