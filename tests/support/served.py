"""The address a server started with ``--port 0`` says it listens on, read from its output.

Asking the system for a free port, closing it and handing the number to a child leaves a moment
in which another process may take it; a server that binds port 0 itself and prints where it
listens has no such moment.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading

SERVE = re.compile(r"the HTTP API: (http://[^/\s]+)/v1/")
"""Where ``effectledger serve`` says its API is."""
RECEIVER = re.compile(r"serving the reference receiver on (http://\S+)")
"""Where ``effectledger receiver`` says it is."""
MCP = re.compile(r"serving MCP tools on (http://\S+)")
"""Where ``effectledger mcp --transport streamable-http`` says its endpoint is."""


def served_address(
    process: subprocess.Popen[str], *, says: re.Pattern[str] = SERVE, timeout: float = 120
) -> tuple[str, str]:
    """The base URL (``http://127.0.0.1:PORT``) a server started with ``--port 0`` prints, as
    ``says`` finds it, and the output read up to it; the process's standard error must go to
    its standard output, a pipe."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
            if says.search(line):
                return
        lines.put("")  # the output ended first

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no address printed:\n" + "".join(seen)) from None
        seen.append(line)
        found = says.search(line)
        if found:
            return found.group(1), "".join(seen)
        if not line:
            raise AssertionError("ended before it listened:\n" + "".join(seen))
