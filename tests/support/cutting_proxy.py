"""A TCP proxy in front of PostgreSQL that really cuts a connection at its next COMMIT.

Nothing is simulated: the store talks to the real server through this proxy, and when the proxy
is armed it parses the client's protocol messages and, at the first ``COMMIT``, either drops that
message and closes both sockets (the server never commits) or forwards it, swallows the server's
answer and then closes both sockets (the server committed; the client never hears it). Either
way the client sees its connection die while ``COMMIT`` is in flight. Connect through it with
``sslmode=disable`` so the messages are readable.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import struct
import threading

__all__ = ["Cut", "CuttingProxy"]

_STARTUP_CODES = (80877103, 80877104, 80877102)  # SSLRequest, GSSENCRequest, CancelRequest


class Cut(enum.Enum):
    """Where the armed proxy cuts the connection that sends the next COMMIT."""

    LOSE_REQUEST = "the COMMIT never reaches the server"
    LOSE_REPLY = "the server commits; its answer never reaches the client"


class _Link:
    def __init__(self, proxy: CuttingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.swallow = False
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def pump_client(self) -> None:
        """Forward the client's messages, watching each one for COMMIT."""
        buffer = b""
        started = False
        try:
            while not self.closed.is_set():
                data = self.client.recv(65536)
                if not data:
                    break
                buffer += data
                outgoing: list[bytes] = []
                while True:
                    if not started:
                        if len(buffer) < 8:
                            break
                        length, code = struct.unpack("!ii", buffer[:8])
                        if len(buffer) < length:
                            break
                        message, buffer = buffer[:length], buffer[length:]
                        started = code not in _STARTUP_CODES
                    else:
                        if len(buffer) < 5:
                            break
                        length = struct.unpack("!i", buffer[1:5])[0]
                        if len(buffer) < length + 1:
                            break
                        message, buffer = buffer[: length + 1], buffer[length + 1 :]
                        if message[:1] == b"Q" and message[5:].rstrip(b"\0").strip() == b"COMMIT":
                            cut = self.proxy.take_cut()
                            if cut is Cut.LOSE_REQUEST:
                                self.close()
                                return
                            if cut is Cut.LOSE_REPLY:
                                self.swallow = True
                    outgoing.append(message)
                if outgoing:
                    self.server.sendall(b"".join(outgoing))
        except OSError:
            pass
        self.close()

    def pump_server(self) -> None:
        """Forward the server's bytes, or swallow its answer to a cut COMMIT and hang up."""
        buffer = b""
        try:
            while not self.closed.is_set():
                data = self.server.recv(65536)
                if not data:
                    break
                if not self.swallow:
                    self.client.sendall(data)
                    continue
                buffer += data
                while len(buffer) >= 5:
                    length = struct.unpack("!i", buffer[1:5])[0]
                    if len(buffer) < length + 1:
                        break
                    kind, buffer = buffer[:1], buffer[length + 1 :]
                    if kind == b"Z":  # ReadyForQuery: the COMMIT is done on the server
                        self.proxy.after_swallowed_reply(self)
                        self.close()
                        return
        except OSError:
            pass
        self.close()


class CuttingProxy:
    """Listens on 127.0.0.1 and forwards every connection to ``target``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed: Cut | None = None
        self._partition_after = False
        self._links: list[_Link] = []
        self._refusing = False
        self.cuts = 0
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def arm(self, cut: Cut, *, partition_after: bool = False) -> None:
        """Cut the next COMMIT; with ``partition_after`` also sever every connection and refuse
        new ones once the server's answer has been swallowed."""
        with self._lock:
            self._armed = cut
            self._partition_after = partition_after

    def take_cut(self) -> Cut | None:
        with self._lock:
            cut, self._armed = self._armed, None
            if cut is not None:
                self.cuts += 1
            return cut

    def after_swallowed_reply(self, cut: _Link) -> None:
        with self._lock:
            partition, self._partition_after = self._partition_after, False
        if partition:
            self.partition(last=cut)

    def partition(self, *, last: _Link | None = None) -> None:
        """Close every connection and stop accepting new ones: the database is unreachable.

        ``last`` (the connection whose COMMIT answer was swallowed) is closed after all the
        others: its client learns of the cut only once no other pooled connection still works.
        """
        with self._lock:
            self._refusing = True
            links = [link for link in self._links if link is not last]
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        with contextlib.suppress(OSError):
            self._listener.close()
        for link in [*links, *([last] if last is not None else [])]:
            link.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                client.close()
                return
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, server)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=link.pump_client, daemon=True).start()
            threading.Thread(target=link.pump_server, daemon=True).start()

    def close(self) -> None:
        """Stop the proxy and close every connection through it."""
        self.partition()
        self._accepting.join(timeout=5)
