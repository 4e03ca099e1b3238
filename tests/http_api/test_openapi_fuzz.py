"""Schemathesis against the published OpenAPI of a real server: every conformance check clean.

The cases are generated from ``/openapi.json`` (valid and invalid inputs alike) and sent over
HTTP to a server on 127.0.0.1 with a key that holds every role, by schemathesis' own command
with every check it has (``--checks all``: no 5xx; status codes, content types, bodies and
headers as documented; schema-valid requests accepted and invalid ones refused; ``Allow`` on a
405; authentication not ignored; resources there after creation), over all its phases, plus
this API's own rule (:mod:`tests.http_api.conformance`: every error carries a stable code).
Bounded examples and a fixed seed keep the run short and repeatable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.acceptance.test_authority_matrix import REFUND_30
from tests.http_api.conftest import HttpWorld

ROOT = Path(__file__).resolve().parents[2]


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
def test_schemathesis_finds_the_server_conforms_to_its_document(
    fuzzed: tuple[HttpWorld, str], tmp_path: Path
) -> None:
    """``schemathesis run --checks all`` over every phase reports no failure, and the generated
    requests performed no effect."""
    api, token = fuzzed
    command = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert command is not None, "schemathesis is in the test extra: pip install -e '.[test]'"
    effects_before = api.world.receiver.counts().effects
    checked = tmp_path / "checked.txt"
    checked.touch()
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.http_api.conformance",
        "EFFECTLEDGER_TEST_CHECKED": str(checked),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [
            command,
            "run",
            f"{str(api.client.base_url).rstrip('/')}/openapi.json",
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {token}",
            "--max-examples",
            "15",
            "--seed",
            "20260101",
            "--workers",
            "1",
            "--no-color",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    assert "failures" not in done.stdout.splitlines()[-1], done.stdout[-4000:]
    codes = Counter(line.split()[1] for line in checked.read_text("utf-8").splitlines())
    assert {"invalid_input", "not_found"} <= set(codes), codes  # the own check saw errors
    # Generated requests may propose or decide, but none performs an effect: that takes a
    # proposal and a reviewer's approval of its exact digest, which no generator can forge.
    assert api.world.receiver.counts().effects == effects_before
