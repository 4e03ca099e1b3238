"""Notifications of proposals that need a decision: real HTTP webhooks on 127.0.0.1.

A webhook receives the generic JSON or the chat message with the link to the proposal's page;
a failing webhook is retried and then given up; a webhook that hangs never holds up the
proposal, which is committed and returned first.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from effectledger import ManualClock, RulePolicy
from effectledger.actions.policy import Preauthorization
from effectledger.callers.notify import Webhook, WebhookNotifier
from tests.acceptance.test_authority_matrix import REFUND_30, build_world
from tests.callers.scenarios import AGENT, World, fresh_world
from tests.conftest import count_rows


class Hook:
    """What a webhook server saw, and how it answers: fail the first ``failures`` posts."""

    def __init__(self, failures: int = 0, hold: threading.Event | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.posts = 0
        self.failures = failures
        self.hold = hold
        self.seen = threading.Event()


@contextmanager
def webhook(hook: Hook) -> Iterator[str]:
    """A webhook server on a free port of 127.0.0.1 answering as ``hook`` says."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = json.loads(self.rfile.read(length))
            hook.posts += 1
            hook.seen.set()
            if hook.hold is not None:
                hook.hold.wait(30)
            status = 503 if hook.posts <= hook.failures else 200
            if status == 200:
                hook.bodies.append(body)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action registered."""
    with fresh_world(store_url, tmp_path) as made:
        yield made


def test_webhooks_get_json_and_chat_with_the_page_link(world: World) -> None:
    """Both formats carry the proposal, why it waits and the link to its page on the desk."""
    generic, chat = Hook(), Hook()
    with webhook(generic) as json_url, webhook(chat) as chat_url:
        notifier = WebhookNotifier(
            [Webhook(url=json_url), Webhook(url=chat_url, format="chat")],
            desk_url="https://desk.example/desk",
        )
        world.app.notify_with(notifier)
        proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
        notifier.close()
    (document,) = generic.bodies
    assert document["proposal_id"] == proposal.proposal_id
    assert document["digest"] == proposal.digest
    assert document["url"] == f"https://desk.example/desk/proposals/{proposal.proposal_id}"
    assert document["waits_for"].endswith("1 more needed")
    (message,) = chat.bodies
    assert proposal.proposal_id in message["text"]
    assert "agent-7 proposes refund_order of ord-1001" in message["text"]


def test_a_failing_webhook_is_retried_then_given_up(world: World, store_url: str) -> None:
    """Two 503s are retried to a delivery; a webhook that always fails is given up, logged."""
    flaky, broken = Hook(failures=2), Hook(failures=99)
    pauses: list[float] = []
    with webhook(flaky) as flaky_url, webhook(broken) as broken_url:
        notifier = WebhookNotifier(
            [Webhook(url=flaky_url), Webhook(url=broken_url)],
            desk_url="https://desk.example/desk",
            attempts=4,
            sleep=pauses.append,
        )
        world.app.notify_with(notifier)
        world.app.propose(AGENT, "refund_order", REFUND_30)
        notifier.close()
    assert (flaky.posts, len(flaky.bodies)) == (3, 1)
    assert broken.posts == 4
    assert (notifier.delivered, notifier.given_up) == (1, 1)
    assert pauses == [1.0, 2.0, 1.0, 2.0, 4.0]
    assert count_rows(store_url, "proposals") == 1


def test_a_hanging_webhook_never_holds_up_the_proposal(world: World, store_url: str) -> None:
    """propose returns with its row committed while the webhook has not answered yet."""
    hold = threading.Event()
    hook = Hook(hold=hold)
    with webhook(hook) as url:
        notifier = WebhookNotifier([Webhook(url=url)], desk_url="https://desk.example/desk")
        world.app.notify_with(notifier)
        proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
        assert count_rows(store_url, "proposals") == 1
        assert hook.seen.wait(10)
        assert hook.bodies == []  # the webhook is still holding its answer
        hold.set()
        notifier.close()
    assert [body["proposal_id"] for body in hook.bodies] == [proposal.proposal_id]


def test_only_proposals_that_need_a_person_are_announced(store_url: str, tmp_path: Path) -> None:
    """A pre-authorized proposal needs no decision and sends no notification."""
    policy = RulePolicy(
        version="small-refunds-v1", preauthorization=Preauthorization(max_units_per_operation=50)
    )
    hook = Hook()
    world = build_world(store_url, tmp_path, ManualClock(), policy)
    try:
        with webhook(hook) as url:
            notifier = WebhookNotifier([Webhook(url=url)], desk_url="https://desk.example/desk")
            world.app.notify_with(notifier)
            world.app.propose(AGENT, "refund_order", REFUND_30)
            big = world.app.propose(AGENT, "refund_order", {**REFUND_30, "amount_minor": 90})
            notifier.close()
    finally:
        world.ledger.store.close()
        world.receiver.close()
    assert [body["proposal_id"] for body in hook.bodies] == [big.proposal_id]


def test_hidden_characters_reach_reviewers_visible_and_flagged(world: World) -> None:
    """A U+202E and a U+200B in the model's reason and target-side text arrive in the chat
    message as ⟨U+XXXX⟩ with a warning; the JSON keeps the exact value and names them."""
    generic, chat = Hook(), Hook()
    reason = "invoice-\u202egnp.exe\u200b"
    with webhook(generic) as json_url, webhook(chat) as chat_url:
        notifier = WebhookNotifier(
            [Webhook(url=json_url), Webhook(url=chat_url, format="chat")],
            desk_url="https://desk.example/desk",
        )
        world.app.notify_with(notifier)
        world.app.propose(AGENT, "refund_order", {**REFUND_30, "reason": reason})
        notifier.close()
    (document,) = generic.bodies
    assert document["hidden_characters"] == ["U+202E", "U+200B"]
    assert document["target_shown"] == document["target"] == "ord-1001"
    (message,) = chat.bodies
    assert not any(char in message["text"] for char in "\u202e\u200b")
    assert "Warning: it holds hidden characters (U+202E, U+200B)" in message["text"]


def test_a_hidden_character_in_the_target_is_shown_in_the_chat_text(world: World) -> None:
    """The chat text shows a target's U+202E as ⟨U+202E⟩, so ``gnp.exe`` never reads
    ``exe.png`` in the reviewers' channel; the JSON's target_shown says the same."""
    from dataclasses import replace

    from effectledger.callers.notify import chat_message, json_document
    from effectledger.model.review import PendingProposal

    recorded = world.app.propose(AGENT, "refund_order", REFUND_30)
    proposal = replace(recorded, target="invoice-\u202egnp.exe")  # an action whose target is text
    entry = PendingProposal(
        proposal=proposal,
        policy_version=proposal.policy_version,
        approvals_required=1,
        approvals_granted=0,
        expires_at=proposal.expires_at,
    )
    text = chat_message(entry, "https://desk.example/desk")["text"]
    assert "refund_order of invoice-\u27e8U+202E\u27e9gnp.exe" in text
    assert "\u202e" not in text
    assert "Warning: it holds hidden characters (U+202E)" in text
    document = json_document(entry, "https://desk.example/desk")
    assert document["target_shown"] == "invoice-\u27e8U+202E\u27e9gnp.exe"
    assert document["target"] == "invoice-\u202egnp.exe"
