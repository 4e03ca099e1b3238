"""The ``effectledger receiver`` command, for the integrator to wire into the CLI.

``register(subparsers)`` adds ``receiver --port P --db FILE [--host H] [--token-env NAME]``; its
handler is stored as the parser's ``handler`` default (``args.handler(args)`` runs it).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``receiver`` command to an ``argparse`` subparsers object; return its parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "receiver",
        help="serve the reference HTTP receiver (its own SQLite database)",
        description=(
            "Serve the reference receiver: an HTTP API that performs each request once per "
            "Idempotency-Key and answers lookups by key. Needs the 'receiver' extra."
        ),
    )
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on")
    parser.add_argument("--db", required=True, help="the receiver's own SQLite file")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument(
        "--token-env",
        default=None,
        help="require 'Authorization: Bearer <token>', the token read from this variable",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; 2 when the token variable is named but unset."""
    from effectledger.receiver.server import run_receiver

    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            print(f"environment variable {args.token_env} is not set")
            return 2
    run_receiver(args.db, port=args.port, host=args.host, token=token)
    return 0
