"""Bad input at the HTTP boundary: a clear error with a stable code, and nothing written.

Every refusal is checked at the durable facts: no proposal, approval, operation or audit event
was added, and the receiver saw no submission and performed no effect.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from effectledger import Context, NotPermitted
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.conftest import drop_postgres_schema, postgres_schema
from tests.http_api.conftest import IDENTITIES, HttpWorld

PROPOSE = {"action": "refund_order", "arguments": REFUND_30}


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Assert ``response`` is the one error shape with ``status`` and ``code``; return it."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    assert isinstance(body["message"], str)
    assert body["message"]
    return dict(body)


def approved(api: HttpWorld) -> tuple[dict[str, Any], str]:
    """An agent's proposal of REFUND_30 and the reviewer's approval of it, over HTTP."""
    proposal = api.post("agent", "/v1/proposals", PROPOSE).json()
    approval = api.post(
        "reviewer",
        f"/v1/proposals/{proposal['proposal_id']}/approve",
        {"digest": proposal["digest"]},
    ).json()
    return proposal, str(approval["approval_id"])


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_credentials"),
        ({"Authorization": "Basic YWdlbnQ6c2VjcmV0"}, "missing_credentials"),
        ({"Authorization": "Bearer not-a-key"}, "invalid_credentials"),
        ({"Authorization": "Bearer elk_0123456789abcdef_" + "A" * 43}, "invalid_credentials"),
    ],
)
def test_missing_or_wrong_credentials_write_nothing(
    api: HttpWorld, headers: dict[str, str], reason: str
) -> None:
    """Without a valid key every route under /v1 answers 401 not_authenticated, writing nothing."""
    before = api.written()
    for response in (
        api.client.post("/v1/proposals", json=PROPOSE, headers=headers),
        api.client.post("/v1/proposals", content=b"{broken", headers=headers),
        api.client.post("/v1/proposals/prop-x/perform", json={}, headers=headers),
        api.client.get("/v1/operations", headers=headers),
        api.client.get("/v1/operations/bad id", headers=headers),
    ):
        body = error_of(response, 401, "not_authenticated")
        assert body["details"]["reason"] == reason
    assert api.written() == before


def test_a_key_with_the_right_id_and_a_wrong_secret_is_refused(api: HttpWorld) -> None:
    """A token naming a real key id with another secret is refused like an unknown one."""
    real = api.tokens["agent"]
    forged = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")
    response = api.client.post(
        "/v1/proposals", json=PROPOSE, headers={"Authorization": f"Bearer {forged}"}
    )
    assert error_of(response, 401, "not_authenticated")["details"]["reason"] == (
        "invalid_credentials"
    )
    assert api.written()["proposals"] == 0


def test_a_revoked_key_stops_working_at_once(api: HttpWorld) -> None:
    """After revocation the same token is refused on the next request and nothing is written."""
    assert api.post("agent", "/v1/proposals", PROPOSE).status_code == 201
    key_id = api.tokens["agent"].split("_")[1]
    api.keys.revoke(key_id)
    before = api.written()
    response = api.post("agent", "/v1/proposals", PROPOSE)
    assert error_of(response, 401, "not_authenticated")["details"]["reason"] == (
        "revoked_credentials"
    )
    assert api.written() == before


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b"{not json", 400, "malformed_request"),
        (b"[1, 2]", 400, "malformed_request"),
        (b'"a string"', 400, "malformed_request"),
        (b'{"action": 7, "arguments": {}}', 422, "invalid_input"),
        (b'{"action": "refund_order", "arguments": []}', 422, "invalid_input"),
        (b'{"action": "refund_order", "arguments": {}, "extra": 1}', 422, "invalid_input"),
        (
            b'{"action": "refund_order", "arguments": {}, "tenant_id": "globex"}',
            422,
            "invalid_input",
        ),
        (b'{"action": "refund_order"}', 422, "invalid_input"),
        (b'{"action": "no_such_action", "arguments": {}}', 404, "not_found"),
    ],
)
def test_malformed_or_wrong_bodies_write_nothing(
    api: HttpWorld, content: bytes, status: int, code: str
) -> None:
    """Unparseable JSON, wrong types, unknown or missing fields get a stable code; no rows."""
    response = api.client.post(
        "/v1/proposals",
        content=content,
        headers={**api.auth("agent"), "Content-Type": "application/json"},
    )
    error_of(response, status, code)
    assert api.written() == dict.fromkeys(api.written(), 0)


@pytest.mark.parametrize(
    "arguments",
    [
        {**REFUND_30, "amount_minor": "30"},
        {**REFUND_30, "amount_minor": 30.5},
        {**REFUND_30, "tenant_id": "globex"},
        {**REFUND_30, "approved_by": "admin"},
        {**REFUND_30, "currency": "XXX"},
    ],
)
def test_action_arguments_are_validated_by_the_action(
    api: HttpWorld, arguments: dict[str, Any]
) -> None:
    """Arguments of the wrong type, identity fields or bad values are refused; no proposal."""
    response = api.post(
        "agent", "/v1/proposals", {"action": "refund_order", "arguments": arguments}
    )
    error_of(response, 422, "invalid_input")
    assert api.written() == dict.fromkeys(api.written(), 0)


def test_decisions_and_performs_refuse_bad_bodies(api: HttpWorld) -> None:
    """Approve, deny and perform refuse wrong types, unknown fields and bad digests; no effect."""
    proposal = api.post("agent", "/v1/proposals", PROPOSE).json()
    before = api.written()
    path = f"/v1/proposals/{proposal['proposal_id']}"
    cases = [
        ("reviewer", "/approve", {"digest": proposal["digest"], "expires_in_s": "60"}),
        ("reviewer", "/approve", {"digest": proposal["digest"], "expires_in_s": 0}),
        ("reviewer", "/approve", {"digest": proposal["digest"], "approver_id": "admin"}),
        ("reviewer", "/approve", {"digest": "not-a-digest"}),
        ("reviewer", "/deny", {"digest": proposal["digest"]}),
        ("agent", "/perform", {"approval_id": 17}),
        ("agent", "/perform", {"actor_id": "rita"}),
        ("agent", "/perform", {"approval_id": "bad id"}),
    ]
    for who, suffix, body in cases:
        error_of(api.post(who, path + suffix, body), 422, "invalid_input")
    assert api.written() == before


def test_an_approval_of_another_digest_is_refused(api: HttpWorld) -> None:
    """Approving a digest the stored proposal does not have is 403 approval_refused, no row."""
    proposal = api.post("agent", "/v1/proposals", PROPOSE).json()
    before = api.written()
    response = api.post(
        "reviewer", f"/v1/proposals/{proposal['proposal_id']}/approve", {"digest": "0" * 64}
    )
    assert error_of(response, 403, "approval_refused")["details"]["reason"] == "digest_mismatch"
    assert api.written() == before


def test_ids_of_the_wrong_shape_are_refused(api: HttpWorld) -> None:
    """An id that no ledger id can be gets 422 invalid_input on every route that takes one."""
    for path in (
        "/v1/proposals/-leading-dash",
        "/v1/operations/" + "x" * 200,
        "/v1/operations/bad%20id/events",
        "/v1/capacity/p%C3%A9",
    ):
        error_of(api.get("reviewer", path), 422, "invalid_input")
    error_of(api.post("agent", "/v1/proposals/bad%20id/perform"), 422, "invalid_input")
    assert api.written() == dict.fromkeys(api.written(), 0)


def test_another_tenants_ids_read_as_unknown(api: HttpWorld) -> None:
    """Another tenant's proposal and operation ids answer exactly like ids that do not exist."""
    proposal, approval = approved(api)
    performed = api.post(
        "agent", f"/v1/proposals/{proposal['proposal_id']}/perform", {"approval_id": approval}
    )
    assert performed.status_code == 200
    before = api.written()
    operation = proposal["operation_id"]
    pairs = [
        (f"/v1/proposals/{proposal['proposal_id']}", "/v1/proposals/prop-unknown"),
        (f"/v1/operations/{operation}", "/v1/operations/op-unknown"),
        (f"/v1/operations/{operation}/events", "/v1/operations/op-unknown/events"),
        (f"/v1/operations/{operation}/explanation", "/v1/operations/op-unknown/explanation"),
    ]
    for foreign, unknown in pairs:
        seen = error_of(api.get("outsider", foreign), 404, "not_found")
        missing = error_of(api.get("outsider", unknown), 404, "not_found")
        assert seen["message"].replace(operation, "X").replace(proposal["proposal_id"], "X") == (
            missing["message"].replace("prop-unknown", "X").replace("op-unknown", "X")
        )
    approve = api.post(
        "outsider",
        f"/v1/proposals/{proposal['proposal_id']}/approve",
        {"digest": proposal["digest"]},
    )
    error_of(approve, 404, "not_found")
    perform = api.post(
        "outsider", f"/v1/proposals/{proposal['proposal_id']}/perform", {"approval_id": approval}
    )
    assert error_of(perform, 404, "not_found")["details"]["result"]["reason"] == "not_found"
    assert api.get("outsider", "/v1/operations").json() == []
    assert api.written() == before
    assert api.written()["effects"] == 1


