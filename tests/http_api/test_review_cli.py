"""``effectledger proposals``, ``approve`` and ``deny``: the reviewer's desk on the command line.

Run as real processes against a real store: the reviewer is the API key in the environment,
the queue prints the full digest, and a decision writes its row (or nothing when refused).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effectledger import SimulatedReceiver
from effectledger.app.keys import ApiKeys
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.callers.scenarios import AGENT
from tests.conftest import count_rows
from tests.http_api.apps import RECEIVER_VARIABLE, refund_service
from tests.http_api.test_http_cli import cli

APP = "tests.http_api.apps:refund_service"


def test_reviewer_lists_approves_and_denies_from_the_command_line(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue shows both proposals; approve and deny by digest write one decision each."""
    receiver_path = str(tmp_path / "receiver.db")
    SimulatedReceiver(receiver_path).close()
    env = {RECEIVER_VARIABLE: receiver_path}
    monkeypatch.setenv(RECEIVER_VARIABLE, receiver_path)
    with refund_service(store_url) as app:
        first = app.propose(AGENT, "refund_order", REFUND_30)
        second = app.propose(AGENT, "refund_order", {**REFUND_30, "order_id": "ord-1002"})
        reviewer = ApiKeys(app.store).create(tenant_id="acme", actor_id="rita", roles=["approver"])
        agent = ApiKeys(app.store).create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    env_rita = {**env, "EFFECTLEDGER_API_KEY": reviewer.token}
    base = ("--db", store_url, "--app", APP)
    listed = cli("proposals", *base, env=env_rita)
    assert listed.returncode == 0, listed.stderr
    assert first.digest in listed.stdout
    assert second.digest in listed.stdout
    assert "expires in" in listed.stdout
    assert "1 more needed" in listed.stdout
    page = json.loads(cli("proposals", *base, "--json", env=env_rita).stdout)
    assert [p["proposal_id"] for p in page["proposals"]] == [first.proposal_id, second.proposal_id]
    stale = cli("approve", *base, first.proposal_id, "--digest", second.digest, env=env_rita)
    assert stale.returncode == 1
    assert "approval_refused" in stale.stderr
    assert count_rows(store_url, "approvals") == 0
    approved = cli("approve", *base, first.proposal_id, "--digest", first.digest, env=env_rita)
    assert approved.returncode == 0, approved.stderr
    denied = cli(
        "deny",
        *base,
        second.proposal_id,
        "--digest",
        second.digest,
        "--reason",
        "dup",
        env=env_rita,
    )
    assert denied.returncode == 0, denied.stderr
    assert count_rows(store_url, "approvals", "decision = 'granted'") == 1
    assert count_rows(store_url, "approvals", "decision = 'denied'") == 1
    assert "nothing waits" in cli("proposals", *base, env=env_rita).stdout
    refused = cli("proposals", *base, env={**env, "EFFECTLEDGER_API_KEY": agent.token})
    assert refused.returncode == 1
    assert "not_permitted" in refused.stderr
    missing = cli("proposals", *base, env={**env, "EFFECTLEDGER_API_KEY": ""})
    assert missing.returncode == 1
    assert "not_authenticated" in missing.stderr


def test_the_queue_shows_hidden_characters_and_a_performed_proposal_takes_no_approval(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``proposals`` prints a U+202E, a U+200B and a U+0007 in the model's reason as marks with a
    warning, never raw; ``approve`` of a performed proposal exits 1 already_admitted, unwritten."""
    receiver_path = str(tmp_path / "receiver.db")
    SimulatedReceiver(receiver_path).close()
    env = {RECEIVER_VARIABLE: receiver_path}
    monkeypatch.setenv(RECEIVER_VARIABLE, receiver_path)
    reason = "invoice-\u202egnp.exe\u200b\x07"
    with refund_service(store_url) as app:
        hidden = app.propose(AGENT, "refund_order", {**REFUND_30, "reason": reason})
        done = app.propose(AGENT, "refund_order", {**REFUND_30, "order_id": "ord-1002"})
        keys = ApiKeys(app.store)
        reviewer = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"])
        sam = keys.create(tenant_id="acme", actor_id="sam", roles=["approver"])
        app.approve(sam.key.context, done)
        assert app.perform(AGENT, done.proposal_id).outcome.value == "performed"
    env_rita = {**env, "EFFECTLEDGER_API_KEY": reviewer.token}
    base = ("--db", store_url, "--app", APP)
    listed = cli("proposals", *base, env=env_rita)
    assert listed.returncode == 0, listed.stderr
    assert hidden.proposal_id in listed.stdout
    assert '"reason": "invoice-⟨U+202E⟩gnp.exe⟨U+200B⟩⟨U+0007⟩"' in listed.stdout
    assert "warning: holds hidden characters (U+202E, U+200B, U+0007)" in listed.stdout
    assert not any(char in listed.stdout for char in "\u202e\u200b\x07")
    before = count_rows(store_url, "approvals"), count_rows(store_url, "audit_events")
    late = cli("approve", *base, done.proposal_id, "--digest", done.digest, env=env_rita)
    assert late.returncode == 1
    assert "approval_refused" in late.stderr
    assert "already admitted" in late.stderr
    assert (count_rows(store_url, "approvals"), count_rows(store_url, "audit_events")) == before
