"""The desk's proposal page without a browser: a decided proposal shows its outcome, no controls.

Each test logs in over real HTTP as a reviewer would (the login form's nonce, then the API key)
and reads the served HTML. A denied, expired or performed proposal names who decided it, when,
and its operation's state, and offers no Approve or Deny form and no countdown; a decision
posted anyway is refused and writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from effectledger import ManualClock, OperationState
from effectledger.model import Context
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.conftest import count_rows
from tests.desk.conftest import Desk

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
SAM = Context(tenant_id="acme", actor_id="sam", roles=frozenset({"approver"}))
CONTROLS = ('id="approve"', 'id="deny"', "/decide")


def _refund(order: str) -> dict[str, Any]:
    return {**REFUND_30, "order_id": order}


@pytest.fixture
def rita(desk: Desk) -> Iterator[httpx.Client]:
    """An HTTP client logged in to the desk as rita (an approver), through the login form."""
    with httpx.Client(base_url=desk.base, timeout=30) as client:
        form = client.get("/desk/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        posted = client.post(
            "/desk/login", data={"nonce": nonce.group(1), "token": desk.tokens["rita"]}
        )
        assert posted.status_code == 303, posted.text
        yield client


def page_of(client: httpx.Client, proposal_id: str) -> str:
    response = client.get(f"/desk/proposals/{proposal_id}")
    assert response.status_code == 200, response.text
    return response.text


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def test_a_waiting_proposal_offers_both_decisions(desk: Desk, rita: httpx.Client) -> None:
    """A proposal nobody decided shows Approve and Deny and its countdown, and no outcome."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7001"))
    html = page_of(rita, proposal.proposal_id)
    assert all(control in html for control in CONTROLS)
    assert "data-expires" in html
    assert 'id="outcome"' not in html
    assert 'id="hidden-characters"' not in html  # nothing hidden, nothing flagged


def test_a_performed_proposal_shows_its_outcome_and_no_controls(
    desk: Desk, rita: httpx.Client, store_url: str
) -> None:
    """After sam approved and the agent performed, the page names sam, the operation and its
    state, offers no decision; a decision posted anyway is refused already_admitted, unwritten."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7002"))
    desk.world.app.approve(SAM, proposal)
    assert desk.world.app.perform(AGENT, proposal.proposal_id).state is OperationState.SUCCEEDED
    html = page_of(rita, proposal.proposal_id)
    assert "Outcome: admitted" in html
    assert "approved by <strong>sam</strong>" in html
    assert f"/operations/{proposal.operation_id}" in html
    assert '<strong class="operation-state">SUCCEEDED</strong>' in html
    assert 'id="no-decision"' in html
    assert not any(control in html for control in CONTROLS)
    assert "data-expires" not in html  # no countdown on a decided proposal
    before = (count_rows(store_url, "approvals"), count_rows(store_url, "audit_events"))
    refused = rita.post(
        f"/desk/proposals/{proposal.proposal_id}/decide",
        data={"csrf": csrf_of(html), "digest": proposal.digest, "decision": "approve"},
    )
    assert refused.status_code == 409
    assert "already_admitted" in refused.text
    assert not any(control in refused.text for control in CONTROLS)
    after = (count_rows(store_url, "approvals"), count_rows(store_url, "audit_events"))
    assert after == before
    assert desk.receiver.counts().effects == 1


def test_a_denied_proposal_shows_who_denied_it_and_why(desk: Desk, rita: httpx.Client) -> None:
    """A denial is shown with its reviewer and reason, and the page offers no decision."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7003"))
    desk.world.app.deny(SAM, proposal, reason="duplicate of ord-7002")
    html = page_of(rita, proposal.proposal_id)
    assert "Outcome: denied" in html
    assert "denied by <strong>sam</strong>" in html
    assert "duplicate of ord-7002" in html
    assert not any(control in html for control in CONTROLS)
    assert "data-expires" not in html


def test_an_expired_proposal_shows_when_it_expired_and_no_controls(
    desk: Desk, rita: httpx.Client, clock: ManualClock
) -> None:
    """Past its expiry the page says it expired, when, and offers no decision."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7004"))
    clock.advance(timedelta(minutes=16))
    html = page_of(rita, proposal.proposal_id)
    assert "Outcome: expired" in html
    assert proposal.expires_at.strftime("%Y-%m-%d %H:%M:%S") in html
    assert not any(control in html for control in CONTROLS)
    assert "data-expires" not in html


def test_a_fully_approved_proposal_offers_only_a_denial(desk: Desk, rita: httpx.Client) -> None:
    """With every approval it needs and not yet performed, the page shows the approval and
    offers only Deny, which still stops the effect."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7005"))
    desk.world.app.approve(SAM, proposal)
    html = page_of(rita, proposal.proposal_id)
    assert "Outcome: approved" in html
    assert "approved by <strong>sam</strong>" in html
    assert 'id="approve"' not in html
    assert 'id="deny"' in html


