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
from effectledger.errors import InvalidInput
from tests.acceptance.test_authority_matrix import REFUND_30, build_world
from tests.callers.scenarios import AGENT, World, fresh_world
from tests.conftest import count_rows


class Hook:
    """What a webhook server saw, and how it answers: fail the first ``failures`` posts."""

    def __init__(self, failures: int = 0, hold: threading.Event | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[tuple[dict[str, str], bytes]] = []
        self.posts = 0
        self.failures = failures
        self.hold = hold
        self.seen = threading.Event()
        self.three = threading.Event()  # set once three posts were answered 200


@contextmanager
def webhook(hook: Hook) -> Iterator[str]:
    """A webhook server on a free port of 127.0.0.1 answering as ``hook`` says."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            raw = self.rfile.read(length)
            body = json.loads(raw)
            hook.raw.append(({k.lower(): v for k, v in self.headers.items()}, raw))
            hook.posts += 1
            hook.seen.set()
            if hook.hold is not None:
                hook.hold.wait(30)
            status = 503 if hook.posts <= hook.failures else 200
            if status == 200:
                hook.bodies.append(body)
                if len(hook.bodies) >= 3:
                    hook.three.set()
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
    assert "`agent-7` proposes `refund_order` of `ord-1001`" in message["text"]


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
    assert sorted(pauses) == [1.0, 1.0, 2.0, 2.0, 4.0]  # each webhook on its own thread
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
    assert "`refund_order` of `invoice-\u27e8U+202E\u27e9gnp.exe`" in text
    assert "\u202e" not in text
    assert "Warning: it holds hidden characters (U+202E)" in text
    document = json_document(entry, "https://desk.example/desk")
    assert document["target_shown"] == "invoice-\u27e8U+202E\u27e9gnp.exe"
    assert document["target"] == "invoice-\u202egnp.exe"


def _entry(world: World, target: str) -> Any:
    """A pending-proposal entry of a recorded refund, its target replaced by ``target``."""
    from dataclasses import replace

    from effectledger.model.review import PendingProposal

    recorded = world.app.propose(AGENT, "refund_order", REFUND_30)
    proposal = replace(recorded, target=target)
    return PendingProposal(
        proposal=proposal,
        policy_version=proposal.policy_version,
        approvals_required=1,
        approvals_granted=0,
        expires_at=proposal.expires_at,
    )


def test_model_text_in_the_chat_message_is_never_a_link_or_a_mention(world: World) -> None:
    """A target spelling a Slack link and an @channel arrives escaped in a code span: the
    desk link is the message's only link, and nothing pings the channel."""
    from effectledger.callers.notify import chat_message

    hostile = "<https://evil.example|Approve now> <!channel> `x` &amp;"
    text = chat_message(_entry(world, hostile), "https://desk.example/desk")["text"]
    assert "<https://evil" not in text
    assert "<!channel>" not in text
    assert "`&lt;https://evil.example|Approve now&gt; &lt;!channel&gt; \u27e8U+0060\u27e9x" in text
    assert "&amp;amp;" in text
    links = [part.split(">")[0] for part in text.split("<")[1:]]
    assert len(links) == 1
    assert links[0].startswith("https://desk.example/desk/proposals/")


def test_a_dripping_webhook_is_cut_off_at_its_deadline_and_starves_no_other(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """A webhook that sends its answer a byte every 0.2 s is given up after the whole-exchange
    deadline; a healthy webhook beside it gets every notification meanwhile; the log names the
    dripping one by scheme and host only."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def drip() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # the listener was closed
                return

            def answer(conn: socket.socket = connection) -> None:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\n")
                    while not stop.wait(0.2):
                        conn.sendall(b"X")
                except OSError:
                    pass
                finally:
                    conn.close()

            threading.Thread(target=answer, daemon=True).start()

    accepting = threading.Thread(target=drip, daemon=True)
    accepting.start()
    secret_path = "/services/T000/B000/s3cr3t-path"
    dripping = f"http://127.0.0.1:{listener.getsockname()[1]}{secret_path}"
    healthy = Hook()
    caplog.set_level("WARNING", logger="effectledger.callers.notify")
    try:
        with webhook(healthy) as url:
            notifier = WebhookNotifier(
                [Webhook(url=dripping, format="chat"), Webhook(url=url)],
                desk_url="https://desk.example/desk",
                attempts=2,
                timeout=0.5,
                deadline=1.0,
                sleep=lambda _: None,
            )
            world.app.notify_with(notifier)
            proposals = [world.app.propose(AGENT, "refund_order", REFUND_30) for _ in range(3)]
            assert healthy.three.wait(60)
            # Checked by order, not by time: all three reached the healthy webhook while the
            # dripping one was still at work on them (giving all three up takes six deadlines).
            assert notifier.given_up < 3
            notifier.close(timeout=30)
    finally:
        stop.set()
        accepting.join(5)
        listener.close()
    assert [body["proposal_id"] for body in healthy.bodies] == [p.proposal_id for p in proposals]
    assert (notifier.delivered, notifier.given_up) == (3, 3)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "no answer within 1 s" in logged
    assert "s3cr3t" not in logged
    assert "to http://127.0.0.1:" in logged or "notifying http://127.0.0.1:" in logged


def test_generic_deliveries_are_signed_the_standard_webhooks_way(world: World) -> None:
    """With a secret, each delivery carries webhook-id (the same on a retry), webhook-timestamp
    and a v1 HMAC-SHA256 signature that the spec's own steps verify; without one, no
    signature, still an id."""
    import base64
    import hashlib
    import hmac

    key = bytes(range(32))
    secret = "whsec_" + base64.b64encode(key).decode()
    signed, plain = Hook(failures=1), Hook()
    with webhook(signed) as signed_url, webhook(plain) as plain_url:
        notifier = WebhookNotifier(
            [Webhook(url=signed_url, secret=secret), Webhook(url=plain_url)],
            desk_url="https://desk.example/desk",
            sleep=lambda _: None,
            clock=lambda: 1_700_000_000.0,
        )
        world.app.notify_with(notifier)
        world.app.propose(AGENT, "refund_order", REFUND_30)
        notifier.close()
    (first, _), (second, body) = signed.raw  # a 503, then the delivery
    assert first["webhook-id"] == second["webhook-id"]
    assert second["webhook-id"].startswith("msg_")
    assert second["webhook-timestamp"] == "1700000000"
    content = f"{second['webhook-id']}.{second['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    assert second["webhook-signature"].split(" ") == [f"v1,{expected}"]
    ((headers, _),) = plain.raw
    assert "webhook-signature" not in headers
    assert headers["webhook-id"].startswith("msg_")
    assert secret not in repr(Webhook(url=signed_url, secret=secret))
    with pytest.raises(InvalidInput):
        Webhook(url=signed_url, secret="not-a-secret")


def test_a_full_queue_drops_with_a_log_line_and_never_blocks_propose(
    world: World, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A webhook holding its answer with a queue of 2: later notifications are dropped and
    logged; every proposal is committed at once."""
    hold = threading.Event()
    hook = Hook(hold=hold)
    caplog.set_level("WARNING", logger="effectledger.callers.notify")
    with webhook(hook) as url:
        notifier = WebhookNotifier(
            [Webhook(url=url)], desk_url="https://desk.example/desk", queue_size=2
        )
        world.app.notify_with(notifier)
        world.app.propose(AGENT, "refund_order", REFUND_30)
        assert hook.seen.wait(10)  # the first is in flight, held
        for _ in range(4):
            world.app.propose(AGENT, "refund_order", REFUND_30)
        assert count_rows(store_url, "proposals") == 5
        hold.set()
        notifier.close()
    assert notifier.dropped == 2
    assert notifier.delivered == 3
    assert "its queue is full" in caplog.text
