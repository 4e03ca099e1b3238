"""Counting what a process holds open, and running a call as a framework runs a tool."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def file_descriptors(path: Path, suffix: str = "") -> int:
    """This process's open file descriptors on ``path`` (with ``suffix``: its ``-wal``)."""
    target = str(path.resolve()) + suffix
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            continue
    return found


def on_fresh_thread(call: Callable[[], Any], timeout: float = 60) -> Any:
    """``call()`` on a new thread that ends when it returns, as a framework runs a tool; its
    answer."""
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(call()))
    thread.start()
    thread.join(timeout=timeout)
    assert answer, "the call on its thread failed"
    return answer[0]