def test_tenant_views_need_a_reviewer_role(api: HttpWorld) -> None:
    """An agent key reads its own proposal and status, not others' or the tenant's views.

    The rule is the ledger's: the Python API refuses the same views with the same code.
    """
    proposal, approval = approved(api)
    api.post("agent", f"/v1/proposals/{proposal['proposal_id']}/perform", {"approval_id": approval})
    operation = proposal["operation_id"]
    assert api.get("agent", f"/v1/operations/{operation}").json()["state"] == "SUCCEEDED"
    for path in (
        "/v1/operations",
        f"/v1/operations/{operation}/events",
        f"/v1/operations/{operation}/explanation",
        "/v1/capacity/refunds",
    ):
        refused = error_of(api.get("agent", path), 403, "not_permitted")
        assert refused["details"]["needs"] == ["approver", "auditor"]
    tenant, actor, roles = IDENTITIES["agent"]
    agent = Context(tenant_id=tenant, actor_id=actor, roles=frozenset(roles))
    app = api.world.app
    for view in (
        lambda: app.operations(agent),
        lambda: app.events(agent, operation),
        lambda: app.explain(agent, operation),
        lambda: app.capacity(agent, "refunds"),
    ):
        with pytest.raises(NotPermitted) as raised:
            view()
        assert raised.value.to_dict()["details"] == refused["details"]
    error_of(api.get("mallory", f"/v1/operations/{operation}"), 404, "not_found")
    error_of(api.get("mallory", f"/v1/proposals/{proposal['proposal_id']}"), 404, "not_found")
    assert api.get("agent", f"/v1/proposals/{proposal['proposal_id']}").status_code == 200
    assert [op["operation_id"] for op in api.get("reviewer", "/v1/operations").json()] == [
        operation
    ]
    assert api.get("reviewer", "/v1/capacity/refunds").json()["committed"] == 30


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_limit_is_refused_before_parsing(api: HttpWorld, chunked: bool) -> None:
    """A body over 64 KiB is 413 request_too_large, declared or streamed, and writes nothing."""
    # Valid JSON with a huge reason: were it parsed, it would be a proposal.
    payload = (
        b'{"action": "refund_order", "arguments": {"order_id": "ord-1", "amount_minor": 1, '
        b'"currency": "EUR", "reason": "' + b"x" * 70_000 + b'"}}'
    )
    content: bytes | Iterator[bytes] = (
        iter([payload[:40_000], payload[40_000:]]) if chunked else payload
    )
    response = api.client.post(
        "/v1/proposals",
        content=content,
        headers={**api.auth("agent"), "Content-Type": "application/json"},
    )
    body = error_of(response, 413, "request_too_large")
    assert body["details"]["limit_bytes"] == 64 * 1024
    assert api.written() == dict.fromkeys(api.written(), 0)


