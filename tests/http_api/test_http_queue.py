"""``GET /v1/proposals``: the reviewer's queue over real HTTP, through the same one object."""

from __future__ import annotations

from datetime import datetime, timedelta

from effectledger import ManualClock
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.conftest import count_rows
from tests.http_api.conftest import HttpWorld


def test_reviewer_reads_the_queue_over_http(api: HttpWorld, clock: ManualClock) -> None:
    """A reviewer's queue lists the waiting proposal with its digest, reason and expiry."""
    made = api.post("agent", "/v1/proposals", {"action": "refund_order", "arguments": REFUND_30})
    assert made.status_code == 201, made.text
    proposal = made.json()
    clock.advance(timedelta(minutes=4))
    page = api.get("reviewer", "/v1/proposals?state=pending&limit=10")
    assert page.status_code == 200, page.text
    (entry,) = page.json()["proposals"]
    assert entry["proposal_id"] == proposal["proposal_id"]
    assert entry["digest"] == proposal["digest"]
    assert entry["expires_in_seconds"] == 11 * 60
    assert entry["waits_for"].endswith("1 more needed")
    filtered = api.get("reviewer", "/v1/proposals?proposer=agent-9")
    assert filtered.json()["proposals"] == []
    approved = api.post(
        "reviewer",
        f"/v1/proposals/{proposal['proposal_id']}/approve",
        {"digest": entry["digest"]},
    )
    assert approved.status_code == 201, approved.text
    assert api.get("reviewer", "/v1/proposals").json()["proposals"] == []


def test_queue_is_refused_to_an_agent_and_bad_input(api: HttpWorld) -> None:
    """An agent gets 403 not_permitted; a bad state, order or cursor is refused; nothing written."""
    api.post("agent", "/v1/proposals", {"action": "refund_order", "arguments": REFUND_30})
    before = api.written()
    refused = api.get("agent", "/v1/proposals")
    assert (refused.status_code, refused.json()["code"]) == (403, "not_permitted")
    for query in (
        "state=done",
        "order=oldest",
        "limit=0",
        "after=x;y",
        "expiring_before=2026-01-01T00:00",
        "expiring_before=0.5",  # pydantic alone reads a number as seconds since 1970
        "expiring_before=1767225600",
    ):
        bad = api.get("reviewer", f"/v1/proposals?{query}")
        assert bad.status_code in (400, 422), (query, bad.text)
        assert bad.json()["code"] in ("invalid_input", "validation_failed"), bad.text
    assert api.get("outsider", "/v1/proposals").json()["proposals"] == []
    assert api.written() == before


def test_numbers_and_times_are_read_as_the_document_declares(api: HttpWorld) -> None:
    """``expires_in_s: 7200.0`` is the integer 7200 (JSON Schema's integer), ``7200.5`` is
    refused; ``expiring_before`` takes an RFC 3339 time with ``Z`` or an offset."""
    proposal = api.post(
        "agent", "/v1/proposals", {"action": "refund_order", "arguments": REFUND_30}
    ).json()
    half = api.post(
        "reviewer",
        f"/v1/proposals/{proposal['proposal_id']}/approve",
        {"digest": proposal["digest"], "expires_in_s": 7200.5},
    )
    assert (half.status_code, half.json()["code"]) == (422, "invalid_input")
    whole = api.post(
        "reviewer",
        f"/v1/proposals/{proposal['proposal_id']}/approve",
        {"digest": proposal["digest"], "expires_in_s": 7200.0},
    )
    assert whole.status_code == 201, whole.text
    approval = whole.json()
    lifetime = datetime.fromisoformat(approval["expires_at"]) - datetime.fromisoformat(
        approval["decided_at"]
    )
    assert lifetime == timedelta(seconds=7200)
    assert count_rows(api.world.store_url, "approvals") == 1  # the 7200.5 wrote nothing
    for when in ("2100-01-01T00:00:00Z", "2100-01-01T01:00:00%2B01:00"):
        page = api.get("reviewer", f"/v1/proposals?expiring_before={when}")
        assert page.status_code == 200, page.text
