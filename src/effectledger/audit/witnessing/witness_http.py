"""A witness over HTTP (``POST /add-checkpoint``), and the client a sealer submits with.

The server is the standard library's threading HTTP server around a
:class:`~effectledger.audit.witnessing.witness.Witness`; it listens where it is told (``127.0.0.1``
by default) and reads at most :data:`~effectledger.audit.witnessing.witness.MAX_REQUEST_BYTES` of a
body. :func:`submit_checkpoint` asks one witness to cosign a checkpoint: it sends the old size it
believes the witness holds with the matching consistency proof, and on ``409`` asks again
from the size the witness names, with a proof computed by ``proof_from`` (up to three times,
as other submitters may move the witness on meanwhile).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import socket
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from effectledger.audit.witnessing.cosign import CosignatureVerifier
from effectledger.audit.witnessing.witness import MAX_REQUEST_BYTES, SIZE_CONTENT_TYPE, Witness
from effectledger.errors import AuditVerificationFailed

__all__ = ["WitnessRefusal", "serve_witness", "submit_checkpoint"]

PATH = "/add-checkpoint"
# The first request, then each 409 followed to the size the witness names, while that size
# grows: a witness only moves forward, and racing sealers can move it several times between
# two requests of one of them (16 sealers behind a connection pooler did, in the race tests).
_ATTEMPTS = 32


_log = logging.getLogger("effectledger.witness")

SOCKET_TIMEOUT_S = 10.0
"""How long the server waits on one read or write of a connection before it closes it."""
CONNECTION_DEADLINE_S = 60.0
"""How long one connection may last in all: a client that sends a byte now and then, or keeps
one connection alive with request after request, is cut off then."""
MAX_THREADS = 16
"""Requests handled at once; further connections wait in the listen queue."""


class _BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that handles at most ``max_threads`` connections at once.

    Beside the socket timeout of each read and the deadline of each connection, this bounds
    what slow or half-sent requests can hold: at most ``max_threads`` threads, each until the
    timeout of a read or the connection's deadline, whichever comes first.
    """

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_threads: int,
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_threads)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()  # the accept loop waits here while every slot is busy
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away (a broken pipe, a reset) is no fault of the witness's.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        _log.exception("the witness failed a request from %s", client_address[0])

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _handler(witness: Witness, timeout: float, deadline: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        _cut_off: threading.Timer

        def setup(self) -> None:
            super().setup()
            self._cut_off = threading.Timer(deadline, self._end_connection)
            self._cut_off.name = "witness-deadline"
            self._cut_off.daemon = True
            self._cut_off.start()

        def finish(self) -> None:
            self._cut_off.cancel()
            super().finish()

        def _end_connection(self) -> None:
            # Shutting the socket down wakes the read that waits on it: the handler then ends.
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def do_POST(self) -> None:
            if self.path != PATH:
                self._answer(404, b"not found\n", "text/plain; charset=utf-8")
                return
            length = self.headers.get("Content-Length", "")
            if not length.isdigit() or int(length) > MAX_REQUEST_BYTES:
                self._answer(400, b"a body of known, bounded length\n", "text/plain")
                return
            answer = witness.add_checkpoint(self.rfile.read(int(length)))
            self._answer(answer.status, answer.body, answer.content_type)

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Requests are not logged to stderr (a checkpoint is public, but noise is not)."""

    Handler.timeout = timeout  # StreamRequestHandler sets it on the connection's socket
    return Handler


def serve_witness(
    witness: Witness,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    timeout: float = SOCKET_TIMEOUT_S,
    max_threads: int = MAX_THREADS,
    deadline: float = CONNECTION_DEADLINE_S,
) -> ThreadingHTTPServer:
    """A started server for ``witness`` (``port`` 0: any free port); ``shutdown()`` stops it.

    A connection that sends nothing for ``timeout`` seconds is closed, and so is one still
    open ``deadline`` seconds after it was accepted, whatever it sends; at most
    ``max_threads`` requests are handled at once.
    """
    server = _BoundedServer((host, port), _handler(witness, timeout, deadline), max_threads)
    threading.Thread(target=server.serve_forever, name="witness", daemon=True).start()
    return server


@dataclass(frozen=True, slots=True)
class WitnessRefusal:
    """What a witness answered instead of a cosignature."""

    status: int
    message: str


def _post(url: str, body: bytes, timeout: float) -> tuple[int, str, str]:
    request = urllib.request.Request(
        url.rstrip("/") + PATH, data=body, method="POST", headers={"Content-Type": "text/plain"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get_content_type(), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get_content_type(), error.read().decode()


def submit_checkpoint(
    url: str,
    witness_key: CosignatureVerifier,
    note: str,
    *,
    old_size: int,
    proof: Sequence[bytes],
    proof_from: Callable[[int], Sequence[bytes]],
    timeout: float = 10.0,
) -> str:
    """The witness's verified cosignature line of ``note``, or :class:`AuditVerificationFailed`.

    A refusal (any answer but 200, after following a 409 to the size the witness names, again
    while that size grows) is
    reason ``witness_refused`` with ``details["status"]``; a 200 whose line does not verify
    with ``witness_key`` is ``cosignature_invalid``. A witness that cannot be reached raises
    :class:`OSError` (or :class:`http.client.HTTPException`), as ``urllib`` does.

    ``old_size`` and ``proof`` are the size the witness is believed to hold and the proof from
    it; ``proof_from(size)`` gives the proof from another size when the witness names one.
    """
    size, body = old_size, proof
    for _ in range(_ATTEMPTS):
        lines = "".join(base64.b64encode(node).decode() + "\n" for node in body)
        status, content_type, text = _post(url, f"old {size}\n{lines}\n{note}".encode(), timeout)
        if status == 200:
            cosigned = witness_key.cosigned(note + text)
            if cosigned is None:
                raise AuditVerificationFailed(
                    f"the witness at {url} answered without a valid cosignature by "
                    f"{witness_key.name}",
                    reason="cosignature_invalid",
                    witness=url,
                )
            return next(line + "\n" for line in text.splitlines() if line.strip())
        if status == 409 and content_type == SIZE_CONTENT_TYPE and text.strip().isdigit():
            named = int(text.strip())
            if named <= size and size != old_size:
                break  # the witness went back, or named the same size again: no progress
            size = named
            body = proof_from(size)
            continue
        raise AuditVerificationFailed(
            f"the witness at {url} refused the checkpoint ({status}): {text.strip()}",
            reason="witness_refused",
            witness=url,
            status=status,
        )
    raise AuditVerificationFailed(
        f"the witness at {url} refused the checkpoint: it holds another size of this log",
        reason="witness_refused",
        witness=url,
        status=409,
    )
