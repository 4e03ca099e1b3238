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

_SERVED = re.compile(r"the HTTP API: (http://[^/\s]+)/v1/")


def served_address(process: subprocess.Popen[str], *, timeout: float = 120) -> tuple[str, str]:
    """``effectledger serve --port 0``'s base URL (``http://127.0.0.1:PORT``) and the output
    read up to it; the process's standard error must go to its standard output, a pipe."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
            if _SERVED.search(line):
                return
        lines.put("")  # the output ended first

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("serve printed no address:\n" + "".join(seen)) from None
        seen.append(line)
        found = _SERVED.search(line)
        if found:
            return found.group(1), "".join(seen)
        if not line:
            raise AssertionError("serve ended before it listened:\n" + "".join(seen))
