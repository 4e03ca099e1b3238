"""The desk's History: every decision a person made in the tenant, filtered and searched.

Over real HTTP as a reviewer: decisions are listed newest first with who, what and why; the
decider, outcome and action filters and a search by target or id narrow them; another
tenant's decisions never show; a key without a reader role is refused; the Python API pages
through the same list with a cursor.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx

from effectledger.model import Context
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.desk.conftest import Desk
from tests.desk.test_pages import rita

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
SAM = Context(tenant_id="acme", actor_id="sam", roles=frozenset({"approver"}))
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
GLOBEX_AGENT = Context(tenant_id="globex", actor_id="agent-9", roles=frozenset({"agent"}))
GLOBEX_REVIEWER = Context(tenant_id="globex", actor_id="gail", roles=frozenset({"approver"}))
__all__ = ["rita"]


def _refund(order: str) -> dict[str, Any]:
    return {**REFUND_30, "order_id": order}


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr class="decision">(.*?)</tr>', html, re.S)


def _decided(desk: Desk) -> dict[str, str]:
    app, clock = desk.world.app, desk.world.clock
    first = app.propose(AGENT, "refund_order", _refund("ord-9001"))
    app.approve(SAM, first)
    clock.advance(timedelta(seconds=1))
    second = app.propose(AGENT, "refund_order", _refund("ord-9002"))
    app.deny(RITA, second, reason="a duplicate of ord-9001")
    clock.advance(timedelta(seconds=1))
    third = app.propose(AGENT, "refund_order", _refund("ord-9003"))
    app.approve(RITA, third)
    elsewhere = app.propose(GLOBEX_AGENT, "refund_order", _refund("ord-9999"))
    app.approve(GLOBEX_REVIEWER, elsewhere)
    return {"first": first.proposal_id, "second": second.proposal_id, "third": third.proposal_id}


def test_history_lists_the_tenants_decisions_newest_first(desk: Desk, rita: httpx.Client) -> None:
    """Three decisions of acme, newest first, each with decider, outcome, target and reason;
    globex's decision is not among them."""
    ids = _decided(desk)
    page = rita.get("/desk/history")
    assert page.status_code == 200
    rows = _rows(page.text)
    assert len(rows) == 3
    assert all(ids[name] in rows[index] for index, name in enumerate(("third", "second", "first")))
    assert "a duplicate of ord-9001" in rows[1]
    assert "denied" in rows[1]
    assert "ord-9999" not in page.text
    assert 'href="/desk/history"' in page.text


def test_filters_and_search_narrow_the_history(desk: Desk, rita: httpx.Client) -> None:
    """By decider, by outcome, by a target, by a proposal id; a bad date says what it wants."""
    ids = _decided(desk)
    assert len(_rows(rita.get("/desk/history", params={"decider": "sam"}).text)) == 1
    denied = _rows(rita.get("/desk/history", params={"outcome": "denied"}).text)
    assert len(denied) == 1
    assert ids["second"] in denied[0]
    found = _rows(rita.get("/desk/history", params={"search": "ord-9003"}).text)
    assert len(found) == 1
    assert ids["third"] in found[0]
    by_id = _rows(rita.get("/desk/history", params={"search": ids["first"]}).text)
    assert len(by_id) == 1
    assert len(_rows(rita.get("/desk/history", params={"action": "refund_order"}).text)) == 3
    assert _rows(rita.get("/desk/history", params={"since": "2099-01-01"}).text) == []
    bad = rita.get("/desk/history", params={"since": "yesterday"})
    assert bad.status_code == 422
    assert "YYYY-MM-DD" in bad.text


def test_a_key_without_a_reader_role_is_refused_and_the_api_pages(desk: Desk) -> None:
    """The agent's key gets not_permitted; the Python API pages with a cursor."""
    ids = _decided(desk)
    with httpx.Client(base_url=desk.base, timeout=30) as client:
        form = client.get("/desk/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        client.post("/desk/login", data={"nonce": nonce.group(1), "token": desk.tokens["agent"]})
        refused = client.get("/desk/history")
        assert refused.status_code == 403
        assert "not_permitted" in refused.text
    first = desk.world.app.decisions(RITA, limit=2)
    assert [entry.proposal_id for entry in first.entries] == [ids["third"], ids["second"]]
    assert first.next_cursor is not None
    rest = desk.world.app.decisions(RITA, limit=2, after=first.next_cursor)
    assert [entry.proposal_id for entry in rest.entries] == [ids["first"]]
    assert rest.next_cursor is None
    assert rest.entries[0].decider_id == "sam"
    assert rest.entries[0].approved
