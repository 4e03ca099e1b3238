"""Over HTTP, a proposal already admitted or performed takes no approval and no denial."""

from __future__ import annotations

from tests.http_api.conftest import HttpWorld
from tests.http_api.test_http_boundaries import approved, error_of


def test_approve_and_deny_of_a_performed_proposal_are_refused(api: HttpWorld) -> None:
    """After the perform, approve and deny answer 403 approval_refused already_admitted, and no
    decision row, event or effect is added."""
    proposal, approval_id = approved(api)
    path = f"/v1/proposals/{proposal['proposal_id']}"
    performed = api.post("agent", f"{path}/perform", {"approval_id": approval_id})
    assert performed.json()["outcome"] == "performed", performed.text
    other = api.keys.create(tenant_id="acme", actor_id="sam", roles=["approver"]).token
    sam = {"Authorization": f"Bearer {other}"}
    before = api.written()
    for response in (
        api.post("reviewer", f"{path}/approve", {"digest": proposal["digest"]}),
        api.client.post(f"{path}/approve", json={"digest": proposal["digest"]}, headers=sam),
        api.client.post(
            f"{path}/deny", json={"digest": proposal["digest"], "reason": "late"}, headers=sam
        ),
    ):
        body = error_of(response, 403, "approval_refused")
        assert body["details"]["reason"] == "already_admitted"
    assert api.written() == before
    assert before["effects"] == 1
