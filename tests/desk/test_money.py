"""The exact effect as people read it: an action's declared summary, with money as money.

Over real HTTP on 127.0.0.1, a ledger from ``connect()`` declares a refund with a summary and a
money field, and a note action with neither summary nor pool. The queue and the proposal page
lead with "Refund 7.00 GBP on order …" (three currencies, each with its own minor-unit
exponent), the raw arguments and the digest below; the undeclared action shows its arguments
as they are and no invented units or pool. Notifications carry the same summary. A summary
that names a field the arguments lack is refused when the action is declared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from effectledger import Context, Display, EffectLedger, InvalidInput, SimulatedReceiver, connect
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app
from effectledger.display import money
from tests.http_api.server import serving

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))


class Refund(BaseModel):
    """A refund in any currency."""

    order_id: str
    amount_minor: int
    currency: str


class Note(BaseModel):
    """A note to a customer: no money, no pool."""

    customer_id: str
    text: str


REFUND = Display(
    summary="Refund {amount_minor} on order {order_id}", money={"amount_minor": "currency"}
)


@pytest.fixture
def ledger(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A ledger with a refund (summary, money, a pool) and a note (none of them)."""
    receiver = SimulatedReceiver(tmp_path / "receiver.db", synchronous="NORMAL")
    with connect(store_url) as opened:
        opened.action(
            name="refund",
            contract="refund-v1",
            arguments=Refund,
            destination=receiver,
            pool="refunds",
            units=lambda refund: refund.amount_minor,
            target=lambda refund: refund.order_id,
            display=REFUND,
        )
        opened.action(name="note", contract="note-v1", arguments=Note, destination=receiver)
        yield opened
    receiver.close()


