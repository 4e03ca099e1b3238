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


@pytest.mark.slow
def test_many_slow_connections_hold_no_more_threads_than_the_bound(tmp_path: Path) -> None:
    """Twelve half-sent requests run at most ``max_threads`` handler threads; once they time
    out, a real submission is answered."""
    witness = _witness(tmp_path)
    before = {thread.ident for thread in threading.enumerate()}
    server = serve_witness(witness, timeout=0.3, max_threads=3)
    port = int(server.server_address[1])
    held = [_half_sent(port) for _ in range(12)]

    def handlers() -> int:
        return sum(
            1
            for thread in threading.enumerate()
            if thread.ident not in before and thread.name != "witness"
        )

    try:
        deadline = time.monotonic() + 10
        while handlers() < 3 and time.monotonic() < deadline:  # the slots fill first
            time.sleep(0.01)
        time.sleep(0.1)  # an unbounded server would have accepted the rest meanwhile
        assert handlers() == 3
        assert _submit_first(port) == 200  # served once the slow ones have timed out
    finally:
        for connection in held:
            connection.close()
        server.shutdown()
        server.server_close()
        witness.close()
