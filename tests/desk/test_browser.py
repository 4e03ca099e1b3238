"""The desk in a real, headless Chromium: a reviewer and an investigator, end to end.

A reviewer given only a login finds a pending refund, reads the exact effect, approves it; a
stale approval and a decision someone else made first are refused with the reason; a denial is
recorded. An investigator follows an uncertain refund until recovery resolves it, and resolves
a manual review with evidence. Each test checks the durable facts (decision rows, the
receiver's own count of effects) and runs axe-core on the pages it visits.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from effectledger import LookupMode, ManualClock, OperationState, SubmitMode
from effectledger.app.keys import ApiKeys
from effectledger.audit.keys.files import new_key_pair
from effectledger.audit.keys.signers import Signer
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.model import Context
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.conftest import count_rows
from tests.desk.conftest import Desk
from tests.desk.support import log_in, serious_violations, shot
from tests.http_api.test_http_cli import cli

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
SAM = Context(tenant_id="acme", actor_id="sam", roles=frozenset({"approver"}))
pytestmark = pytest.mark.slow


def _refund(order: str, amount: int = 30) -> dict[str, Any]:
    return {**REFUND_30, "order_id": order, "amount_minor": amount}


def test_reviewer_finds_understands_and_approves_a_refund(
    desk: Desk, page: Any, store_url: str
) -> None:
    """From a login alone the reviewer finds the refund, sees its exact effect and approves it."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-2001", 42))
    log_in(page, desk, "rita")
    assert page.get_by_role("heading", name="Waiting for your decision").is_visible()
    entry = page.locator(".entry").filter(has_text="ord-2001")
    assert "1 more needed" in entry.inner_text()
    assert "expires in" in entry.inner_text()
    assert serious_violations(page) == []
    shot(page, "queue")
    entry.get_by_role("link").click()
    body = page.locator("main").inner_text()
    for fact in (proposal.digest, "ord-2001", "42", "refund-policy-1", "agent-7", "refunds"):
        assert fact in body
    assert "expires in" in page.locator("dd.expiry").inner_text()
    assert serious_violations(page) == []
    shot(page, "proposal")
    page.get_by_role("button", name="Approve this exact proposal").click()
    assert "You approved this proposal" in page.locator("[role=status]").inner_text()
    assert count_rows(store_url, "approvals", "decision = 'granted'") == 1
    result = desk.world.app.perform(AGENT, proposal.proposal_id)
    assert result.state is OperationState.SUCCEEDED
    assert desk.receiver.counts().effects == 1
    page.goto(f"{desk.base}/desk/")
    assert "Nothing waits for you" in page.locator("main").inner_text()


def test_stale_or_already_decided_approvals_are_refused_and_a_denial_recorded(
    desk: Desk, page: Any, store_url: str
) -> None:
    """A changed target, or another's decision first, refuses the approval; a denial holds."""
    stale = desk.world.app.propose(AGENT, "refund_order", _refund("ord-3001"))
    taken = desk.world.app.propose(AGENT, "refund_order", _refund("ord-3002"))
    dropped = desk.world.app.propose(AGENT, "refund_order", _refund("ord-3003"))
    log_in(page, desk, "rita")
    page.goto(f"{desk.base}/desk/proposals/{stale.proposal_id}")
    desk.world.orders.change("acme", "ord-3001")  # the order changed while the page was open
    page.get_by_role("button", name="Approve this exact proposal").click()
    alert = page.locator("#refusal").inner_text()
    assert "stale_resource_version" in alert
    assert "propose again" in alert
    assert serious_violations(page) == []
    shot(page, "refused-stale")
    page.goto(f"{desk.base}/desk/proposals/{taken.proposal_id}")
    desk.world.app.approve(SAM, taken)  # someone else decided first
    page.get_by_role("button", name="Approve this exact proposal").click()
    assert "proposal_approved" in page.locator("#refusal").inner_text()
    assert count_rows(store_url, "approvals") == 1  # only sam's
    page.goto(f"{desk.base}/desk/proposals/{dropped.proposal_id}")
    page.get_by_label("Reason for a denial").fill("duplicate of ord-3002")
    page.get_by_role("button", name="Deny (final)").click()
    assert "You denied this proposal" in page.locator("[role=status]").inner_text()
    assert "denied by rita (duplicate of ord-3002)" in page.locator(".standing").inner_text()
    shot(page, "denied")
    assert count_rows(store_url, "approvals", "decision = 'denied'") == 1
    assert desk.world.app.perform(AGENT, dropped.proposal_id).outcome.value == "denied"
    assert desk.receiver.counts().effects == 0