@pytest.fixture
def desk(ledger: EffectLedger) -> Iterator[httpx.Client]:
    """An approver logged in to the desk over real HTTP."""
    keys = ApiKeys(ledger.store)
    token = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"]).token
    with (
        serving(create_app(ledger, keys, desk=True, secure_cookies=False)) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        form = client.get("/desk/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        posted = client.post("/desk/login", data={"nonce": nonce.group(1), "token": token})
        assert posted.status_code == 303, posted.text
        yield client


@pytest.mark.parametrize(
    ("minor", "currency", "shown"),
    [
        (1250, "EUR", "12.50 EUR"),
        (1000, "JPY", "1,000 JPY"),
        (700, "GBP", "7.00 GBP"),
        (999999, "GBP", "9,999.99 GBP"),
        (5, "KWD", "0.005 KWD"),
        (-250, "USD", "-2.50 USD"),
    ],
)
def test_money_has_its_currencys_decimals_and_its_code(
    minor: int, currency: str, shown: str
) -> None:
    """Minor units read with the currency's own exponent, grouped, with the ISO code."""
    assert money(minor, currency) == shown


def test_money_never_guesses() -> None:
    """A code Babel does not know, a non-integer amount or a non-code say so instead."""
    assert money(5, "XQZ") == "5 minor units of XQZ (a currency code Babel does not know)"
    assert money("5", "EUR") == "'5' (not an amount)"
    assert money(True, "EUR") == "True (not an amount)"
    assert money(5, "euro") == "5 minor units of 'euro' (not a currency code)"


def test_the_queue_and_the_page_lead_with_the_summary_in_three_currencies(
    ledger: EffectLedger, desk: httpx.Client
) -> None:
    """Each refund reads "Refund <money> on order <id>"; the raw arguments and the digest stay
    below on the page."""
    proposals = {
        shown: ledger.propose(
            AGENT, "refund", {"order_id": order, "amount_minor": minor, "currency": code}
        )
        for order, minor, code, shown in [
            ("ord-2001", 700, "GBP", "7.00 GBP"),
            ("ord-2002", 1000, "JPY", "1,000 JPY"),
            ("ord-2003", 1250, "EUR", "12.50 EUR"),
        ]
    }
    queue = desk.get("/desk/").text

    for shown, proposal in proposals.items():
        order = proposal.arguments["order_id"]
        assert f"Refund {shown} on order {order}</a>" in queue
        page = desk.get(f"/desk/proposals/{proposal.proposal_id}").text
        summary = page.index(f'<dd class="summary">Refund {shown} on order {order}</dd>')
        assert summary < page.index(proposal.digest) < page.index("Arguments (normalized)")
        assert "draws" in queue or "drawing" in page
    assert "units of" not in queue


def test_an_action_without_a_summary_or_pool_shows_its_arguments_and_no_invented_pool(
    ledger: EffectLedger, desk: httpx.Client
) -> None:
    """No summary: the action and target lead; no "units" and no pool named after the action."""
    proposal = ledger.propose(AGENT, "note", {"customer_id": "c-9", "text": "sorry"})
    queue = desk.get("/desk/").text
    (entry,) = [
        chunk[: chunk.index("</li>")]
        for chunk in queue.split('<li class="entry">')[1:]
        if proposal.proposal_id in chunk
    ]
    assert "note of <code" not in entry
    assert f">note of {proposal.target}</a>" in entry
    assert "units" not in entry
    assert "pool" not in entry
    page = desk.get(f"/desk/proposals/{proposal.proposal_id}").text
    assert "Capacity of" not in page
    assert 'class="summary"' not in page
    assert "sorry" in page  # the arguments, as they are


def test_the_summary_reaches_the_queue_over_http_and_its_values_are_revealed(
    ledger: EffectLedger, desk: httpx.Client
) -> None:
    """GET /v1/proposals carries the exact summary; on the desk a hidden character in a value
    is marked, while the trusted template text is not."""
    ledger.propose(
        AGENT, "refund", {"order_id": "ord-\u202e9", "amount_minor": 700, "currency": "GBP"}
    )
    queue = desk.get("/desk/").text
    assert "Refund 7.00 GBP on order ord-" in queue
    assert "\u202e" not in queue
    assert "\u27e8U+202E\u27e9" in queue
    entries = ledger.pending(
        Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
    )
    (entry,) = entries.entries
    assert entry.summary == "Refund 7.00 GBP on order ord-\u202e9"
    assert entry.to_dict(entries.read_at)["summary"] == entry.summary


def test_a_summary_naming_a_field_the_arguments_lack_is_refused(
    ledger: EffectLedger, tmp_path: Path
) -> None:
    """Declared wrong, refused at declaration: nothing is registered."""
    receiver = SimulatedReceiver(tmp_path / "other.db", synchronous="NORMAL")
    try:
        with pytest.raises(InvalidInput, match="amount"):
            ledger.action(
                name="refund_bad",
                contract="refund-v1",
                arguments=Refund,
                destination=receiver,
                display=Display(summary="Refund {amount} on {order_id}"),
            )
        with pytest.raises(InvalidInput, match="field"):
            Display(summary="Refund {amount_minor:>10}")
        with pytest.raises(InvalidInput):
            Display(summary="")
    finally:
        receiver.close()
    assert "refund_bad" not in [action.name for action in ledger.registry]


@pytest.mark.slow
def test_money_and_look_alike_letters_in_chromium(ledger: EffectLedger, page: Any) -> None:
    """In Chromium: three currencies read as money in the queue; a proposal whose order id
    holds a U+202E, a U+200B, a U+0007 and a Cyrillic a shows each marked; axe finds nothing
    serious on either page."""
    from tests.desk.support import serious_violations, shot

    keys = ApiKeys(ledger.store)
    token = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"]).token
    for order, minor, code in (("ord-2001", 700, "GBP"), ("ord-2002", 1000, "JPY")):
        ledger.propose(
            AGENT, "refund", {"order_id": order, "amount_minor": minor, "currency": code}
        )
    odd = ledger.propose(
        AGENT,
        "refund",
        {"order_id": "ord-\u202e\u200b\x07p\u0430y", "amount_minor": 1250, "currency": "EUR"},
    )
    with serving(create_app(ledger, keys, desk=True, secure_cookies=False)) as base:
        page.goto(f"{base}/desk/login")
        page.get_by_label("API key").fill(token)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/desk/")
        body = page.locator("main").inner_text()
        assert "Refund 7.00 GBP on order ord-2001" in body
        assert "Refund 1,000 JPY on order ord-2002" in body
        assert "Refund 12.50 EUR on order ord-" in body
        assert serious_violations(page) == []
        shot(page, "money-queue")
        page.goto(f"{base}/desk/proposals/{odd.proposal_id}")
        summary = page.locator("dd.summary").inner_text()
        for mark in (
            "\u27e8U+202E\u27e9",
            "\u27e8U+200B\u27e9",
            "\u27e8U+0007\u27e9",
            "\u27e8U+0430\u27e9",
        ):
            assert mark in summary
        assert "\u202e" not in page.content()
        assert serious_violations(page) == []
        shot(page, "money-proposal")
