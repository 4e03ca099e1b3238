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
