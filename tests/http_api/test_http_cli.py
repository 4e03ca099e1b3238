"""The ``serve`` and ``keys`` commands, run as real processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.acceptance.test_authority_matrix import REFUND_30
from tests.conftest import raw_sql
from tests.http_api.apps import RECEIVER_VARIABLE
from tests.support.served import served_address

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m effectledger.cli ARGS`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def created_token(output: str) -> tuple[str, str]:
    """The key id and token printed by ``keys create``."""
    lines = dict(line.split(":", 1) for line in output.splitlines() if ":" in line)
    return lines["key id"].strip(), lines["token"].strip()


@pytest.mark.slow
def test_keys_create_list_revoke(store_url: str) -> None:
    """A created key is printed once, listed without its secret, and listed revoked after revoke."""
    assert cli("migrate", "--db", store_url).returncode == 0
    made = cli(
        "keys",
        "create",
        "--db",
        store_url,
        "--tenant",
        "acme",
        "--actor",
        "rita",
        "--roles",
        "approver,auditor",
    )
    assert made.returncode == 0, made.stderr
    key_id, token = created_token(made.stdout)
    assert token.startswith(f"elk_{key_id}_")
    listed = cli("keys", "list", "--db", store_url, "--tenant", "acme")
    assert listed.returncode == 0, listed.stderr
    assert key_id in listed.stdout
    assert "approver,auditor" in listed.stdout
    secret = re.fullmatch(r"elk_[0-9a-f]{16}_([A-Za-z0-9_-]{43})", token)
    assert secret is not None, token
    assert secret.group(1) not in listed.stdout
    assert "live" in listed.stdout
    revoked = cli("keys", "revoke", "--db", store_url, key_id)
    assert revoked.returncode == 0, revoked.stderr
    assert "revoked" in cli("keys", "list", "--db", store_url).stdout
    assert raw_sql(store_url, "SELECT count(*) FROM api_keys WHERE revoked_us IS NOT NULL") == [
        (1,)
    ]


@pytest.mark.slow
def test_commands_other_than_migrate_never_create_a_database(tmp_path: Path) -> None:
    """``keys create``, ``keys list``, ``keys revoke`` and ``serve`` on a missing ledger fail
    (not_found), creating nothing."""
    missing = tmp_path / "absent" / "ledger.db"
    for args in (
        ("keys", "list"),
        ("keys", "revoke", "0123456789abcdef"),
        ("keys", "create", "--tenant", "acme", "--actor", "rita"),
        ("serve", "--app", "tests.http_api.apps:refund_service", "--port", "0"),
    ):
        done = cli(*args, "--db", f"sqlite:///{missing}")
        assert done.returncode == 1
        assert "[not_found]" in done.stderr
    assert not missing.exists()
    assert not missing.parent.exists()


def test_bad_key_arguments_are_refused(store_url: str) -> None:
    """A malformed actor or role is refused with invalid_input and no key is written."""
    assert cli("migrate", "--db", store_url).returncode == 0
    done = cli("keys", "create", "--db", store_url, "--tenant", "acme", "--actor", "bad actor")
    assert done.returncode == 1
    assert "[invalid_input]" in done.stderr
    assert raw_sql(store_url, "SELECT count(*) FROM api_keys") == [(0,)]


@pytest.mark.slow
def test_serve_runs_the_api_with_health_and_openapi(store_url: str, tmp_path: Path) -> None:
    """``serve`` answers health, publishes OpenAPI, accepts a CLI-made key, mounts the desk with
    secure cookies and stops on SIGTERM."""
    assert cli("migrate", "--db", store_url).returncode == 0
    made = cli(
        "keys",
        "create",
        "--db",
        store_url,
        "--tenant",
        "acme",
        "--actor",
        "agent-7",
        "--roles",
        "agent",
    )
    _, token = created_token(made.stdout)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "effectledger.cli",
            "serve",
            "--db",
            store_url,
            "--app",
            "tests.http_api.apps:refund_service",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        cwd=ROOT,
        env={**os.environ, RECEIVER_VARIABLE: str(tmp_path / "receiver.db")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = served_address(server)
    base = served.base
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/livez", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, served.output()
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        health = httpx.get(f"{base}/healthz").json()
        assert (health["store"], health["schema_version"] >= 6) == ("reachable", True)
        assert "/v1/proposals" in httpx.get(f"{base}/openapi.json").json()["paths"]
        proposal = httpx.post(
            f"{base}/v1/proposals",
            json={"action": "refund_order", "arguments": REFUND_30},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert proposal.status_code == 201, proposal.text
        assert proposal.json()["proposer_id"] == "agent-7"
        desk = httpx.get(f"{base}/desk/login")
        assert desk.status_code == 200
        assert "default-src 'none'" in desk.headers["content-security-policy"]
        assert "Secure" in desk.headers["set-cookie"]
        assert httpx.get(f"{base}/desk/static/desk.css").status_code == 200
        front = httpx.get(f"{base}/")  # the front door leads to the desk
        assert (front.status_code, front.headers["location"]) == (307, "/desk/")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        output = served.output()
    assert f"the reviewer's desk: {base}/desk/" in output
    assert f"the HTTP API: {base}/v1/" in output
    assert "--plain-http-cookies" in output
    # uvicorn shuts down gracefully, then re-raises the signal it caught.
    assert "Finished server process" in output
    assert server.returncode in (0, -signal.SIGTERM), output
    assert raw_sql(store_url, "SELECT count(*) FROM proposals") == [(1,)]


@pytest.mark.slow
def test_serve_refuses_a_service_it_cannot_load(tmp_path: Path) -> None:
    """``serve`` with a factory that does not exist exits 1 with invalid_input, serving nothing.

    The older spelling ``--service`` names the factory as ``--app`` does.
    """
    for spec in ("no_such_module:build", "tests.http_api.apps", "tests.http_api.apps:nothing"):
        done = cli("serve", "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--service", spec)
        assert done.returncode == 1, done.stderr
        assert "[invalid_input]" in done.stderr
