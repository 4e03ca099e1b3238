"""One HTTP exchange for :mod:`effectledger.destinations.http`: build, send, read, classify.

Kept apart from the destination so the sync and async paths share every decision: which
transport errors prove the request was never sent, how a body is read within the deadline, and
what of an answer becomes evidence.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from effectledger.destinations.http_contract import HttpContract
from effectledger.destinations.secrets import SecretHeader, SecretUnavailable
from effectledger.model.evidence import DEFAULT_REDACTED_HEADERS, Evidence, EvidencePolicy, capture
from effectledger.model.operations import Command, Outcome

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Answer",
    "Prepared",
    "RawAnswer",
    "RequestNotSent",
    "answer_from_error",
    "classified",
    "evidence_of",
    "prepare",
    "read_async",
    "read_sync",
    "reference_from",
]

MAX_RESPONSE_BYTES = 1024 * 1024
"""A longer response body is not read: its outcome is Unknown (``response_too_large``)."""

# Raised before any byte of the request left this process: the destination cannot have acted.
_NOT_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
)


class RequestNotSent(Exception):
    """The request could not be built or sent; ``reason`` is a stable code, never a secret."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _DeadlinePassed(Exception):
    """The deadline passed while the answer was being read."""


class _TooLarge(Exception):
    """The answer's body is longer than :data:`MAX_RESPONSE_BYTES`."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request ready to send, built once so that a resend repeats exactly the same bytes."""

    method: str
    url: str
    shown_url: str
    headers: Mapping[str, str] = field(repr=False)
    content: bytes | None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Every credential value sent (secret headers, and authorization-like headers): an answer
    that echoes one has each occurrence scrubbed before it is kept."""


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """A complete response: status, headers and the decoded body (JSON or text)."""

    status: int
    headers: list[tuple[str, str]]
    body: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A classified exchange: its outcome, a reason code, and what was received, if anything."""

    outcome: Outcome
    reason: str
    sent: bool
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None

    @classmethod
    def of(cls, raw: RawAnswer, outcome: Outcome, reason: str) -> Answer:
        """The classification of a complete response."""
        return cls(
            outcome=outcome,
            reason=reason,
            sent=True,
            status=raw.status,
            headers=raw.headers,
            body=raw.body,
        )


def _template_values(command: Command | None, key: str) -> dict[str, str]:
    values = {"key": quote(key, safe="")}
    if command is not None:
        values["action"] = quote(command.action, safe="")
        for name, value in command.arguments.items():
            if isinstance(value, str | int) and not isinstance(value, bool):
                values.setdefault(name, quote(str(value), safe=""))
    return values


def prepare(
    endpoint: str,
    method: str,
    path: str,
    *,
    command: Command | None,
    key: str,
    headers: Mapping[str, str | SecretHeader],
    extra_headers: Mapping[str, str] | None = None,
    body: Any = None,
    credential_headers: frozenset[str] = DEFAULT_REDACTED_HEADERS,
) -> Prepared:
    """Build the request; :class:`RequestNotSent` if the template, body or a secret fails.

    The values of secret headers and of headers named in ``credential_headers`` (lower case) are
    remembered on the result as :attr:`Prepared.secrets`.
    """
    try:
        url = endpoint + path.format_map(_template_values(command, key))
    except (KeyError, IndexError, ValueError):
        raise RequestNotSent("url_template") from None
    sent_headers: dict[str, str] = {}
    secrets: list[str] = []
    try:
        for name, value in headers.items():
            if isinstance(value, SecretHeader):
                sent_headers[name], secret = value.value_and_secret()
                secrets += [sent_headers[name], secret]
            else:
                sent_headers[name] = value
                if name.lower() in credential_headers:
                    secrets += [value, value.split(" ", 1)[-1]]
    except SecretUnavailable:
        raise RequestNotSent("secret_unavailable") from None
    sent_headers.update(extra_headers or {})
    content: bytes | None = None
    if body is not None:
        try:
            content = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        except (TypeError, ValueError):
            raise RequestNotSent("body_not_json") from None
        sent_headers["Content-Type"] = "application/json"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RequestNotSent("url_invalid")
    if "@" in parts.netloc:
        # Userinfo would be stored with the URL and turned into a Basic header by httpx.
        raise RequestNotSent("url_userinfo")
    # The evidence shows where the request went, not its query (which may carry a token).
    shown = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    kept = tuple(sorted({secret for secret in secrets if secret}, key=len, reverse=True))
    return Prepared(method.upper(), url, shown, sent_headers, content, kept)