def test_an_expired_proposal_says_a_new_decision_needs_a_new_proposal(
    desk: Desk, page: Any, clock: ManualClock, store_url: str
) -> None:
    """Past its expiry the page says so and an approval is refused, writing nothing."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-4001"))
    log_in(page, desk, "rita")
    page.goto(f"{desk.base}/desk/proposals/{proposal.proposal_id}")
    clock.advance(timedelta(minutes=16))
    page.get_by_role("button", name="Approve this exact proposal").click()
    assert "proposal_expired" in page.locator("#refusal").inner_text()
    assert "propose again" in page.locator(".standing").inner_text()
    assert count_rows(store_url, "approvals") == 0


def test_investigator_follows_an_uncertain_refund_until_recovery_resolves_it(
    desk: Desk, page: Any, clock: ManualClock
) -> None:
    """A lost reply shows unresolved with its next check; after recovery the page shows it done."""
    desk.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-5001"))
    desk.world.app.approve(SAM, proposal)
    result = desk.world.app.perform(AGENT, proposal.proposal_id)
    assert result.state is OperationState.OUTCOME_UNKNOWN
    log_in(page, desk, "rita")
    page.goto(f"{desk.base}/desk/operations/{proposal.operation_id}")
    unresolved = page.locator(".unresolved").inner_text()
    assert "Unresolved: OUTCOME_UNKNOWN" in unresolved
    assert "Next check" in unresolved
    assert "SUCCEEDED" not in page.locator(".standing, .unresolved").first.inner_text()
    assert "verified" in page.locator("#chain").inner_text()
    assert serious_violations(page) == []
    shot(page, "operation-unknown")
    clock.advance(31)
    desk.world.app.recover()
    page.reload()
    assert "SUCCEEDED" in page.locator(".standing").inner_text()
    assert page.locator("tr.taken").count() >= 3
    page.get_by_role("link", name="event 1").first.click()
    assert page.locator("#event-1").is_visible()
    assert "ProviderAcceptanceReconciled" in page.locator(".timeline").inner_text()
    shot(page, "operation-reconciled")
    assert desk.receiver.counts().effects == 1


def test_owner_resolves_a_manual_review_with_evidence(
    desk: Desk, page: Any, clock: ManualClock, store_url: str
) -> None:
    """The review queue names the owner; the owner's resolution is appended as an event."""
    desk.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    desk.receiver.lookup_mode = LookupMode.UNKNOWN
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-6001"))
    desk.world.app.approve(SAM, proposal)
    desk.world.app.perform(AGENT, proposal.proposal_id)
    ops = Context(tenant_id="acme", actor_id="oscar", roles=frozenset({"operations"}))
    desk.world.app.escalate(ops, proposal, reason="customer called", owner="operations")
    events_before = count_rows(store_url, "audit_events")
    log_in(page, desk, "rita")
    page.get_by_role("link", name="Manual reviews").click()
    entry = page.locator(".entry").filter(has_text=proposal.operation_id)
    assert "Owner operations (you)" in entry.inner_text()
    assert serious_violations(page) == []
    shot(page, "reviews")
    entry.get_by_role("link").click()
    receipt = desk.receiver.receipt(desk.world.app.operation(ops, proposal).idempotency_key)
    page.get_by_label("the effect happened").check()
    page.get_by_label("Provider reference").fill(str(receipt))
    page.get_by_label("Evidence you checked").fill("ops/ticket-77")
    page.get_by_role("button", name="Record the resolution").click()
    assert "Resolution recorded" in page.locator("[role=status]").first.inner_text()
    assert "SUCCEEDED" in page.locator(".standing").inner_text()
    assert count_rows(store_url, "audit_events") == events_before + 1
    assert desk.receiver.counts().effects == 1


