"""The witness's HTTP server: half-sent requests time out, and the threads it runs are bounded."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.audit.witnessing.witness import Witness
from effectledger.audit.witnessing.witness_http import PATH, serve_witness
from tests.unit.test_witness import LOG, NOW, leaves, note, request


def _witness(tmp_path: Path) -> Witness:
    return Witness(
        tmp_path / "witness.db",
        Cosigner("witness.example/w1", bytes(range(64, 96))),
        [LOG.verifier()],
        clock=lambda: NOW,
    )


def _half_sent(port: int) -> socket.socket:
    """A connection that sends the start of a request and then nothing."""
    held = socket.create_connection(("127.0.0.1", port))
    held.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
    return held


def _submit_first(port: int) -> int:
    tree = MerkleTree(leaves(3))
    body = request(0, [], note(tree, 3))
    asked = urllib.request.Request(f"http://127.0.0.1:{port}{PATH}", data=body, method="POST")
    with urllib.request.urlopen(asked, timeout=30) as answer:
        return int(answer.status)


def test_a_half_sent_request_is_closed_after_the_socket_timeout(tmp_path: Path) -> None:
    """A connection that stops mid-request is closed by the server, which answers others."""
    witness = _witness(tmp_path)
    server = serve_witness(witness, timeout=0.3)
    port = int(server.server_address[1])
    try:
        held = _half_sent(port)
        held.settimeout(30)
        assert held.recv(1024) == b""  # the server closed it rather than wait forever
        held.close()
        assert _submit_first(port) == 200
    finally:
        server.shutdown()
        server.server_close()
        witness.close()


def _handlers(before: set[int | None]) -> int:
    """Request handler threads started since ``before`` (not the server's loop or timers)."""
    return sum(
        1
        for thread in threading.enumerate()
        if thread.ident not in before and thread.name not in ("witness", "witness-deadline")
    )


@pytest.mark.slow
def test_many_slow_connections_hold_no_more_threads_than_the_bound(tmp_path: Path) -> None:
    """Eight half-sent requests (three for the slots, five for the listen queue) run
    ``max_threads`` handler threads, no more, while they hang; once they are gone, a real
    submission is answered."""
    witness = _witness(tmp_path)
    before = {thread.ident for thread in threading.enumerate()}
    # Nothing times out during the test: the three slots stay taken until the test lets go.
    server = serve_witness(witness, timeout=120, max_threads=3)
    port = int(server.server_address[1])
    held = [_half_sent(port) for _ in range(8)]
    try:
        deadline = time.monotonic() + 60  # a wait, generous under load; the check is the count
        while _handlers(before) < 3 and time.monotonic() < deadline:  # the slots fill first
            time.sleep(0.01)
        time.sleep(0.1)  # an unbounded server would have taken more of the eight meanwhile
        assert _handlers(before) == 3
        for connection in held:
            connection.close()
        assert _submit_first(port) == 200  # served once the slow ones are gone
    finally:
        for connection in held:
            connection.close()
        server.shutdown()
        server.server_close()
        witness.close()


def test_a_connection_that_drips_bytes_is_cut_off_at_its_deadline(tmp_path: Path) -> None:
    """A client sending a header byte every 0.05 s (each read well within the socket timeout)
    holds its thread only until the connection's deadline: the server closes the connection
    while the client is still sending."""
    witness = _witness(tmp_path)
    server = serve_witness(witness, timeout=30, deadline=0.5)
    port = int(server.server_address[1])
    try:
        dripping = socket.create_connection(("127.0.0.1", port))
        dripping.settimeout(0.05)
        dripping.sendall(b"POST /add-checkpoint HTTP/1.1\r\n")
        closed = False
        for _ in range(2400):  # two minutes of dripping at most; the deadline is 0.5 s
            try:
                dripping.sendall(b"X-Slow: 1\r\n")
                if dripping.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:  # reset: the server closed it
                closed = True
                break
        dripping.close()
        assert closed
        assert _submit_first(port) == 200
    finally:
        server.shutdown()
        server.server_close()
        witness.close()
