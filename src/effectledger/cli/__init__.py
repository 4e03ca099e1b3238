"""The ``effectledger`` command: demo, migrate, status, recover, capacity, worker, config, audit,
serve, keys, proposals, approve, deny, mcp, witness.

Each command group is one module exposing ``register(commands)``, which adds its parsers and
gives each a ``handler(args, out) -> exit code`` with ``set_defaults``. Adding a command is one
module and one line in :data:`COMMAND_GROUPS`.

Exit codes: 0 success; 1 an effectledger error, printed on standard error as one line
``error [code]: message`` with the error's stable code; 2 a usage error; 3 ``status`` found an
operation whose outcome is still uncertain (only with ``--fail-on-uncertain``); 130 interrupted.
No traceback reaches the user: an unexpected failure is reported as
``error [effectledger_error]: ...`` (set ``EFFECTLEDGER_DEBUG=1`` to see the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Protocol

import effectledger
from effectledger.cli import (
    audit,
    capacity,
    config,
    demo,
    http_api,
    ledger,
    mcp,
    receiver,
    review,
    witness,
    worker,
)
from effectledger.cli.options import Commands, check_store_urls
from effectledger.cli.output import Output
from effectledger.errors import EffectLedgerError

__all__ = ["COMMAND_GROUPS", "CommandGroup", "Handler", "build_parser", "main"]

Handler = Callable[[argparse.Namespace, Output], int]
"""What ``set_defaults(handler=...)`` holds: run the parsed command, return its exit code."""


class CommandGroup(Protocol):
    """A module that adds one group of commands to the ``effectledger`` parser."""

    def register(self, commands: Commands) -> None:
        """Add this group's parsers, each with ``set_defaults(handler=...)``."""
        ...


COMMAND_GROUPS: tuple[CommandGroup, ...] = (
    demo,
    ledger,
    capacity,
    worker,
    config,
    audit,
    witness,
    receiver,
    http_api,
    review,
    mcp,
)
"""The modules whose ``register`` adds the top-level commands, in help order."""


class _Parser(argparse.ArgumentParser):
    """An argument parser that names an unknown flag given where a command was expected.

    ``argparse`` checks required subcommands before it reports unrecognized arguments, so
    ``effectledger --bogus`` would say only that COMMAND is required; this one says which flag
    it does not know. Subcommand parsers are made of the same class.
    """

    _given: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._given, namespace)

    def error(self, message: str) -> typing.NoReturn:
        if message.startswith("the following arguments are required"):
            unknown = [
                arg
                for arg in self._given
                if arg.startswith("-")
                and arg != "-"
                and arg.partition("=")[0] not in self._option_string_actions
            ]
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``effectledger`` command."""
    parser = _Parser(
        prog="effectledger",
        description="A durable ledger for an AI agent's consequential tool calls.",
    )
    parser.add_argument(
        "--version", action="version", version=f"effectledger {effectledger.__version__}"
    )
    commands = typing.cast(
        Commands, parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    )
    for group in COMMAND_GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    out = Output(json_mode=getattr(args, "json", False), wide=getattr(args, "wide", False))
    try:
        check_store_urls(args)
        return handler(args, out)
    except EffectLedgerError as exc:
        out.error(exc.code, exc.message)
        return 1
    except KeyboardInterrupt:
        out.line("stopped", err=True)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the interpreter's final
        # flush from failing again on the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:  # the last line of defence: never a traceback
        if os.environ.get("EFFECTLEDGER_DEBUG"):
            raise
        out.error(
            EffectLedgerError.code,
            f"unexpected {type(exc).__name__}: {exc} (set EFFECTLEDGER_DEBUG=1 for details)",
        )
        return 1
