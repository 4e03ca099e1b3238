"""``effectledger mcp``: serve an application's actions as MCP tools over stdio or streamable HTTP.

The application names its ledger with ``--app module:attribute``: an
:class:`~effectledger.EffectLedger` or a callable returning one. Trusted code declares the
actions and destinations, never the command line. An MCP host launches the server over stdio
with ``effectledger mcp ...`` (or ``python -m effectledger.cli mcp ...``).

Identity: over streamable HTTP every request needs a bearer token listed in ``--tokens`` (a
JSON file of ``{"token_sha256", "tenant", "actor", "roles"}`` entries; tokens are kept only as
digests). Over stdio the launching host names the one context the server acts for with
``--tenant``, ``--actor`` and ``--roles``. Arguments never carry identity.

The server itself is the library's (:func:`~effectledger.callers.mcp.serve_stdio`,
:func:`~effectledger.callers.mcp.serve_streamable_http`, extra ``mcp``); this module only
reads the options.
"""

from __future__ import annotations

import argparse

from effectledger.app import EffectLedger
from effectledger.cli.application import load_ledger
from effectledger.cli.options import Commands, add_db
from effectledger.cli.output import Output
from effectledger.errors import InvalidInput
from effectledger.model.operations import Context

__all__ = ["load_app", "register"]


def register(commands: Commands) -> None:
    """Add ``mcp``."""
    parser = commands.add_parser(
        "mcp",
        help="serve the application's actions as MCP tools (stdio or streamable HTTP)",
        description=(
            "Serve one propose tool per declared action, perform_proposal and "
            "operation_status over MCP. Identity comes from bearer tokens (HTTP) or from the "
            "launching host (stdio), never from tool arguments."
        ),
    )
    parser.add_argument(
        "--app",
        required=True,
        metavar="MODULE:ATTRIBUTE",
        help="the EffectLedger to serve, or a callable that returns it",
    )
    add_db(parser)
    parser.add_argument(
        "--transport",
        choices=("stdio", "streamable-http"),
        default="stdio",
        help="stdio (default) or streamable-http",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8000, help="HTTP port (default 8000; 0: any free port)"
    )
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    parser.add_argument(
        "--public-url", help="the endpoint's public URL, if not http://HOST:PORT/PATH"
    )
    parser.add_argument(
        "--review",
        action="store_true",
        help="also offer reviewers the read-only pending_proposals tool (their queue)",
    )
    parser.add_argument("--tokens", help="HTTP: JSON file mapping token SHA-256 digests to callers")
    parser.add_argument("--tenant", help="stdio: the tenant the launching host acts for")
    parser.add_argument("--actor", help="stdio: the actor the launching host acts for")
    parser.add_argument("--roles", default="", help="stdio: comma-separated roles of that actor")
    parser.set_defaults(handler=_run)


def load_app(spec: str, store_url: str | None = None) -> EffectLedger:
    """The ledger named by ``module:attribute`` (a factory is called, with ``store_url`` if it
    takes one; see :mod:`effectledger.cli.application`)."""
    return load_ledger(spec, store_url)


def _run(args: argparse.Namespace, out: Output) -> int:
    """Serve until the transport closes (stdio) or the process is interrupted (HTTP)."""
    if args.transport == "stdio":
        if not args.tenant or not args.actor:
            raise InvalidInput("stdio needs --tenant and --actor: the host names who it acts for")
        if args.tokens:
            raise InvalidInput("--tokens applies to streamable-http; stdio has no headers")
    else:
        if not args.tokens:
            raise InvalidInput("streamable-http needs --tokens: every request must authenticate")
        if args.tenant or args.actor:
            raise InvalidInput(
                "--tenant/--actor apply to stdio; over HTTP each token names its caller"
            )
    try:
        from effectledger.callers.mcp import (
            TokenIdentities,
            serve_stdio,
            serve_streamable_http,
        )
    except ImportError as exc:
        raise InvalidInput("mcp needs the mcp extra: pip install 'effectledger[mcp]'") from exc
    identities = None if args.tokens is None else TokenIdentities.from_file(args.tokens)
    ledger = load_app(args.app, args.db)
    try:
        if identities is None:
            roles = frozenset(role for role in args.roles.split(",") if role)
            context = Context(tenant_id=args.tenant, actor_id=args.actor, roles=roles)
            serve_stdio(ledger, context, review=args.review)
        else:
            serve_streamable_http(
                ledger,
                identities,
                host=args.host,
                port=args.port,
                path=args.path,
                public_url=args.public_url,
                review=args.review,
                announce=lambda url: out.line(f"serving MCP tools on {url}", err=True),
            )
    finally:
        ledger.close()
    return 0
