"""``effectledger mcp``: serve the registered actions as MCP tools (extra ``mcp``).

The options and the server live in :mod:`effectledger.callers.mcp_cli`, which can also run on
its own (``python -m effectledger.callers.mcp_cli``, as an MCP host launches it over stdio).
"""

from __future__ import annotations

import argparse

from effectledger.callers import mcp_cli
from effectledger.cli.options import Commands
from effectledger.cli.output import Output

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Add ``mcp``."""
    mcp_cli.register(commands).set_defaults(handler=_run)


def _run(args: argparse.Namespace, out: Output) -> int:
    return mcp_cli.run(args)