def test_pages_work_by_keyboard_at_320_pixels(desk: Desk, browser: Any, store_url: str) -> None:
    """At 320 px the queue and proposal read without sideways scrolling; Tab and Enter approve."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-7001"))
    context = browser.new_context(viewport={"width": 320, "height": 800})
    page = context.new_page()
    try:
        log_in(page, desk, "rita")
        page.goto(f"{desk.base}/desk/proposals/{proposal.proposal_id}")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 320
        shot(page, "proposal-320px")
        for _ in range(60):
            page.keyboard.press("Tab")
            if page.evaluate("() => document.activeElement.id") == "approve":
                break
        else:
            pytest.fail("the approve button cannot be reached by keyboard")
        page.keyboard.press("Enter")
        page.wait_for_url("**done=approved")
        assert count_rows(store_url, "approvals", "decision = 'granted'") == 1
    finally:
        context.close()


def test_desk_refuses_forged_forms_and_sets_strict_headers(
    desk: Desk, page: Any, store_url: str
) -> None:
    """A post without the session's CSRF token writes nothing; cookies and CSP are strict."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-8001"))
    log_in(page, desk, "rita")
    response = page.request.post(
        f"{desk.base}/desk/proposals/{proposal.proposal_id}/decide",
        form={"digest": proposal.digest, "decision": "approve", "csrf": "forged"},
    )
    assert response.status == 422
    assert count_rows(store_url, "approvals") == 0
    headers = page.request.get(f"{desk.base}/desk/").headers
    assert "default-src 'none'" in headers["content-security-policy"]
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "effectledger_desk"]
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    anonymous = page.context.browser.new_context()
    try:
        other = anonymous.new_page()
        other.goto(f"{desk.base}/desk/proposals/{proposal.proposal_id}")
        assert other.url.endswith("/desk/login")
    finally:
        anonymous.close()


def test_the_accessibility_check_catches_an_unlabelled_control(desk: Desk, page: Any) -> None:
    """axe-core in this browser reports a control without a label as a serious violation."""
    log_in(page, desk, "rita")
    assert serious_violations(page) == []
    page.evaluate(
        "() => document.querySelector('main').appendChild(document.createElement('input'))"
    )
    assert [v["id"] for v in serious_violations(page)] == ["label"]


def test_investigator_downloads_a_proof_and_the_cli_verifies_it(
    desk: Desk, page: Any, clock: ManualClock, tmp_path: Path
) -> None:
    """The receipt downloaded from the operation page verifies offline with the verifier key."""
    proposal = desk.world.app.propose(AGENT, "refund_order", _refund("ord-9001"))
    desk.world.app.approve(SAM, proposal)
    desk.world.app.perform(AGENT, proposal.proposal_id)
    signer_key, verifier_key = new_key_pair("acme-log")
    LogSealer(desk.world.app.store, Signer.from_key_string(signer_key), clock=clock).seal("acme")
    log_in(page, desk, "rita")
    page.goto(f"{desk.base}/desk/operations/{proposal.operation_id}")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the receipt").click()
    saved = tmp_path / "operation.receipt"
    download.value.save_as(saved)
    verified = cli("audit", "verify", "--bundle", str(saved), "--key", verifier_key)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("verified receipt of tenant acme: 5 event(s)")
    tampered = tmp_path / "tampered.receipt"
    assert b'"actor":"agent-7"' in saved.read_bytes()
    tampered.write_bytes(saved.read_bytes().replace(b'"actor":"agent-7"', b'"actor":"agent-8"'))
    assert cli("audit", "verify", "--bundle", str(tampered), "--key", verifier_key).returncode != 0


