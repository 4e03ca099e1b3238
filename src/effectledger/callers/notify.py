"""Notifications: a proposal that needs a person's decision is announced to webhooks.

``ledger.notify_with(WebhookNotifier([...], desk_url=...))`` makes every proposal whose policy
needs an approver be posted, after it is recorded, to each webhook: a generic JSON document
(``format="json"``) or a chat-compatible incoming-webhook message (``format="chat"``, a
``{"text": ...}`` body that Slack, Mattermost, Rocket.Chat and similar accept), each with the
link to the proposal's page on the desk. Delivery runs on background threads, one per webhook,
each with a bounded queue: the proposal is committed and returned first, and nothing a webhook
does (refuse, time out, hang up, drip its answer a byte at a time) can block or undo it, or
hold up another webhook. Each attempt is bounded by one deadline for the whole exchange; a
failed delivery is retried with growing pauses, then given up and logged; a full queue drops
the notification with a log line. Logs name a webhook by its scheme and host only: for chat
services the URL's path is the credential. Deliveries live in this process's memory: a
notification still queued when the process stops is not sent (the desk's queue still shows the
proposal).

Every delivery carries the Standard Webhooks headers ``webhook-id`` (one per notification, the
same on each retry) and ``webhook-timestamp``; with a ``secret`` (``whsec_`` and base64, as
Standard Webhooks writes it), ``webhook-signature`` too: ``v1,`` and the base64 HMAC-SHA256 of
``<id>.<timestamp>.<body>`` under the secret's bytes.

Model-derived text (the target, the proposal's arguments) goes through
:func:`effectledger.display.reveal`, the function the desk and the command line use: the chat
message shows a bidi control or an invisible character as ``⟨U+202E⟩`` and says the proposal
holds hidden characters; the JSON document keeps the values exact and names the hidden code
points in ``hidden_characters`` (and the target as shown in ``target_shown``). In the chat
message, every value is escaped by the chat services' rules and set in a code span (``&``,
``<`` and ``>`` as ``&amp;``, ``&lt;``, ``&gt;``; a backtick as ``⟨U+0060⟩``), so a target of
``<https://evil.example|Approve now> <!channel>`` is text, not a link and not a mention: the
desk link is the message's only link.

Requires the ``http`` extra (httpx).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from effectledger.display import hidden_in, reveal
from effectledger.errors import InvalidInput
from effectledger.model.review import PendingProposal

__all__ = [
    "Webhook",
    "WebhookNotifier",
    "chat_message",
    "json_document",
    "sign",
    "where",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Webhook:
    """Where to announce pending proposals, and in which shape."""

    url: str = field(repr=False)
    format: Literal["json", "chat"] = "json"
    secret: str | None = field(default=None, repr=False)
    """Standard Webhooks signing secret, ``whsec_<base64>``; never logged or shown."""

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("https://", "http://")):
            raise InvalidInput("a webhook URL must be http(s)", field="url")
        if self.format not in ("json", "chat"):
            raise InvalidInput("a webhook format is 'json' or 'chat'", field="format")
        if self.secret is not None:
            _secret_bytes(self.secret)

    def __repr__(self) -> str:
        return f"Webhook({where(self.url)!r}, format={self.format!r})"


def where(url: str) -> str:
    """A webhook URL as logs may show it: scheme and host only (the path may be a credential)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


def _secret_bytes(secret: str) -> bytes:
    try:
        if not secret.startswith("whsec_"):
            raise ValueError
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (ValueError, binascii.Error, AttributeError):
        raise InvalidInput(
            "a webhook secret is whsec_ and base64 (Standard Webhooks)", field="secret"
        ) from None
    if len(key) < 16:
        raise InvalidInput("a webhook secret needs at least 16 bytes", field="secret")
    return key


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks ``webhook-signature`` value of ``body``: ``v1,<base64 HMAC>``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_secret_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def _link(desk_url: str, entry: PendingProposal) -> str:
    return f"{desk_url.rstrip('/')}/proposals/{entry.proposal.proposal_id}"


