"""The HTTP API's edges: store failures, JSON rules, methods, roles that only read.

Each refusal is checked at the durable facts too: nothing was written and nothing performed.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from effectledger import ManualClock
from tests.conftest import drop_postgres_schema, postgres_schema
from tests.http_api.conftest import HttpWorld, http_world
from tests.http_api.test_http_boundaries import PROPOSE, approved, error_of

FORGED = {"Authorization": "Bearer elk_0123456789abcdef_" + "A" * 43}
"""A well-formed key nobody issued: judging it needs the store."""


def break_store(api: HttpWorld, backend: str, tmp_path: Path) -> None:
    """Take the ledger's store away under the running server."""
    if backend == "postgres":
        drop_postgres_schema(postgres_schema(tmp_path))
    else:
        api.world.ledger.store.close()
        (tmp_path / "ledger.db").unlink()
        (tmp_path / "ledger.db").mkdir()


def test_a_failing_store_answers_its_code_and_a_fixed_message_only(
    api: HttpWorld, backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the store gone, callers with and without a key get 503 with the stable code, a fixed
    message and no details: no SQL, driver or server text; the log keeps the driver's text."""
    break_store(api, backend, tmp_path)
    with caplog.at_level(logging.WARNING, logger="effectledger.callers.http.app"):
        answers = [
            api.client.post("/v1/proposals", json=PROPOSE, headers=FORGED),
            api.post("agent", "/v1/proposals", PROPOSE),
            api.get("agent", "/v1/operations"),
        ]
    for response in answers:
        body = error_of(response, 503, "storage")
        assert body["details"] == {}
        text = response.text.lower()
        for leak in ("select", "insert", "relation", "sqlite", "psycopg", "postgres", "api_keys"):
            assert leak not in text, response.text
    assert any("store failure" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"action": "refund_order", "action": "other", "arguments": {}}', "is repeated"),
        (b'{"action": "refund_order", "arguments": {"a": 1, "a": 2}}', "is repeated"),
        (b"[" * 5000 + b"]" * 5000, "nested deeper"),
        (b'{"a": ' * 70 + b"1" + b"}" * 70, "nested deeper"),
        (b'{"action": "refund_order", "arguments": {"n": ' + b"9" * 5000 + b"}}", "too long"),
        (b'{"action": "refund_order", "arguments": {"n": NaN}}', "NaN"),
        (b'{"action": ', "not valid JSON"),
    ],
)
def test_bodies_the_tools_refuse_are_malformed_requests(
    api: HttpWorld, content: bytes, problem: str
) -> None:
    """A repeated key, deep nesting, a 5,000-digit integer, NaN or broken JSON is 400
    malformed_request naming the problem, and nothing is written."""
    before = api.written()
    response = api.client.post(
        "/v1/proposals",
        content=content,
        headers={**api.auth("agent"), "Content-Type": "application/json"},
    )
    body = error_of(response, 400, "malformed_request")
    assert problem in body["message"]
    assert api.written() == before


def test_a_refused_body_without_a_key_hears_about_the_key(api: HttpWorld) -> None:
    """A caller without a valid key sending a repeated key is told 401, not the body rule."""
    response = api.client.post(
        "/v1/proposals",
        content=b'{"action": "a", "action": "b"}',
        headers={"Content-Type": "application/json"},
    )
    error_of(response, 401, "not_authenticated")


def test_a_body_without_a_json_content_type_is_told_so(api: HttpWorld) -> None:
    """A JSON body sent as text/plain is 400 malformed_request saying the content type."""
    before = api.written()
    response = api.client.post(
        "/v1/proposals",
        content=b'{"action": "refund_order", "arguments": {}}',
        headers={**api.auth("agent"), "Content-Type": "text/plain"},
    )
    assert (
        "Content-Type: application/json" in error_of(response, 400, "malformed_request")["message"]
    )
    assert api.written() == before


def test_an_empty_perform_body_uses_the_recorded_decision(api: HttpWorld) -> None:
    """A perform with no body at all is valid (every field is optional): it is performed on the
    recorded approval, with one effect."""
    proposal, _ = approved(api)
    response = api.client.post(
        f"/v1/proposals/{proposal['proposal_id']}/perform", headers=api.auth("agent")
    )
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "performed"
    assert api.world.receiver.counts().effects == 1


