"""Schemathesis against the published OpenAPI of a real server: no 5xx, every error has a code.

The cases are generated from ``/openapi.json`` (valid and invalid inputs alike) and sent over
HTTP to a server on 127.0.0.1 with a key that holds every role. A bounded number of examples
per operation keeps the run short.
"""

from __future__ import annotations

import inspect
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from effectledger import errors
from effectledger.callers.http.app import HTTP_ONLY_CODES
from tests.acceptance.test_authority_matrix import REFUND_30
from tests.http_api.conftest import HttpWorld

STABLE_CODES = {
    cls.code
    for cls in vars(errors).values()
    if inspect.isclass(cls) and issubclass(cls, errors.EffectLedgerError)
} | set(HTTP_ONLY_CODES)
CHECKS = [
    not_a_server_error,
    status_code_conformance,  # every status served is one the document declares
    content_type_conformance,  # with the content type it declares
    response_schema_conformance,  # and a body its schema admits
    response_headers_conformance,
]
EXAMPLES = 8  # per operation and generation mode: about 200 requests per backend


@pytest.fixture
def fuzzed(api: HttpWorld) -> tuple[HttpWorld, str]:
    """The HTTP world with one performed refund in it and a key holding every role."""
    token = api.keys.create(
        tenant_id="acme", actor_id="fuzzer", roles=["agent", "approver", "auditor"]
    ).token
    proposal = api.post(
        "agent", "/v1/proposals", {"action": "refund_order", "arguments": REFUND_30}
    )
    body = proposal.json()
    approval = api.post(
        "reviewer", f"/v1/proposals/{body['proposal_id']}/approve", {"digest": body["digest"]}
    ).json()
    performed = api.post(
        "agent",
        f"/v1/proposals/{body['proposal_id']}/perform",
        {"approval_id": approval["approval_id"]},
    )
    assert performed.json()["outcome"] == "performed"
    return api, token


@pytest.mark.slow
def test_no_input_makes_a_server_error(fuzzed: tuple[HttpWorld, str]) -> None:
    """Whatever the input, the API answers below 500, and every error carries a stable code."""
    api, token = fuzzed
    schema = schemathesis.openapi.from_url(f"{str(api.client.base_url).rstrip('/')}/openapi.json")
    operations = [operation for path in schema for operation in schema[path].values()]
    assert len(operations) >= 13
    effects_before = api.world.receiver.counts().effects
    statuses: Counter[int] = Counter()

    def exercise(case: schemathesis.Case) -> None:
        response = case.call(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        statuses[response.status_code] += 1
        case.validate_response(response, checks=CHECKS)
        if response.status_code >= 400:
            body = response.json()
            assert set(body) == {"code", "message", "details"}, body
            assert body["code"] in STABLE_CODES, body

    for operation in operations:
        # Health routes take no input at all, so there is nothing to get wrong in them.
        takes_input = operation.path.startswith("/v1/")
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if takes_input else [])
        for mode in modes:
            run = settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )(given(operation.as_strategy(generation_mode=mode))(exercise))
            run()
    assert sum(statuses.values()) >= len(operations)
    assert all(status < 500 for status in statuses)
    # Generated requests may propose or decide, but none performs an effect: that takes a
    # proposal and a reviewer's approval of its exact digest, which no generator can forge.
    assert api.world.receiver.counts().effects == effects_before