def _hidden(entry: PendingProposal) -> tuple[str, ...]:
    proposal = entry.proposal
    said = [entry.summary or "", proposal.stated_reason or ""]
    return hidden_in([proposal.target, proposal.arguments, *said])


def json_document(entry: PendingProposal, desk_url: str) -> dict[str, Any]:
    """The generic JSON notification of one pending proposal.

    Values are exact; ``hidden_characters`` names the code points :func:`~effectledger.display.
    reveal` flags in the target or the arguments (empty: none) and ``target_shown`` is the
    target as a person should be shown it.
    """
    proposal = entry.proposal
    return {
        "event": "proposal.pending",
        "tenant_id": proposal.tenant_id,
        "proposal_id": proposal.proposal_id,
        "action": proposal.action,
        "target": proposal.target,
        "target_shown": reveal(proposal.target).text,
        "summary": entry.summary,
        "summary_shown": None if entry.summary is None else reveal(entry.summary).text,
        "stated_reason": proposal.stated_reason,
        "stated_reason_shown": (
            None if proposal.stated_reason is None else reveal(proposal.stated_reason).text
        ),
        "hidden_characters": list(_hidden(entry)),
        "units": proposal.units,
        "pool": proposal.pool,
        "proposer_id": proposal.proposer_id,
        "digest": proposal.digest,
        "expires_at": entry.expires_at.isoformat(),
        "waits_for": entry.waits_for,
        "url": _link(desk_url, entry),
    }


def chat_message(entry: PendingProposal, desk_url: str) -> dict[str, str]:
    """The chat-compatible incoming-webhook message of one pending proposal.

    Its text shows every hidden character as ``⟨U+XXXX⟩`` and, when the target or the
    arguments hold any, says so before the link.
    """
    proposal = entry.proposal
    hidden = _hidden(entry)
    warning = (
        f" Warning: it holds hidden characters ({', '.join(hidden)}),"
        " shown as \u27e8U+\u2026\u27e9; read it on the desk before deciding."
        if hidden
        else ""
    )
    said = "" if entry.summary is None else f"{_code(entry.summary)}: "
    text = said + (
        f"{_code(proposal.proposer_id)} proposes {_code(proposal.action)} of "
        f"{_code(proposal.target)}{_capacity(proposal)} in "
        f"{_code(proposal.tenant_id)}: {_escaped(entry.waits_for)}. Expires "
        f"{entry.expires_at.replace(microsecond=0).isoformat()}."
    )
    if proposal.stated_reason is not None:  # the agent's words, never a link or a mention
        text += f" The agent says: {_code(_clipped(proposal.stated_reason))}"
    return {"text": f"{text}{warning} Review it: <{_link(desk_url, entry)}>"}


def _clipped(value: str, most: int = 200) -> str:
    """``value``, cut to ``most`` characters with an ellipsis when longer."""
    return value if len(value) <= most else value[: most - 1] + "\u2026"


def _capacity(proposal: Any) -> str:
    """`` (N units of `pool`)`` for an action that draws capacity, else nothing."""
    if not proposal.units and proposal.pool == proposal.action:
        return ""
    return f" ({proposal.units} units of {_code(proposal.pool)})"


def _escaped(value: str) -> str:
    """``value`` revealed and escaped by the chat services' rules (Slack's three entities)."""
    shown = reveal(value).text
    return shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(value: str) -> str:
    """``value`` as a code span: no link, mention or emphasis inside it is acted on."""
    return "`" + _escaped(value).replace("`", "\u27e8U+0060\u27e9") + "`"


