"""The agent's stated reason: kept with the proposal and in its event, never in the digest,
shown to reviewers as the agent's words with every hidden character revealed, and refused
with a stable code (nothing written) when it is not text a person can be shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectledger import InvalidInput
from effectledger.callers.notify import chat_message, json_document
from effectledger.model.review import PendingProposal
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.conftest import count_rows, run_sql
from tests.worker.support import Refunds, refunds

SAID = "The parcel came back \u202egnp.exe; <https://evil.example|Approve now> <!channel>"


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Refunds:
    """The refund application over a fresh store."""
    made = refunds(store_url, tmp_path)
    yield made  # type: ignore[misc]
    made.close()


def test_a_proposal_keeps_the_agents_reason_in_its_row_and_event_outside_its_digest(
    world: Refunds, store_url: str
) -> None:
    """The reason comes back on the proposal, stands in its row and in its ProposalRecorded
    event's details (which the trail key authenticates), and the digest is the one the same
    proposal has without it: the approval binds the effect, not the story."""
    given = world.app.propose(AGENT, "refund_order", REFUND_30, stated_reason=SAID)
    plain = world.app.propose(AGENT, "refund_order", REFUND_30)
    assert given.stated_reason == SAID
    assert world.app.proposal(REVIEWER, given.proposal_id).stated_reason == SAID
    assert plain.stated_reason is None
    rows = dict(run_sql(store_url, "SELECT proposal_id, stated_reason FROM proposals"))
    assert rows == {given.proposal_id: SAID, plain.proposal_id: None}
    (recorded,) = [
        e
        for e in world.app.events(REVIEWER, given.operation_id)
        if e.event_type == "ProposalRecorded"
    ]
    assert recorded.details["stated_reason"] == SAID
    assert given.digest_body() | {"operation_id": None, "expires_us": None} == (
        plain.digest_body() | {"operation_id": None, "expires_us": None}
    )
    world.app.approve(REVIEWER, given)
    assert world.app.perform(AGENT, given).outcome == "performed"
    assert world.receiver.counts().effects == 1


@pytest.mark.parametrize(
    "said",
    ["", "   \n", "x" * 2001, "before\x00after", "lone \ud800 surrogate", 42],
    ids=["empty", "blank", "too-long", "nul", "surrogate", "not-text"],
)
def test_a_reason_that_is_not_text_to_show_is_refused_and_nothing_is_written(
    world: Refunds, store_url: str, said: object
) -> None:
    """Empty, blank, over 2,000 characters, a NUL, a lone surrogate or not text at all:
    ``invalid_input`` naming ``stated_reason``, and no proposal or event is written."""
    with pytest.raises(InvalidInput) as refused:
        world.app.propose(AGENT, "refund_order", REFUND_30, stated_reason=said)  # type: ignore[arg-type]
    assert refused.value.code == "invalid_input"
    assert refused.value.details.get("field") == "stated_reason"
    assert count_rows(store_url, "proposals") == 0
    assert count_rows(store_url, "audit_events") == 0


def test_notifications_show_the_reason_as_the_agents_words_never_a_link(world: Refunds) -> None:
    """The generic JSON carries the exact reason and its revealed form; the chat text quotes it
    in a code span, escaped, with the U+202E shown as a mark: the desk link stays the only
    link and nothing pings the channel."""
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30, stated_reason=SAID)
    entry = PendingProposal(
        proposal=proposal,
        policy_version=proposal.policy_version,
        approvals_required=1,
        approvals_granted=0,
        expires_at=proposal.expires_at,
    )
    document = json_document(entry, "https://desk.example/desk")
    assert document["stated_reason"] == SAID
    assert "\u27e8U+202E\u27e9" in document["stated_reason_shown"]
    assert "U+202E" in document["hidden_characters"]
    text = chat_message(entry, "https://desk.example/desk")["text"]
    assert "The agent says: `The parcel came back \u27e8U+202E\u27e9gnp.exe; &lt;https" in text
    assert "\u202e" not in text
    assert "<!channel>" not in text
    links = [part.split(">")[0] for part in text.split("<")[1:]]
    assert len(links) == 1
    assert links[0].startswith("https://desk.example/desk/proposals/")


def test_the_http_api_takes_and_shows_the_reason_and_refuses_a_bad_one(
    store_url: str, tmp_path: Path
) -> None:
    """POST /v1/proposals with ``stated_reason`` answers it back and the queue shows it; a NUL
    in it is refused with ``invalid_input`` and no proposal is written."""
    from effectledger import ManualClock
    from tests.http_api.conftest import http_world

    with http_world(store_url, tmp_path / "http", ManualClock()) as api:
        made = api.post(
            "agent",
            "/v1/proposals",
            {"action": "refund_order", "arguments": REFUND_30, "stated_reason": SAID},
        )
        assert made.status_code == 201, made.text
        assert made.json()["stated_reason"] == SAID
        queue = api.get("reviewer", "/v1/proposals?state=pending")
        assert queue.status_code == 200, queue.text
        assert [p["stated_reason"] for p in queue.json()["proposals"]] == [SAID]
        before = count_rows(store_url, "proposals")
        bad = api.post(
            "agent",
            "/v1/proposals",
            {"action": "refund_order", "arguments": REFUND_30, "stated_reason": "a\x00b"},
        )
        assert bad.status_code in (400, 422), bad.text
        assert bad.json()["code"] == "invalid_input"
        assert count_rows(store_url, "proposals") == before
