"""Run the reference receiver with uvicorn: in the foreground (the CLI) or in a thread (tests).

Both bind 127.0.0.1 by default; the thread form picks a free port and reports it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from effectledger.receiver.app import ReceiverFaults, create_app
from effectledger.receiver.store import ReceiverStore

__all__ = ["RunningReceiver", "run_receiver", "serve"]

_START_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class RunningReceiver:
    """A receiver serving in this process: its URL, live fault switches and own store."""

    url: str
    port: int
    faults: ReceiverFaults
    store: ReceiverStore
    app: Starlette


def _config(app: Starlette, host: str, port: int, log_level: str) -> uvicorn.Config:
    # lifespan off: the app has no startup work, and its store is closed by whoever made it.
    return uvicorn.Config(
        app, host=host, port=port, log_level=log_level, lifespan="off", access_log=False
    )


@contextmanager
def serve(
    db_path: str | Path,
    *,
    token: str | None = None,
    faults: ReceiverFaults | None = None,
    allow_faults: bool = False,
    host: str = "127.0.0.1",
    port: int = 0,
    log_level: str = "critical",
) -> Iterator[RunningReceiver]:
    """Serve a receiver in a background thread for the ``with`` block, then stop it and wait."""
    app = create_app(db_path, token=token, faults=faults, allow_faults=allow_faults)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    bound = listener.getsockname()[1]
    server = uvicorn.Server(_config(app, host, bound, log_level))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="receiver", daemon=True
    )
    thread.start()
    started = time.monotonic()
    while not server.started:
        if not thread.is_alive() or time.monotonic() - started > _START_TIMEOUT_S:
            raise RuntimeError("the receiver did not start")
        time.sleep(0.01)
    try:
        yield RunningReceiver(
            url=f"http://{host}:{bound}",
            port=bound,
            faults=app.state.faults,
            store=app.state.store,
            app=app,
        )
    finally:
        server.should_exit = True
        thread.join(timeout=_START_TIMEOUT_S)
        listener.close()
        app.state.store.close()


def run_receiver(
    db_path: str | Path,
    *,
    port: int,
    host: str = "127.0.0.1",
    token: str | None = None,
    faults: ReceiverFaults | None = None,
    allow_faults: bool = False,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve a receiver in the foreground until interrupted (``effectledger receiver``).

    ``port`` 0 takes a free port; ``announce`` is given the URL once the port is bound.
    """
    app = create_app(db_path, token=token, faults=faults, allow_faults=allow_faults)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        bound = listener.getsockname()[1]
        if announce is not None:
            announce(f"http://{host}:{bound}")
        uvicorn.Server(_config(app, host, bound, "info")).run(sockets=[listener])
    finally:
        listener.close()
        app.state.store.close()
