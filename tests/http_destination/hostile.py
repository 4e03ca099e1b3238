"""A scripted, hostile HTTP server on 127.0.0.1 that keeps its own log of every request.

Each request is answered by the next step of the script (the last step repeats). A step may
forward the request to a real receiver (which then performs the effect) and answer something
else, answer a fixed status, echo the request's credentials back, or send its headers one line at
a time. The log is the server's own testimony of what reached it.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the hostile server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Step = Callable[["_Handler", Received], None]


@dataclass(slots=True)
class HostileServer:
    """A running hostile server: its URL, its script and its log of requests."""

    url: str
    script: list[Step]
    log: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: int = 0

    def next_step(self, received: Received) -> Step:
        with self.lock:
            self.log.append(received)
            index = min(len(self.log), len(self.script)) - 1
            return self.script[index]

    def answered(self) -> int:
        """How many steps ran to their end: answers the server sent in full."""
        with self.lock:
            return self.finished

    def posts(self) -> int:
        """How many POST requests reached the server."""
        with self.lock:
            return sum(1 for item in self.log if item.method == "POST")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the log that counts is :attr:`HostileServer.log`."""

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        received = Received(self.command, self.path, dict(self.headers.items()), body)
        step = self.server.hostile.next_step(received)
        try:
            step(self, received)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        with self.server.hostile.lock:
            self.server.hostile.finished += 1

    do_GET = do_POST = do_PUT = _serve

    def send_json(
        self, status: int, document: Any, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Answer ``status`` with ``document`` as JSON and any extra ``headers``."""
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hostile: HostileServer


def answer(status: int, document: Any = None, *headers: tuple[str, str]) -> Step:
    """A step that answers ``status`` with ``document`` (default ``{"error": "refused"}``)."""

    def step(handler: _Handler, received: Received) -> None:
        handler.send_json(status, {"error": "refused"} if document is None else document, headers)

    return step


def forward(target_url: str, status: int | None = None) -> Step:
    """A step that forwards the request to ``target_url`` (it acts), then answers ``status``
    instead of the target's answer (``None``: the target's own answer)."""
    parts = urlsplit(target_url)

    def step(handler: _Handler, received: Received) -> None:
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        try:
            headers = {k: v for k, v in received.headers.items() if k.lower() != "host"}
            connection.request(received.method, received.path, received.body, headers)
            reply = connection.getresponse()
            data = reply.read()
        finally:
            connection.close()
        if status is not None:
            handler.send_json(status, {"error": "unavailable"})
            return
        handler.send_json(reply.status, json.loads(data) if data else None)

    return step


def echo_credentials(status: int = 201) -> Step:
    """A step that copies the request's ``Authorization`` value into its body and headers."""

    def step(handler: _Handler, received: Received) -> None:
        secret = received.headers.get("Authorization", "")
        token = secret.split(" ", 1)[-1]
        document = {
            "id": "ref-1",
            "seen": secret,
            "note": f"called with {token}!",
            "authorization": secret,
            "nested": [{"Token": token}],
        }
        handler.send_json(status, document, [("X-Echo", secret), ("X-Token", token)])

    return step


def drip_headers(interval_s: float, lines: int, status: int = 201) -> Step:
    """A step that sends the status line, then one header line every ``interval_s``."""

    def step(handler: _Handler, received: Received) -> None:
        data = json.dumps({"id": "ref-slow"}).encode()
        handler.wfile.write(f"HTTP/1.1 {status} OK\r\n".encode())
        handler.wfile.flush()
        for number in range(lines):
            time.sleep(interval_s)
            handler.wfile.write(f"X-Drip-{number}: {number}\r\n".encode())
            handler.wfile.flush()
        handler.wfile.write(b"Content-Type: application/json\r\n")
        handler.wfile.write(f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        handler.wfile.flush()

    return step


@contextmanager
def hostile(*script: Step) -> Iterator[HostileServer]:
    """Serve ``script`` on a free 127.0.0.1 port for the ``with`` block, then stop."""
    server = _Server(("127.0.0.1", 0), _Handler)
    host, port = server.server_address[:2]
    running = HostileServer(url=f"http://{host!s}:{port}", script=list(script))
    server.hostile = running
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield running
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port that refuses connections for the ``with`` block: bound and never
    listened on, so it refuses them, and held, so no other process can take it meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])