def test_method_not_allowed_names_the_allowed_methods(api: HttpWorld) -> None:
    """A 405 carries the Allow header listing every method the path takes, from every route
    that serves it (``/v1/proposals``: GET lists the queue, POST proposes)."""
    response = api.client.delete("/v1/proposals", headers=api.auth("agent"))
    error_of(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET, POST"
    approve = api.client.get("/v1/proposals/p-1/approve", headers=api.auth("agent"))
    error_of(approve, 405, "method_not_allowed")
    assert approve.headers["allow"] == "POST"


def test_the_openapi_document_states_what_the_server_enforces(api: HttpWorld) -> None:
    """/metrics' errors are declared JSON (as served), the queue's ``after`` cursor and the deny
    reason carry the patterns the ledger checks, and a served error matches its declaration."""
    document = api.client.get("/openapi.json").json()
    metrics = document["paths"]["/metrics"]["get"]["responses"]
    assert set(metrics["401"]["content"]) == {"application/json"}
    refused = api.client.get("/metrics")
    assert refused.status_code == 401
    assert refused.headers["content-type"].startswith("application/json")
    (after,) = [p for p in document["paths"]["/v1/proposals"]["get"]["parameters"]
                if p["name"] == "after"]  # fmt: skip
    pattern = after["schema"]["anyOf"][0]["pattern"]
    assert re.fullmatch(pattern, "1767225600000000.prop-1")
    assert not re.fullmatch(pattern, "not a cursor")
    bad_cursor = api.client.get("/v1/proposals?after=x", headers=api.auth("reviewer"))
    assert bad_cursor.status_code in (400, 422)
    assert bad_cursor.json()["code"] == "invalid_input"
    reason = document["components"]["schemas"]["DenyRequest"]["properties"]["reason"]
    for text, allowed in [("too much", True), ("   ", False), ("a\x00b", False)]:
        assert bool(re.fullmatch(reason["pattern"], text)) is allowed, text
    assert "lone surrogate" in reason["description"]
    proposal = api.post("agent", "/v1/proposals", PROPOSE).json()
    before = api.written()
    for said in (b"a\\u0000b", b"a\\ud800b", b"   "):  # each rule the document states
        refused = api.client.post(
            f"/v1/proposals/{proposal['proposal_id']}/deny",
            content=b'{"digest": "'
            + proposal["digest"].encode()
            + b'", "reason": "'
            + said
            + b'"}',
            headers={**api.auth("reviewer"), "Content-Type": "application/json"},
        )
        assert refused.status_code == 422, (said, refused.text)
        assert refused.json()["code"] == "invalid_input"
    assert api.written() == before


def test_the_openapi_document_declares_the_correlation_rule(api: HttpWorld) -> None:
    """Every correlation field declares the printable pattern the ledger enforces, and a value
    outside it is refused with 422 without writing."""
    schema = api.client.get("/openapi.json").json()["components"]["schemas"]["CorrelationBody"]
    for name, field in schema["properties"].items():
        declared = field["anyOf"][0]
        assert declared["pattern"] == r"^[\x20-\x7e]{1,256}$", name
    before = api.written()
    body: dict[str, Any] = {**PROPOSE, "correlation": {"trace_id": "trace\u2028id"}}
    error_of(api.post("agent", "/v1/proposals", body), 422, "invalid_input")
    assert api.written() == before


def test_an_auditor_only_key_cannot_write(
    store_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    """A key holding only the auditor role reads the tenant's views but cannot propose, approve
    or perform (403 not_permitted), and nothing is written."""
    with http_world(store_url, tmp_path / "http", clock) as api:
        token = api.keys.create(tenant_id="acme", actor_id="audra", roles=["auditor"]).token
        auditor = {"Authorization": f"Bearer {token}"}
        proposal, _ = approved(api)
        before = api.written()
        path = f"/v1/proposals/{proposal['proposal_id']}"
        for response in (
            api.client.post("/v1/proposals", json=PROPOSE, headers=auditor),
            api.client.post(f"{path}/approve", json={"digest": proposal["digest"]},
                            headers=auditor),
            api.client.post(f"{path}/perform", json={}, headers=auditor),
        ):  # fmt: skip
            error_of(response, 403, "not_permitted")
        assert api.written() == before
        assert api.client.get("/v1/operations", headers=auditor).status_code == 200


def test_roles_that_only_read_write_nothing_through_python_and_tools(api: HttpWorld) -> None:
    """The same access rule holds for the Python API and the function tools: an auditor-only
    context's propose and perform are refused with not_permitted, and nothing is written."""
    from effectledger import Context, NotPermitted
    from effectledger.callers.tools.function_tools import FunctionTools

    auditor = Context(tenant_id="acme", actor_id="audra", roles=frozenset({"auditor"}))
    proposal, _ = approved(api)
    before = api.written()
    with pytest.raises(NotPermitted):
        api.world.app.propose(auditor, "refund_order", PROPOSE["arguments"])
    with pytest.raises(NotPermitted):
        api.world.app.perform(auditor, proposal["proposal_id"])
    tools = FunctionTools(api.world.app)
    answer = tools.call(auditor, "propose_refund_order", PROPOSE["arguments"])
    assert answer.is_error
    assert answer.data["error"]["code"] == "not_permitted"
    assert api.written() == before


def test_a_foreign_proposal_id_reads_the_same_through_http_python_and_tools(
    api: HttpWorld,
) -> None:
    """Another tenant's proposal id is not_found with one and the same result, trace included,
    through the HTTP API, the Python API and the function tools; nothing is written."""
    from effectledger import Context
    from effectledger.callers.tools.function_tools import FunctionTools

    proposal, approval = approved(api)
    before = api.written()
    outsider = Context(tenant_id="globex", actor_id="agent-7", roles=frozenset({"agent"}))
    over_http = api.post("outsider", f"/v1/proposals/{proposal['proposal_id']}/perform",
                         {"approval_id": approval})  # fmt: skip
    http_result = error_of(over_http, 404, "not_found")["details"]["result"]
    direct = api.world.app.perform(outsider, proposal["proposal_id"], approval=approval).to_dict()
    tools = FunctionTools(api.world.app)
    arguments = {"proposal_id": proposal["proposal_id"], "approval_id": approval}
    tool_result = tools.call(outsider, "perform_proposal", arguments)
    assert http_result == direct
    assert tool_result.data == direct
    assert direct["trace"] == [
        ["request", "received"],
        ["tenant", "accepted"],
        ["reservation", "denied:not_found"],
    ]
    assert api.written() == before
