"""One deadline for a whole synchronous HTTP exchange: connect, headers, body.

httpx's timeouts bound each single wait, so a server that sends its headers one line at a time
can hold a synchronous request far past any deadline. :class:`DeadlineTransport` is httpx's own
transport over a network backend whose every socket wait is cut to the time left before the
deadline of the exchange running in this thread (:meth:`DeadlineTransport.until`); past it a wait
fails at once as a timeout. The async path needs none of this: ``asyncio.timeout`` bounds it.
"""

from __future__ import annotations

import ssl
import threading
import time
import typing
from collections.abc import Iterator
from contextlib import contextmanager

import httpcore
import httpx

__all__ = ["DeadlineTransport"]


class _Deadline(threading.local):
    ends: float | None = None


def _bounded(deadline: _Deadline, timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the deadline; ``error`` if none is left."""
    if deadline.ends is None:
        return timeout
    left = deadline.ends - time.monotonic()
    if left <= 0:
        raise error("the exchange's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(self._deadline, timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, bounded), self._deadline
        )

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, deadline: _Deadline) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(self._deadline, timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, bounded, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(self._deadline, timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_unix_socket(path, bounded, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's default transport whose socket waits end at the running exchange's deadline."""

    def __init__(self) -> None:
        super().__init__()
        self._deadline = _Deadline()
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        # The same pool httpx builds by default, over the deadline-aware backend.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_DeadlineBackend(self._deadline),
        )

    @contextmanager
    def until(self, ends: float) -> Iterator[None]:
        """Inside the block, no socket wait of this thread lasts past ``ends`` (monotonic)."""
        self._deadline.ends = ends
        try:
            yield
        finally:
            self._deadline.ends = None
