"""Notifications: a proposal that needs a person's decision is announced to webhooks.

``ledger.notify_with(WebhookNotifier([...], desk_url=...))`` makes every proposal whose policy
needs an approver be posted, after it is recorded, to each webhook: a generic JSON document
(``format="json"``) or a chat-compatible incoming-webhook message (``format="chat"``, a
``{"text": ...}`` body that Slack, Mattermost, Rocket.Chat and similar accept), each with the
link to the proposal's page on the desk. Delivery runs on a background thread: the proposal is
committed and returned first, and nothing a webhook does (refuse, time out, hang up) can block
or undo it. A failed delivery is retried with growing pauses, then given up and logged.
Deliveries live in this process's memory: a notification still queued when the process stops
is not sent (the desk's queue still shows the proposal).

Model-derived text (the target, the proposal's arguments) goes through
:func:`effectledger.display.reveal`, the function the desk and the command line use: the chat
message shows a bidi control or an invisible character as ``⟨U+202E⟩`` and says the proposal
holds hidden characters; the JSON document keeps the values exact and names the hidden code
points in ``hidden_characters`` (and the target as shown in ``target_shown``).

Requires the ``http`` extra (httpx).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from effectledger.display import hidden_in, reveal
from effectledger.errors import InvalidInput
from effectledger.model.review import PendingProposal

__all__ = ["Webhook", "WebhookNotifier", "chat_message", "json_document"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Webhook:
    """Where to announce pending proposals, and in which shape."""

    url: str
    format: Literal["json", "chat"] = "json"

    def __post_init__(self) -> None:
        if not self.url.startswith(("https://", "http://")):
            raise InvalidInput("a webhook URL must be http(s)", field="url")
        if self.format not in ("json", "chat"):
            raise InvalidInput("a webhook format is 'json' or 'chat'", field="format")


def _link(desk_url: str, entry: PendingProposal) -> str:
    return f"{desk_url.rstrip('/')}/proposals/{entry.proposal.proposal_id}"


def _hidden(entry: PendingProposal) -> tuple[str, ...]:
    return hidden_in([entry.proposal.target, entry.proposal.arguments])


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
    text = (
        f"{proposal.proposer_id} proposes {proposal.action} of {proposal.target} "
        f"({proposal.units} units of {proposal.pool}) in {proposal.tenant_id}: "
        f"{entry.waits_for}. Expires {entry.expires_at.replace(microsecond=0).isoformat()}."
    )
    return {"text": f"{reveal(text).text}{warning} Review it: {_link(desk_url, entry)}"}


class WebhookNotifier:
    """Posts each pending proposal to every webhook from a background thread, with retries."""

    def __init__(
        self,
        webhooks: Sequence[Webhook],
        *,
        desk_url: str,
        attempts: int = 5,
        first_pause: float = 1.0,
        timeout: float = 5.0,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not webhooks:
            raise InvalidInput("name at least one webhook")
        if not isinstance(attempts, int) or not 1 <= attempts <= 20:
            raise InvalidInput("attempts must be from 1 to 20", field="attempts")
        self.webhooks = tuple(webhooks)
        self.desk_url = desk_url
        self.attempts = attempts
        self.first_pause = first_pause
        self._client = client or httpx.Client(timeout=timeout)
        self._sleep = sleep
        self._queue: queue.Queue[PendingProposal | None] = queue.Queue()
        self.delivered = 0
        self.given_up = 0
        self._thread = threading.Thread(target=self._run, name="effectledger-notify", daemon=True)
        self._thread.start()

    def __call__(self, entry: PendingProposal) -> None:
        """Queue the announcement of ``entry``; returns at once."""
        self._queue.put(entry)

    def close(self, *, timeout: float = 30.0) -> None:
        """Deliver what is queued (within ``timeout``), then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout)
        self._client.close()

    def _run(self) -> None:
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            for webhook in self.webhooks:
                self._deliver(webhook, entry)

    def _deliver(self, webhook: Webhook, entry: PendingProposal) -> None:
        body = (
            json_document(entry, self.desk_url)
            if webhook.format == "json"
            else chat_message(entry, self.desk_url)
        )
        pause = self.first_pause
        for attempt in range(1, self.attempts + 1):
            try:
                response = self._client.post(webhook.url, json=body)
                if response.status_code < 300:
                    self.delivered += 1
                    return
                problem = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            if attempt < self.attempts:
                self._sleep(pause)
                pause *= 2
        self.given_up += 1
        log.warning(
            "gave up notifying %s of proposal %s after %d attempts (%s)",
            webhook.url,
            entry.proposal.proposal_id,
            self.attempts,
            problem,
        )