def _decode(headers: httpx.Headers, data: bytes) -> Any:
    if "json" in headers.get("content-type", ""):
        try:
            return json.loads(data)
        except ValueError:
            pass
    return data.decode("utf-8", errors="replace")


def read_sync(
    client: httpx.Client, request: Prepared, timeout: httpx.Timeout, ends: float
) -> RawAnswer:
    """Send ``request`` and read the whole answer before ``ends`` (monotonic seconds).

    httpx's timeout bounds each wait (connect, write, each read); the caller's
    :class:`~.http_deadline.DeadlineTransport` cuts every wait to the time left, and ``ends``
    also bounds the body read: past it, an incomplete body raises instead of being waited for.
    """
    built = client.build_request(
        request.method, request.url, headers=request.headers, content=request.content,
        timeout=timeout,
    )  # fmt: skip
    try:
        response = client.send(built, stream=True)
    except (httpx.ReadTimeout, httpx.WriteTimeout):
        if time.monotonic() >= ends:
            raise _DeadlinePassed from None
        raise
    try:
        length = response.headers.get("content-length")
        expected = int(length) if length is not None and length.isdigit() else None
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise _TooLarge
                chunks.append(chunk)
                # Past the deadline with more to come: stop waiting. A body that is complete is
                # still a definite answer, however late its last byte came.
                if time.monotonic() > ends and (expected is None or size < expected):
                    raise _DeadlinePassed
        except httpx.ReadTimeout:
            if time.monotonic() >= ends:
                raise _DeadlinePassed from None
            raise
    finally:
        response.close()
    return RawAnswer(response.status_code, list(response.headers.items()), _decode(
        response.headers, b"".join(chunks)))  # fmt: skip


async def read_async(
    client: httpx.AsyncClient, request: Prepared, timeout: httpx.Timeout
) -> RawAnswer:
    """Send ``request`` and read the whole answer (the caller bounds the total time)."""
    built = client.build_request(
        request.method, request.url, headers=request.headers, content=request.content,
        timeout=timeout,
    )  # fmt: skip
    response = await client.send(built, stream=True)
    try:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise _TooLarge
            chunks.append(chunk)
    finally:
        await response.aclose()
    return RawAnswer(response.status_code, list(response.headers.items()), _decode(
        response.headers, b"".join(chunks)))  # fmt: skip


def classified(contract: HttpContract, raw: RawAnswer | Answer) -> Answer:
    """``raw`` classified by ``contract`` (a failed exchange is classified already)."""
    if isinstance(raw, Answer):
        return raw
    outcome, reason = contract.classify(raw.status, raw.body)
    return Answer.of(raw, outcome, reason)


def answer_from_error(exc: Exception) -> Answer:
    """The classification of an exchange that ended without a complete answer.

    Only the exception's class name is kept: its text may carry a URL with a token or payload.
    """
    if isinstance(exc, _NOT_SENT):
        return Answer(outcome=Outcome.RETRYABLE_REJECTION, reason=type(exc).__name__, sent=False)
    if isinstance(exc, _DeadlinePassed | TimeoutError):
        return Answer(outcome=Outcome.UNKNOWN, reason="deadline_passed", sent=True)
    if isinstance(exc, _TooLarge):
        return Answer(outcome=Outcome.UNKNOWN, reason="response_too_large", sent=True)
    return Answer(outcome=Outcome.UNKNOWN, reason=type(exc).__name__, sent=True)


def evidence_of(
    document: Mapping[str, Any],
    answer: Answer,
    policy: EvidencePolicy,
    secrets: tuple[str, ...] = (),
) -> Evidence:
    """The redacted evidence of ``answer`` under ``document`` (where the request went), with
    every occurrence of a sent credential in ``secrets`` scrubbed."""
    full = {
        **document,
        "outcome": answer.outcome.value,
        "reason": answer.reason,
        "sent": answer.sent,
        "status": answer.status,
    }
    return capture(full, policy, headers=answer.headers, body=answer.body, scrub=secrets)


def reference_from(body: Any, path: str, key: str, secrets: tuple[str, ...] = ()) -> str:
    """The provider reference at dotted ``path`` of ``body``, or ``idempotency-key/<key>``
    (also when the value holds a credential that was sent)."""
    value: Any = body
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if (
        isinstance(value, str)
        and 0 < len(value) <= 256
        and value.isprintable()
        and not any(secret in value for secret in secrets)
    ):
        return value
    return f"idempotency-key/{key}"
