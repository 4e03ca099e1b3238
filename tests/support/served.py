"""The address a server started with ``--port 0`` says it listens on, read from its output.

Asking the system for a free port, closing it and handing the number to a child leaves a moment
in which another process may take it; a server that binds port 0 itself and prints where it
listens has no such moment.
"""

from __future__ import annotations

import re
import subprocess
import threading

SERVE = re.compile(r"the HTTP API: (http://[^/\s]+)/v1/")
"""Where ``effectledger serve`` says its API is."""
RECEIVER = re.compile(r"serving the reference receiver on (http://\S+)")
"""Where ``effectledger receiver`` says it is."""
MCP = re.compile(r"serving MCP tools on (http://\S+)")
"""Where ``effectledger mcp --transport streamable-http`` says its endpoint is."""


class Served:
    """A server process's output, read whole by a thread of its own from the start, and the
    address it said it listens on. Read its output here only (never ``communicate``): one
    reader per pipe, so no line is lost between two."""

    def __init__(self, process: subprocess.Popen[str], says: re.Pattern[str], timeout: float):
        assert process.stdout is not None, "start the process with stdout=PIPE"
        self._process = process
        self._lines: list[str] = []
        self._said: list[str] = []
        self._found = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(says,), daemon=True)
        self._reader.start()
        if not self._found.wait(timeout) or not self._said:
            raise AssertionError("no address printed:\n" + "".join(self._lines))
        self.base = self._said[0]

    def _read(self, says: re.Pattern[str]) -> None:
        assert self._process.stdout is not None
        with self._process.stdout:  # closed once the process has closed its end
            for line in self._process.stdout:
                self._lines.append(line)
                found = None if self._said else says.search(line)
                if found:
                    self._said.append(found.group(1))
                    self._found.set()
        self._found.set()  # the output ended: with or without an address

    def output(self, timeout: float = 60) -> str:
        """Everything the process printed, once it has ended (wait for it first)."""
        self._reader.join(timeout)
        return "".join(self._lines)


def served_address(
    process: subprocess.Popen[str], *, says: re.Pattern[str] = SERVE, timeout: float = 120
) -> Served:
    """The server ``process`` (stderr to stdout, a pipe) as soon as it prints the base URL
    (``http://127.0.0.1:PORT``) that ``says`` finds."""
    return Served(process, says, timeout)
