"""What the command line prints: escaped text, short ids, tables, JSON, and the error line.

Stored text (provider references, reasons, event details) may hold terminal control sequences;
:func:`effectledger.display.printable` (the one the library's explanations use) turns every control
and format character and every lone surrogate into a visible escape before anything reaches the
terminal. JSON output is ASCII with ``\\u`` escapes.
Tables show ids and digests shortened (``--wide`` or ``--json`` give them in full); plain lines
and the ``error [code]: message`` line are never wrapped.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from effectledger.display import printable

__all__ = ["SHORT_ID", "Output", "jsonable", "printable", "short", "short_reference"]

SHORT_ID = 10
"""Characters of an id or digest a table shows without ``--wide``."""


def short(value: str | None, *, wide: bool = False) -> str:
    """An id or digest as a table shows it: in full with ``wide``, else its first characters."""
    if value is None:
        return "-"
    if wide or len(value) <= SHORT_ID + 1:
        return value
    return value[:SHORT_ID] + "…"


def short_reference(value: str | None, *, wide: bool = False) -> str:
    """An evidence reference (``kind/id``): in full with ``wide``, else its id shortened."""
    if value is None or wide:
        return value or "-"
    return short(value.rpartition("/")[2], wide=wide)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: records become objects, times ISO 8601, durations seconds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: jsonable(getattr(value, field.name)) for field in dataclasses.fields(value)
        }
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, frozenset | set):
        return sorted(jsonable(item) for item in value)
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Path):
        return str(value)
    return value


class Output:
    """Where one command prints: plain lines, tables, or JSON documents with ``--json``."""

    def __init__(self, *, json_mode: bool = False, wide: bool = False) -> None:
        self.json_mode = json_mode
        self.wide = wide

    def short(self, value: str | None) -> str:
        """An id or digest as this output's tables show it."""
        return short(value, wide=self.wide)

    def short_reference(self, value: str | None) -> str:
        """An evidence reference as this output's tables show it."""
        return short_reference(value, wide=self.wide)

    def line(self, text: str = "", *, err: bool = False) -> None:
        """Print one line of plain text, escaped and never wrapped."""
        stream = sys.stderr if err else sys.stdout
        print(printable(text), file=stream, flush=True)

    def lines(self, text: str) -> None:
        """Print text of several lines, each escaped."""
        for line in text.splitlines():
            self.line(line)

    def json(self, document: Any) -> None:
        """Print ``document`` as one line of ASCII-only JSON."""
        print(json.dumps(jsonable(document), ensure_ascii=True), flush=True)

    def console(self) -> Console:
        """A console for tables and styled lines; ``--wide`` lets tables grow past 80 columns."""
        return Console(highlight=False, width=10_000 if self.wide else None)

    def table(
        self,
        title: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[str]],
        *,
        no_wrap: Iterable[str] = (),
        header: bool = True,
    ) -> None:
        """Print a table; every cell is escaped, the ``no_wrap`` columns are never folded."""
        keep = set(no_wrap)
        table = Table(
            title=escape(printable(title)),
            show_header=header,
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            collapse_padding=True,
        )
        for column in columns:
            table.add_column(column, no_wrap=column in keep, overflow="fold")
        for row in rows:
            table.add_row(*(escape(printable(cell)) for cell in row))
        self.console().print(table)

    def styled(self, markup: str) -> None:
        """Print one line of console markup (values inside must be passed through
        :meth:`value`); never wrapped."""
        self.console().print(markup, soft_wrap=True)

    @staticmethod
    def value(text: object) -> str:
        """``text`` made safe to place inside console markup."""
        return escape(printable(str(text)))

    @staticmethod
    def error(code: str, message: str) -> None:
        """Print the ``error [code]: message`` line on standard error, never wrapped."""
        print(f"error [{printable(code)}]: {printable(message)}", file=sys.stderr, flush=True)