class WebhookNotifier:
    """Posts each pending proposal to every webhook, one background thread and one bounded
    queue per webhook, each attempt bounded by ``deadline`` seconds for the whole exchange."""

    def __init__(
        self,
        webhooks: Sequence[Webhook],
        *,
        desk_url: str,
        attempts: int = 5,
        first_pause: float = 1.0,
        timeout: float = 5.0,
        deadline: float = 10.0,
        queue_size: int = 1000,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not webhooks:
            raise InvalidInput("name at least one webhook")
        if not isinstance(attempts, int) or not 1 <= attempts <= 20:
            raise InvalidInput("attempts must be from 1 to 20", field="attempts")
        if not 0 < timeout <= deadline:
            raise InvalidInput("timeout must be positive and at most the deadline", field="timeout")
        if not isinstance(queue_size, int) or queue_size < 1:
            raise InvalidInput("queue_size must be a positive integer", field="queue_size")
        self.webhooks = tuple(webhooks)
        self.desk_url = desk_url
        self.attempts = attempts
        self.first_pause = first_pause
        self.timeout = timeout
        self.deadline = deadline
        self._sleep = sleep
        self._clock = clock
        self._counts = threading.Lock()
        self.delivered = 0
        self.given_up = 0
        self.dropped = 0
        self._queues: list[queue.Queue[PendingProposal | None]] = []
        self._threads: list[threading.Thread] = []
        for number, webhook in enumerate(self.webhooks):
            waiting: queue.Queue[PendingProposal | None] = queue.Queue(maxsize=queue_size)
            thread = threading.Thread(
                target=self._run,
                args=(webhook, waiting),
                name=f"effectledger-notify-{number}",
                daemon=True,
            )
            self._queues.append(waiting)
            self._threads.append(thread)
            thread.start()

    def __call__(self, entry: PendingProposal) -> None:
        """Queue the announcement of ``entry`` for every webhook; returns at once.

        A webhook whose queue is full drops it, with a log line (the desk still shows it).
        """
        for webhook, waiting in zip(self.webhooks, self._queues, strict=True):
            try:
                waiting.put_nowait(entry)
            except queue.Full:
                self._count("dropped")
                log.warning(
                    "dropped the notification of proposal %s to %s: its queue is full",
                    entry.proposal.proposal_id,
                    where(webhook.url),
                )

    def close(self, *, timeout: float = 30.0) -> None:
        """Deliver what is queued (within ``timeout`` in all), then stop the threads."""
        for waiting in self._queues:
            try:
                waiting.put(None, timeout=timeout)
            except queue.Full:  # pragma: no cover - a webhook still stuck on a full queue
                continue
        ends = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(ends - time.monotonic(), 0))

    def _count(self, what: str) -> None:
        with self._counts:
            setattr(self, what, getattr(self, what) + 1)

    def _run(self, webhook: Webhook, waiting: queue.Queue[PendingProposal | None]) -> None:
        loop = asyncio.new_event_loop()
        client = httpx.AsyncClient(timeout=self.timeout)
        try:
            while True:
                entry = waiting.get()
                if entry is None:
                    return
                try:
                    loop.run_until_complete(self._deliver(client, webhook, entry))
                except Exception:  # pragma: no cover - a bug must not end the webhook's thread
                    log.exception("notifying %s failed", where(webhook.url))
        finally:
            loop.run_until_complete(client.aclose())
            loop.close()

    async def _deliver(
        self, client: httpx.AsyncClient, webhook: Webhook, entry: PendingProposal
    ) -> None:
        document = (
            json_document(entry, self.desk_url)
            if webhook.format == "json"
            else chat_message(entry, self.desk_url)
        )
        body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
        message_id = "msg_" + secrets.token_urlsafe(18)
        pause = self.first_pause
        problem = "no attempt"
        for attempt in range(1, self.attempts + 1):
            timestamp = int(self._clock())
            headers = {
                "content-type": "application/json",
                "webhook-id": message_id,
                "webhook-timestamp": str(timestamp),
            }
            if webhook.secret is not None:
                headers["webhook-signature"] = sign(webhook.secret, message_id, timestamp, body)
            try:
                response = await asyncio.wait_for(
                    client.post(webhook.url, content=body, headers=headers), self.deadline
                )
                if response.status_code < 300:
                    self._count("delivered")
                    return
                problem = f"HTTP {response.status_code}"
            except TimeoutError:
                problem = f"no answer within {self.deadline:g} s"
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            if attempt < self.attempts:
                self._sleep(pause)
                pause *= 2
        self._count("given_up")
        log.warning(
            "gave up notifying %s of proposal %s after %d attempts (%s)",
            where(webhook.url),
            entry.proposal.proposal_id,
            self.attempts,
            problem,
        )
