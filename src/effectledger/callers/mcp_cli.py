"""``effectledger mcp``: serve an application's actions as MCP tools over stdio or streamable HTTP.

The application names its service with ``--app module:factory`` (a callable returning an
:class:`~effectledger.service.EffectService`, or the service itself): trusted code registers
the actions and destinations, never the command line.

Identity: over streamable HTTP every request needs a bearer token listed in ``--tokens`` (a
JSON file of ``{"token_sha256", "tenant", "actor", "roles"}`` entries; tokens are kept only as
digests). Over stdio the launching host names the one context the server acts for with
``--tenant``, ``--actor`` and ``--roles``. Arguments never carry identity.

Call :func:`register` with the ``effectledger`` command's subparsers to add the command; its
parser's ``run`` default is the function that executes it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from effectledger.errors import EffectLedgerError, InvalidInput
from effectledger.model import Context

__all__ = ["load_app", "main", "register", "run"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``mcp`` command to an ``argparse`` subparsers object and return its parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp",
        help="serve the application's actions as MCP tools (stdio or streamable HTTP)",
        description=(
            "Serve one propose tool per registered action, perform_proposal and "
            "operation_status over MCP. Identity comes from bearer tokens (HTTP) or from the "
            "launching host (stdio), never from tool arguments."
        ),
    )
    parser.add_argument(
        "--app",
        required=True,
        help="module:attribute naming a factory that returns the EffectService (or the service)",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "streamable-http"),
        default="stdio",
        help="stdio (default) or streamable-http",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    parser.add_argument(
        "--public-url", help="the endpoint's public URL, if not http://HOST:PORT/PATH"
    )
    parser.add_argument("--tokens", help="HTTP: JSON file mapping token SHA-256 digests to callers")
    parser.add_argument("--tenant", help="stdio: the tenant the launching host acts for")
    parser.add_argument("--actor", help="stdio: the actor the launching host acts for")
    parser.add_argument("--roles", default="", help="stdio: comma-separated roles of that actor")
    parser.set_defaults(run=run)
    return parser


def load_app(spec: str) -> Any:
    """The service named by ``module:attribute`` (called first if it is a factory)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInput(f"--app must look like module:attribute, not {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidInput(f"cannot load {spec}: {exc}") from exc
    return target() if callable(target) else target


def run(args: argparse.Namespace) -> int:
    """Serve until the transport closes (stdio) or the process is interrupted (HTTP)."""
    from effectledger.callers.function_tools import FunctionTools
    from effectledger.callers.mcp_server import TokenIdentities, build_server

    if args.transport == "stdio":
        if not args.tenant or not args.actor:
            raise InvalidInput("stdio needs --tenant and --actor: the host names who it acts for")
        if args.tokens:
            raise InvalidInput("--tokens applies to streamable-http; stdio has no headers")
        roles = frozenset(role for role in args.roles.split(",") if role)
        context = Context(tenant_id=args.tenant, actor_id=args.actor, roles=roles)
        tools = FunctionTools(load_app(args.app))
        build_server(tools, context=context).run(transport="stdio")
        return 0
    if not args.tokens:
        raise InvalidInput("streamable-http needs --tokens: every request must authenticate")
    if args.tenant or args.actor:
        raise InvalidInput("--tenant/--actor apply to stdio; over HTTP each token names its caller")
    url = args.public_url or f"http://{args.host}:{args.port}{args.path}"
    identities = TokenIdentities.from_file(args.tokens)
    server = build_server(FunctionTools(load_app(args.app)), identities=identities, server_url=url)
    server.run(
        transport="streamable-http", host=args.host, port=args.port, streamable_http_path=args.path
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mcp`` on its own (``python -m effectledger.callers.mcp_cli``); return the exit code."""
    parser = argparse.ArgumentParser(prog="effectledger")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(["mcp", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.run(args))
    except EffectLedgerError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
