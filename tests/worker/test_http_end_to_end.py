"""The whole road over real sockets: an agent's refund behind ``effectledger serve`` loses its
reply from an ``HttpDestination``, and ``effectledger worker`` reconciles it with no code of the
user's beyond the application module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from effectledger.receiver.server import serve
from tests.conftest import count_rows, sqlite_path
from tests.support.served import served_address

SCRIPT = Path(sys.executable).parent / "effectledger"
TOKEN = "receiver-token-never-stored"

SHOP = '''
    """The user's application: one refund action sent to a payment API over HTTP."""
    import os
    from datetime import timedelta

    from pydantic import BaseModel

    from effectledger import LedgerSettings, connect
    from effectledger.destinations.http import HttpContract
    from effectledger.destinations.secrets import env_secret
    from effectledger.receiver.contract import REFERENCE_CONTRACT, reference_destination


    class Refund(BaseModel):
        order_id: str
        amount_minor: int
        currency: str


    def build(store_url):
        payments = reference_destination(
            os.environ["SHOP_PAYMENTS_URL"],
            actions=("refund",),
            collection="refunds",
            token=env_secret("SHOP_PAYMENTS_TOKEN", "Bearer {secret}"),
            contract=HttpContract(rules=REFERENCE_CONTRACT.rules),  # no automatic resend
        )
        ledger = connect(store_url, settings=LedgerSettings(recover_after=timedelta(seconds=1)))
        ledger.action(
            name="refund", contract="refund-v1", arguments=Refund, destination=payments
        )
        return ledger
'''


def _start(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SCRIPT), *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _migrate(folder: Path, env: dict[str, str], db: str) -> None:
    subprocess.run(  # only migrate (and demo) create a ledger
        [str(SCRIPT), "migrate", "--db", db],
        cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip


def _token(folder: Path, env: dict[str, str], db: str, actor: str, roles: str) -> str:
    made = subprocess.run(
        [str(SCRIPT), "keys", "create", "--db", db, "--tenant", "acme", "--actor", actor,
         "--roles", roles, "--json"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return str(httpx.Response(200, content=made.stdout).json()["token"])


def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0]
    return process.returncode, output


WORKER = ("--recovery-interval", "0.2", "--seal-interval", "0")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["worker", "serve-worker"])
def test_a_lost_http_reply_behind_serve_is_reconciled_by_the_worker(
    store_url: str, tmp_path: Path, mode: str
) -> None:
    """The receiver commits and drops the connection; the API reports the refund uncertain;
    ``effectledger worker`` (or ``serve --worker``) looks it up by key and records it
    SUCCEEDED, sending nothing again."""
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "shop.py").write_text(textwrap.dedent(SHOP), "utf-8")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    with serve(tmp_path / "payments.db", token=TOKEN) as payments:
        env |= {"SHOP_PAYMENTS_URL": payments.url, "SHOP_PAYMENTS_TOKEN": TOKEN}
        _migrate(folder, env, store_url)
        agent = {"Authorization": f"Bearer {_token(folder, env, store_url, 'agent-7', 'agent')}"}
        rita = {"Authorization": f"Bearer {_token(folder, env, store_url, 'rita', 'approver')}"}
        in_api = ("--worker", *WORKER) if mode == "serve-worker" else ()
        server = _start(folder, env, "serve", "--db", store_url, "--app", "shop:build",
                        "--port", "0", *in_api)  # fmt: skip
        served = served_address(server)
        worker: subprocess.Popen[str] | None = None
        api = httpx.Client(base_url=served.base, timeout=10)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if api.get("/livez").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert server.poll() is None, served.output()
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)

            arguments = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR"}
            proposal = api.post(
                "/v1/proposals", json={"action": "refund", "arguments": arguments}, headers=agent
            ).json()
            approved = api.post(
                f"/v1/proposals/{proposal['proposal_id']}/approve",
                json={"digest": proposal["digest"]},
                headers=rita,
            )
            assert approved.status_code == 201, approved.text
            payments.faults.drop_after_commit = 1
            performed = api.post(
                f"/v1/proposals/{proposal['proposal_id']}/perform", json={}, headers=agent
            ).json()
            assert (performed["state"], performed["uncertain"]) == ("OUTCOME_UNKNOWN", True)
            operation = f"/v1/operations/{performed['operation_id']}"
            assert payments.store.counts().effects == 1  # it happened; the ledger cannot know

            if mode == "worker":
                worker = _start(folder, env, "worker", "--db", store_url, "--app", "shop:build",
                                *WORKER)  # fmt: skip
            deadline = time.monotonic() + 60
            while api.get(operation, headers=agent).json()["state"] != "SUCCEEDED":
                assert worker is None or worker.poll() is None, worker.communicate()[0]
                assert time.monotonic() < deadline, "the worker never reconciled the refund"
                time.sleep(0.1)
            status = api.get(operation, headers=agent).json()
            assert status["uncertain"] is False
            assert status["provider_reference"]
        finally:
            api.close()
            worker_code, worker_output = (0, "") if worker is None else _stop(worker)
            server.send_signal(signal.SIGTERM)
            server_code = server.wait(timeout=60)
            server_output = served.output()
        assert worker_code == 0, worker_output
        assert server_code in (0, -signal.SIGTERM), server_output
        ran = server_output if worker is None else worker_output
        assert "recovery: due 1, looked up 1, resolved 1" in ran
        if worker is not None:
            assert "worker stopped: dispatched 0, recovery reserved 1 (resolved 1" in ran
        else:  # the loops stopped after the server, and the process was not killed under them
            assert "worker stopped" in ran
            assert server_code == 0, server_output
        counts = payments.store.counts()
    assert (counts.submissions, counts.effects, counts.lookups) == (1, 1, 1)
    assert count_rows(store_url, "attempts") == 1
    events = "event_type = 'ProviderAcceptanceReconciled'"
    assert count_rows(store_url, "audit_events", events) == 1
    if store_url.startswith("sqlite:///"):
        stored = sqlite_path(store_url).read_bytes()
        assert TOKEN.encode() not in stored
