"""How long does the desk take to answer with a large ledger? Measured beside raw queries.

Run it from the repository root::

    .venv/bin/python benchmarks/desk_pages.py [--dir DIR] [--operations 100000] [--pending 10000]

One SQLite ledger (``synchronous=OFF``) is filled with ``--operations`` performed refunds of one
tenant (pre-authorized, so each is a real propose and perform with its trail), then, a day
later on a manual clock (those proposals long expired), ``--pending`` proposals waiting for an
approver. Each page of the desk is then requested in process through its ASGI application
(session cookie, templates, the ledger's reads; no network), and its median server time is
printed beside the same file's own limit: the page's main rows read with plain ``sqlite3``
(the queue's named query with the same parameters, a proposal's and an operation's rows by key).
The floor the issue sets is 200 ms a page. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.testclient import TestClient

from effectledger import Context, EffectLedger, ManualClock, SimulatedReceiver
from effectledger.actions.policy import Preauthorization, RulePolicy
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.model import DestinationRef
from effectledger.model.operations import to_micros
from effectledger.sql import load_queries
from effectledger.store import open_store

AGENT = Context(tenant_id="acme", actor_id="agent-7")
FLOOR_MS = 200.0


def _median_ms(call: Callable[[], object], count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    """Fill the ledger, then print each page's median server time beside its raw read."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="folder for the database files (default: temp)")
    parser.add_argument("--operations", type=int, default=100_000, help="performed refunds")
    parser.add_argument("--pending", type=int, default=10_000, help="proposals left waiting")
    parser.add_argument("--samples", type=int, default=50, help="requests per page (50)")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="effectledger-desk-", dir=args.dir))
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    store = open_store(f"sqlite:///{folder / 'ledger.db'}?synchronous=OFF")
    receiver = SimulatedReceiver(folder / "receiver.db", synchronous="OFF")
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    policy = RulePolicy(
        version="refunds-v1", preauthorization=Preauthorization(max_units_per_operation=50)
    )
    ledger = EffectLedger(store, clock=clock)
    ledger.register(
        refund_action(orders=OrderBook(), destination=destination, policy=policy), receiver
    )
    print(
        f"effectledger desk benchmark - Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, synchronous=OFF, {args.operations} operations, "
        f"{args.pending} pending proposals, median of {args.samples} requests per page"
    )
    try:
        last_operation = ""
        for number in range(args.operations):
            arguments = {"order_id": f"ord-{number}", "amount_minor": 30, "currency": "EUR"}
            proposal = ledger.propose(AGENT, "refund_order", arguments)
            last_operation = ledger.perform(AGENT, proposal).operation_id or ""
            if (number + 1) % 10_000 == 0:
                sys.stderr.write(f"  performed {number + 1}/{args.operations}\n")
        clock.advance(timedelta(days=1))
        waiting = ""
        for number in range(args.pending):
            arguments = {"order_id": f"ord-9{number:07d}", "amount_minor": 900, "currency": "EUR"}
            waiting = ledger.propose(AGENT, "refund_order", arguments).proposal_id
            clock.advance(0.001)
        sys.stderr.write("  filled\n")
        keys = ApiKeys(store, clock=clock)
        token = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"]).token
        app = create_app(ledger, keys, desk=True, secure_cookies=False)
        client = TestClient(app, base_url="http://127.0.0.1")
        login = client.get("/desk/login")
        nonce = login.text.split('name="nonce" value="', 1)[1].split('"', 1)[0]
        client.post("/desk/login", data={"nonce": nonce, "token": token})
        raw = sqlite3.connect(folder / "ledger.db")
        queue_sql = load_queries("sqlite")["proposals_pending_expiring"]
        params = {
            "tenant_id": "acme",
            "reviewer_id": "rita",
            "now_us": to_micros(clock.now()),
            "expiring_before": 2**63 - 1,
            "after_us": 0,
            "after_id": "",
            "action": "",
            "pool": "",
            "proposer_id": "",
            "limit": 50,
        }
        pages: list[tuple[str, str, Callable[[], object]]] = [
            ("queue", "/desk/", lambda: raw.execute(queue_sql, params).fetchall()),
            (
                "queue, newest first",
                "/desk/?order=newest",
                lambda: raw.execute(
                    load_queries("sqlite")["proposals_pending_newest"],
                    {**params, "after_us": 2**63 - 1},
                ).fetchall(),
            ),
            (
                "proposal",
                f"/desk/proposals/{waiting}",
                lambda: raw.execute(
                    "SELECT * FROM proposals WHERE tenant_id = ? AND proposal_id = ?",
                    ("acme", waiting),
                ).fetchone(),
            ),
            (
                "operation",
                f"/desk/operations/{last_operation}",
                lambda: raw.execute(
                    "SELECT * FROM audit_events WHERE tenant_id = ? AND operation_id = ? "
                    "ORDER BY sequence",
                    ("acme", last_operation),
                ).fetchall(),
            ),
            (
                "capacity",
                "/desk/capacity",
                lambda: raw.execute(
                    "SELECT state, sum(units) FROM operations WHERE tenant_id = ? AND pool = ? "
                    "GROUP BY state",
                    ("acme", "refunds"),
                ).fetchall(),
            ),
            (
                "history",
                "/desk/history",
                lambda: raw.execute(
                    load_queries("sqlite")["decisions_page"],
                    {
                        "tenant_id": "acme",
                        "decider": None,
                        "action": None,
                        "decision": None,
                        "since_us": None,
                        "until_us": None,
                        "search": None,
                        "before_us": None,
                        "before_id": None,
                        "limit": 50,
                    },
                ).fetchall(),
            ),
        ]
        print(f"{'page':>22}  {'server ms':>9}  {'raw query ms':>12}  {'floor ms':>8}")
        for name, path, floor in pages:
            response = client.get(path)
            if response.status_code != 200:  # pragma: no cover
                raise SystemExit(f"{path} answered {response.status_code}")
            page_ms = _median_ms(lambda path=path: client.get(path), args.samples)
            raw_ms = _median_ms(floor, args.samples)
            print(f"{name:>22}  {page_ms:>9.1f}  {raw_ms:>12.2f}  {FLOOR_MS:>8.0f}")
        raw.close()
        client.close()
    finally:
        store.close()
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
