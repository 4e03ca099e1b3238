"""``effectledger receiver``: serve the reference HTTP receiver (extra ``receiver``)."""

from __future__ import annotations

import argparse
import os

from effectledger.cli.options import Commands
from effectledger.cli.output import Output
from effectledger.errors import InvalidInput
from effectledger.extras import require_extra

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Add ``receiver``."""
    parser = commands.add_parser(
        "receiver",
        help="serve the reference HTTP receiver (its own SQLite database)",
        description=(
            "Serve the reference receiver: an HTTP API that performs each request once per "
            "Idempotency-Key and answers lookups by key. Needs the 'receiver' extra."
        ),
    )
    parser.add_argument(
        "--port", type=int, required=True, help="TCP port to listen on (0: any free port)"
    )
    parser.add_argument("--db", required=True, help="the receiver's own SQLite file")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument(
        "--token-env",
        default=None,
        help="require 'Authorization: Bearer <token>', the token read from this variable",
    )
    parser.add_argument(
        "--allow-faults",
        action="store_true",
        help="serve PUT /_receiver/faults, which makes the receiver fail on purpose (tests only)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, out: Output) -> int:
    """Serve until interrupted."""
    if not 0 <= args.port < 65536:
        raise InvalidInput("--port must be from 0 (any free port) to 65535", field="port")
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            raise InvalidInput(
                f"environment variable {args.token_env} is not set", field="token_env"
            )
    require_extra("receiver", "The receiver")
    from effectledger.receiver.server import run_receiver

    run_receiver(
        args.db,
        port=args.port,
        host=args.host,
        token=token,
        allow_faults=args.allow_faults,
        announce=lambda url: out.line(f"serving the reference receiver on {url}", err=True),
    )
    return 0
