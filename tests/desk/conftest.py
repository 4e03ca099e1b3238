"""Debian's Chromium driven by Playwright against a real desk, and the world behind it.

Playwright never downloads a browser here: it launches the ``chromium`` found on the PATH
(``apt-get install chromium``), headless. Without it the browser tests skip, except in CI,
where a missing browser fails them. Screenshots land in ``test-artifacts/desk/`` (printed).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from effectledger import LookupMode, ManualClock, SimulatedReceiver, SubmitMode
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app
from tests.acceptance.test_authority_matrix import World, build_world
from tests.conftest import in_ci
from tests.http_api.server import serving

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "desk"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
IDENTITIES = {
    "agent": ("acme", "agent-7", ["agent"]),
    "rita": ("acme", "rita", ["approver", "operations"]),
    "sam": ("acme", "sam", ["approver"]),
}


def chromium_path() -> str:
    """The system Chromium, or a skip (a failure in CI) when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if in_ci():
            pytest.fail("chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@dataclass
class Desk:
    """A served desk over a fresh world, with one API key token per identity."""

    world: World
    base: str
    tokens: dict[str, str]

    @property
    def receiver(self) -> SimulatedReceiver:
        """The world's simulated receiver (its own SQLite file counts effects)."""
        return self.world.receiver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless system Chromium per test module.

    Playwright's sync API runs an event loop on this thread while it is open: closing it with
    the module keeps that loop from outliving the browser tests and breaking ``asyncio.run``
    in the tests after them.
    """
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\ndesk screenshots: {ARTIFACTS}")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=LAUNCH_ARGS, headless=True
        )
        yield launched
        launched.close()


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock started at the real time, so the page's countdown and the server agree."""
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def desk(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Desk]:
    """The refund world served with its desk on 127.0.0.1 (plain HTTP, so no Secure flag)."""
    world = build_world(store_url, tmp_path, clock)
    world.receiver.submit_mode = SubmitMode.ACCEPT
    world.receiver.lookup_mode = LookupMode.ANSWER
    keys = ApiKeys(world.ledger.store, clock=clock)
    tokens = {
        who: keys.create(tenant_id=tenant, actor_id=actor, roles=roles).token
        for who, (tenant, actor, roles) in IDENTITIES.items()
    }
    try:
        with serving(create_app(world.app, keys, desk=True, secure_cookies=False)) as base:
            yield Desk(world, base, tokens)
    finally:
        world.ledger.store.close()
        world.receiver.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page (no cookies shared between tests)."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()
