"""Screenshots of the reviewer's desk for docs/desk.md, regenerated from a real desk.

    python scripts/desk_screenshots.py [--out docs/images]

Builds a ledger in a temporary folder (refunds in three currencies, one whose agent gave a
reason holding a U+202E, one performed, one denied), serves the desk on 127.0.0.1, signs a
reviewer in with an API key in the system Chromium (Playwright launches ``chromium`` from the
PATH and never downloads a browser) and saves one PNG per page. Needs the ``server`` extra and
Playwright (``pip install -e '.[test]'``).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from effectledger import Context, Display, EffectLedger, SimulatedReceiver, connect
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
SAM = Context(tenant_id="acme", actor_id="sam", roles=frozenset({"approver"}))
PAGES = ("queue", "proposal", "proposal-hidden", "proposal-performed", "operation", "history")


class Refund(BaseModel):
    """A refund of part of an order, in minor units of its currency."""

    order_id: str
    amount_minor: int
    currency: str
    reason: str


def main() -> int:
    """Build the ledger, serve the desk, take the screenshots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/images", help="where the PNGs go (docs/images)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        receiver = SimulatedReceiver(Path(folder) / "receiver.db")
        with connect(f"sqlite:///{folder}/ledger.db") as ledger:
            refund = ledger.action(
                name="refund",
                contract="refund-v1",
                arguments=Refund,
                destination=receiver,
                pool="refunds",
                units=lambda r: r.amount_minor,
                target=lambda r: r.order_id,
                display=Display(
                    summary="Refund {amount_minor} on order {order_id}",
                    money={"amount_minor": "currency"},
                ),
                description="Refund part or all of an order, in minor units of its currency.",
            )
            ids = _story(ledger, refund)
            keys = ApiKeys(ledger.store)
            token = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"]).token
            app = create_app(ledger, keys, desk=True, secure_cookies=False)
            with _serving(app) as base:
                _shoot(chromium, base, token, ids, out)
        receiver.close()
    for name in PAGES:
        print(out / f"desk-{name}.png")
    return 0


def _story(ledger: EffectLedger, refund: Any) -> dict[str, str]:
    """The refunds the pages show; the ids of the ones each screenshot opens."""
    waiting = ledger.propose(
        AGENT,
        refund,
        order_id="ord-2001",
        amount_minor=700,
        currency="GBP",
        reason="damaged in transit",
        stated_reason="The customer sent photos of the broken item; policy allows a full refund.",
    )
    ledger.propose(
        AGENT, refund, order_id="ord-2002", amount_minor=1000, currency="JPY", reason="late"
    )
    hidden = ledger.propose(
        AGENT,
        refund,
        order_id="ord-2003",
        amount_minor=1250,
        currency="EUR",
        reason="see invoice-\u202egnp.exe",
        stated_reason="Invoice attached: invoice-\u202egnp.exe",
    )
    done = ledger.propose(
        AGENT, refund, order_id="ord-2004", amount_minor=4999, currency="EUR", reason="wrong size"
    )
    ledger.approve(SAM, done)
    performed = ledger.perform(AGENT, done)
    denied = ledger.propose(
        AGENT, refund, order_id="ord-2005", amount_minor=90000, currency="EUR", reason="goodwill"
    )
    ledger.deny(SAM, denied, reason="over the goodwill limit; ask a team lead")
    return {
        "proposal": waiting.proposal_id,
        "proposal-hidden": hidden.proposal_id,
        "proposal-performed": done.proposal_id,
        "operation": str(performed.operation_id),
    }


class _serving:
    """The desk served by uvicorn on a socket of 127.0.0.1 bound first."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the desk did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


def _shoot(chromium: str, base: str, token: str, ids: dict[str, str], out: Path) -> None:
    """Sign in as the reviewer and save each page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.goto(f"{base}/desk/login")
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/desk/")
        paths = {
            "queue": "/desk/",
            "proposal": f"/desk/proposals/{ids['proposal']}",
            "proposal-hidden": f"/desk/proposals/{ids['proposal-hidden']}",
            "proposal-performed": f"/desk/proposals/{ids['proposal-performed']}",
            "operation": f"/desk/operations/{ids['operation']}",
            "history": "/desk/history",
        }
        for name in PAGES:
            page.goto(base + paths[name])
            page.screenshot(path=str(out / f"desk-{name}.png"), full_page=True)
        browser.close()


if __name__ == "__main__":
    sys.exit(main())
