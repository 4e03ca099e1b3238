"""Arguments several commands share, and how they are checked and opened.

Commands that only read or reconcile open the store with ``create=False``: a mistyped
``--db`` or ``--receiver`` is an error, never a new empty file. Only ``migrate`` and ``demo``
create.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeAlias

from effectledger.errors import InvalidInput
from effectledger.store import Store, check_store_url, open_store

__all__ = [
    "DEFAULT_DB",
    "Commands",
    "add_db",
    "add_json",
    "add_wide",
    "check_store_urls",
    "on_stop_signals",
    "open_existing",
    "positive",
    "read_text_file",
    "restore_signals",
    "takes_store_urls",
]

DEFAULT_DB = "sqlite:///effectledger.db"

# A string: argparse's class cannot be subscripted at run time.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The sub-parsers a command group's ``register`` adds its commands to."""


def add_db(parser: argparse.ArgumentParser) -> None:
    """``--db URL``, defaulting to ``$EFFECTLEDGER_DB``; checked by :func:`check_store_urls`."""
    parser.add_argument(
        "--db",
        default=os.environ.get("EFFECTLEDGER_DB", DEFAULT_DB),
        help="store URL: sqlite:///path.db or postgresql://... "
        "(default: $EFFECTLEDGER_DB or %(default)s)",
    )
    takes_store_urls(parser, db="--db")


def takes_store_urls(parser: argparse.ArgumentParser, **options: str) -> None:
    """Say that the arguments ``options`` names (destination -> option) hold store URLs."""
    named = dict(parser.get_default("store_urls") or {})
    named.update(options)
    parser.set_defaults(store_urls=named)


def check_store_urls(args: argparse.Namespace) -> None:
    """Refuse, before the command runs, any store URL given whose scheme names no backend.

    Every command that takes a URL answers a ``mysql://`` one the same way: ``invalid_input``
    naming the option, exit 1, the URL's password as ``***``, nothing opened or loaded.
    """
    for dest, option in (getattr(args, "store_urls", None) or {}).items():
        value = getattr(args, dest, None)
        if value is not None:
            check_store_url(value, field=option.lstrip("-"))


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON document per result instead of text."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON (one document per line, ASCII-escaped) instead of text",
    )


def add_wide(parser: argparse.ArgumentParser) -> None:
    """``--wide``: show ids and digests in full in tables."""
    parser.add_argument(
        "--wide", action="store_true", help="show ids and digests in full instead of shortened"
    )


def open_existing(url: str) -> Store:
    """Open the ledger at ``url`` only if it exists with the current schema; create nothing."""
    return open_store(url, create=False)


def positive(value: float, option: str) -> None:
    """Raise :class:`InvalidInput` unless ``value`` is greater than zero."""
    if not value > 0:
        raise InvalidInput(f"{option} must be greater than 0, not {value}", field=option)


def read_text_file(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or binary file is :class:`InvalidInput`."""
    try:
        return path.read_text("utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} {path} is not UTF-8 text") from exc


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What stops a long-running command: a service manager's SIGTERM, a terminal's SIGINT."""


def on_stop_signals(act: Callable[[int], None]) -> dict[int, Any]:
    """Call ``act(number)`` on SIGTERM and SIGINT; the previous handlers, for
    :func:`restore_signals`.

    Handlers of its own rather than ``KeyboardInterrupt``: SIGTERM would end the process without
    its ``finally`` blocks, and a process started as a background job inherits SIGINT ignored."""

    def handle(number: int, frame: FrameType | None) -> None:
        act(number)

    return {number: signal.signal(number, handle) for number in STOP_SIGNALS}


def restore_signals(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`on_stop_signals` replaced."""
    for number, handler in previous.items():
        signal.signal(number, handler)