def test_unknown_routes_and_methods_have_codes(api: HttpWorld) -> None:
    """An unknown route is 404 route_not_found and a wrong method 405 method_not_allowed."""
    error_of(api.get("agent", "/v1/nothing-here"), 404, "route_not_found")
    error_of(
        api.client.delete("/v1/proposals", headers=api.auth("agent")), 405, "method_not_allowed"
    )


def test_openapi_is_published_with_the_key_scheme(api: HttpWorld) -> None:
    """/openapi.json lists every route, the bearer key scheme and the one error shape."""
    document = api.client.get("/openapi.json").json()
    paths = set(document["paths"])
    assert {
        "/v1/proposals",
        "/v1/proposals/{proposal_id}",
        "/v1/proposals/{proposal_id}/approve",
        "/v1/proposals/{proposal_id}/deny",
        "/v1/proposals/{proposal_id}/perform",
        "/v1/operations",
        "/v1/operations/{operation_id}",
        "/v1/operations/{operation_id}/events",
        "/v1/operations/{operation_id}/explanation",
        "/v1/capacity/{pool}",
        "/healthz",
        "/readyz",
        "/livez",
    } <= paths
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert set(document["components"]["schemas"]["ErrorBody"]["properties"]) == {
        "code",
        "message",
        "details",
    }
    perform = document["paths"]["/v1/proposals/{proposal_id}/perform"]["post"]
    assert perform["security"] == [{"HTTPBearer": []}]


