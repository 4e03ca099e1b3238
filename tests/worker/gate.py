"""A TCP gate in front of PostgreSQL: open, it forwards; shut, it cuts and refuses connections.

Nothing is simulated: the store talks to the real server through the gate, and shutting it
closes every live connection and answers each new one by closing it at once, as a database
host that went away does. Opening it again lets new connections through on the same port.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["Gate"]


class Gate:
    """Listens on 127.0.0.1 and forwards to ``target`` while it is open."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open = True
        self._closed = False
        self._sockets: list[socket.socket] = []
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def shut(self) -> None:
        """Cut every connection through the gate and refuse new ones."""
        with self._lock:
            self._open = False
            cut, self._sockets = self._sockets, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def reopen(self) -> None:
        """Let new connections through again."""
        with self._lock:
            self._open = True

    def close(self) -> None:
        """Stop listening and cut everything."""
        with self._lock:
            self._closed = True
        self.shut()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    client.close()
                    return
                is_open = self._open
            if not is_open:
                self.refused += 1
                client.close()
                continue
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.extend((client, server))
            threading.Thread(target=_pump, args=(client, server), daemon=True).start()
            threading.Thread(target=_pump, args=(server, client), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