def test_hidden_characters_in_an_argument_are_shown_and_flagged(
    desk: Desk, rita: httpx.Client
) -> None:
    """A U+202E, a U+200B and a U+0007 in the model's reason never reach the page as
    themselves: each shows as a marked ⟨U+XXXX⟩ where it stands, and the page and the queue say
    the proposal holds hidden characters."""
    reason = "see invoice-\u202egnp.exe\u200b now\x07"
    proposal = desk.world.app.propose(
        AGENT, "refund_order", {**_refund("ord-7006"), "reason": reason}
    )
    html = page_of(rita, proposal.proposal_id)
    assert not any(char in html for char in "\u202e\u200b\x07")
    shown = (
        "see invoice-"
        '<mark class="hidden" title="hidden character U+202E">\u27e8U+202E\u27e9</mark>gnp.exe'
        '<mark class="hidden" title="hidden character U+200B">\u27e8U+200B\u27e9</mark> now'
        '<mark class="hidden" title="hidden character U+0007">\u27e8U+0007\u27e9</mark>'
    )
    assert shown in html
    banner = html[html.index('id="hidden-characters"') :]
    assert "U+202E, U+200B, U+0007" in banner[: banner.index("</div>")]
    queue = rita.get("/desk/").text
    entry = queue[queue.index("ord-7006") :]
    assert "Holds hidden characters (U+202E, U+200B, U+0007)" in entry[: entry.index("</li>")]
    assert "\u202e" not in queue


def test_text_that_spells_a_mark_cannot_pass_for_one(desk: Desk, rita: httpx.Client) -> None:
    """A reason that spells ``⟨U+202E⟩`` is shown with its ``⟨`` marked and is flagged, so a
    reviewer never takes written text for a character that was made visible."""
    proposal = desk.world.app.propose(
        AGENT, "refund_order", {**_refund("ord-7007"), "reason": "\u27e8U+202E\u27e9"}
    )
    html = page_of(rita, proposal.proposal_id)
    assert "\u27e8U+27E8\u27e9</mark>U+202E\u27e9" in html
    assert 'id="hidden-characters"' in html


def test_a_secure_cookie_dropped_over_plain_http_is_explained(desk: Desk) -> None:
    """A desk with Secure cookies reached over plain HTTP: the browser drops the login cookie,
    and the login page says so and how to fix it, instead of "the login form expired"."""
    from effectledger.app.keys import ApiKeys
    from effectledger.callers.http.app import create_app
    from tests.http_api.server import serving

    keys = ApiKeys(desk.world.ledger.store)
    with (
        serving(create_app(desk.world.app, keys, desk=True, secure_cookies=True)) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        form = client.get("/desk/login")
        assert "Secure" in form.headers["set-cookie"]
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        posted = client.post(
            "/desk/login", data={"nonce": nonce.group(1), "token": desk.tokens["rita"]}
        )
        assert posted.status_code == 422  # invalid_input, as every refused login form
        assert "plain HTTP" in posted.text
        assert "--plain-http-cookies" in posted.text
        assert "effectledger_desk=" not in posted.headers.get("set-cookie", "")
        front = client.get("/", follow_redirects=False)
        assert (front.status_code, front.headers["location"]) == (307, "/desk/")


def test_a_look_alike_letter_in_an_argument_is_shown_and_named(
    desk: Desk, rita: httpx.Client
) -> None:
    """A Cyrillic a (U+0430) in a Latin word shows as a marked ⟨U+0430⟩ named by its Unicode name,
    and the proposal is flagged on its page and in the queue."""
    proposal = desk.world.app.propose(
        AGENT, "refund_order", {**_refund("ord-7009"), "reason": "refund via p\u0430ypal"}
    )
    html = page_of(rita, proposal.proposal_id)
    assert "p\u0430ypal" not in html
    assert (
        'p<mark class="hidden" title="look-alike letter U+0430 (CYRILLIC SMALL LETTER A)">'
        "\u27e8U+0430\u27e9</mark>ypal"
    ) in html
    queue = rita.get("/desk/").text
    entry = queue[queue.index("ord-7009") :]
    assert "U+0430" in entry[: entry.index("</li>")]


def test_the_agents_stated_reason_is_shown_as_its_words_with_hidden_characters_revealed(
    desk: Desk, rita: httpx.Client
) -> None:
    """A proposal's stated reason stands on its page under the agent's name as unchecked
    text, its U+202E shown as a mark and named in the page's alert; the queue quotes it the
    same way, and a proposal without one shows no such section."""
    said = "customer returned it, see \u202egnp.exe <b>now</b>"
    proposal = desk.world.app.propose(
        AGENT, "refund_order", _refund("ord-7101"), stated_reason=said
    )
    plain = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7102"))
    html = page_of(rita, proposal.proposal_id)
    section = html[html.index('id="stated-reason"') :]
    section = section[: section.index("</section>")]
    assert "Written by the agent <strong>agent-7</strong>, not checked by anyone" in section
    assert (
        'see <mark class="hidden" title="hidden character U+202E">\u27e8U+202E\u27e9</mark>'
        "gnp.exe &lt;b&gt;now&lt;/b&gt;"
    ) in section
    assert "\u202e" not in html
    assert "<b>now" not in html
    banner = html[html.index('id="hidden-characters"') :]
    assert "U+202E" in banner[: banner.index("</div>")]
    assert 'id="stated-reason"' not in page_of(rita, plain.proposal_id)
    queue = rita.get("/desk/").text
    entry = queue[queue.index("ord-7101") :]
    entry = entry[: entry.index("</li>")]
    assert "The agent says: “customer returned it, see <mark" in entry
    assert "Holds hidden characters (U+202E)" in entry