def test_hostile_arguments_render_as_text_and_a_revoked_key_ends_the_session(
    desk: Desk, page: Any, store_url: str
) -> None:
    """Markup in a model's arguments is shown, never run; revoking the key logs the person out."""
    hostile = "<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"
    proposal = desk.world.app.propose(
        AGENT, "refund_order", {**_refund("ord-9101"), "reason": hostile}
    )
    log_in(page, desk, "rita")
    page.goto(f"{desk.base}/desk/proposals/{proposal.proposal_id}")
    assert page.evaluate("() => window.pwned") is None
    assert "<script>window.pwned = 1</script>" in page.locator("main").inner_text()
    bad = page.goto(f"{desk.base}/desk/proposals/no%20such;id")
    assert bad is not None
    assert bad.status in (400, 404, 422)
    keys = ApiKeys(desk.world.app.store)
    (rita,) = [key for key in keys.list(tenant_id="acme") if key.actor_id == "rita"]
    keys.revoke(rita.key_id)
    page.goto(f"{desk.base}/desk/")
    assert page.url.endswith("/desk/login")
    assert count_rows(store_url, "approvals") == 0


def test_decided_proposals_show_their_outcome_the_history_filters_and_the_agent_is_quoted(
    desk: Desk, page: Any, clock: ManualClock
) -> None:
    """In Chromium: a performed, a denied and an expired proposal each show their outcome and no
    Approve or Deny control; the agent's stated reason stands as its words with the U+202E and
    U+200B shown as marks; the history filtered to denials lists only the denial; axe finds
    nothing serious on any of these pages."""
    app = desk.world.app
    performed = app.propose(AGENT, "refund_order", _refund("ord-3001"))
    app.approve(SAM, performed)
    assert app.perform(AGENT, performed).state is OperationState.SUCCEEDED
    denied = app.propose(AGENT, "refund_order", _refund("ord-3002"))
    app.deny(SAM, denied, reason="over the goodwill limit")
    expired = app.propose(AGENT, "refund_order", _refund("ord-3003"))
    said = app.propose(
        AGENT,
        "refund_order",
        _refund("ord-3004"),
        stated_reason="see invoice-\u202egnp.exe\u200b attached",
    )
    clock.advance(timedelta(minutes=16))  # past the 15-minute lifetime: the three above expire
    log_in(page, desk, "rita")
    for proposal, state in ((performed, "admitted"), (denied, "denied"), (expired, "expired")):
        page.goto(f"{desk.base}/desk/proposals/{proposal.proposal_id}")
        assert page.locator("#outcome").is_visible(), state
        assert f"Outcome: {state}" in page.locator("#outcome").inner_text()
        assert page.get_by_role("button", name="Approve this exact proposal").count() == 0
        assert page.get_by_role("button", name="Deny (final)").count() == 0
        assert serious_violations(page) == [], state
    page.goto(f"{desk.base}/desk/proposals/{said.proposal_id}")
    quoted = page.locator("#stated-reason blockquote").inner_text()
    assert quoted == "see invoice-\u27e8U+202E\u27e9gnp.exe\u27e8U+200B\u27e9 attached"
    assert "U+202E, U+200B" in page.locator("#hidden-characters").inner_text()
    assert serious_violations(page) == []
    shot(page, "stated-reason")
    page.goto(f"{desk.base}/desk/history")
    page.get_by_label("Outcome").select_option("denied")
    page.get_by_role("button", name="Show").click()
    rows = page.locator("tr.decision")
    assert rows.count() == 1
    assert "over the goodwill limit" in rows.first.inner_text()
    assert serious_violations(page) == []
    shot(page, "history-denied")