def test_health_reports_the_store_and_liveness_separately(
    api: HttpWorld, backend: str, tmp_path: Any
) -> None:
    """/healthz and /readyz report the store; /livez answers without it; both change truthfully."""
    assert api.client.get("/livez").json() == {"status": "alive"}
    healthy = api.client.get("/healthz")
    assert healthy.status_code == 200
    assert healthy.json()["store"] == "reachable"
    assert healthy.json()["schema_version"] >= 6
    # Take the store away under the running server: the ledger's tables vanish.
    if backend == "postgres":
        drop_postgres_schema(postgres_schema(tmp_path))
    else:
        api.world.ledger.store.close()
        (tmp_path / "ledger.db").unlink()
        (tmp_path / "ledger.db").mkdir()  # a path that cannot be opened as a database
    for path in ("/healthz", "/readyz"):
        body = error_of(api.client.get(path), 503, "store_unreachable")
        assert body["details"]["store"] == "unreachable"
    assert api.client.get("/livez").status_code == 200


def test_a_denial_over_http_closes_the_proposal(api: HttpWorld) -> None:
    """A reviewer's denial is recorded; no later approval or perform can admit the proposal."""
    proposal = api.post("agent", "/v1/proposals", PROPOSE).json()
    path = f"/v1/proposals/{proposal['proposal_id']}"
    shown = api.get("reviewer", path).json()
    assert shown["digest"] == proposal["digest"]
    denied = api.post("reviewer", path + "/deny", {"digest": shown["digest"], "reason": "no"})
    assert (denied.status_code, denied.json()["granted"]) == (201, False)
    again = api.post("reviewer", path + "/approve", {"digest": shown["digest"]})
    assert error_of(again, 403, "approval_refused")["details"]["reason"] == "proposal_denied"
    performed = api.post("agent", path + "/perform", {"approval_id": denied.json()["approval_id"]})
    body = error_of(performed, 403, "admission_denied")
    assert body["details"]["reason"] == body["details"]["result"]["reason"]
    assert api.written()["operations"] == 0
    assert api.written()["effects"] == 0


def test_a_repeated_propose_with_its_operation_id_makes_one_proposal(api: HttpWorld) -> None:
    """Retrying a propose that names its operation id is refused (409), never a second proposal."""
    body = {**PROPOSE, "operation_id": "op-retry-1"}
    assert api.post("agent", "/v1/proposals", body).status_code == 201
    error_of(api.post("agent", "/v1/proposals", body), 409, "operation_id_taken")
    assert api.written()["proposals"] == 1
    error_of(
        api.post("agent", "/v1/proposals", {**PROPOSE, "operation_id": "op/with/slash"}),
        422,
        "invalid_input",
    )
