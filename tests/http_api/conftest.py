"""A refund world served over real HTTP: ledger, receiver, API keys and a uvicorn server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from effectledger import ManualClock
from effectledger.app.keys import ApiKeys
from effectledger.callers.http.app import create_app
from tests.acceptance.test_authority_matrix import World, build_world
from tests.conftest import count_rows
from tests.http_api.server import serving

IDENTITIES = {
    "agent": ("acme", "agent-7", ["agent"]),
    "reviewer": ("acme", "rita", ["approver"]),
    "mallory": ("acme", "mallory", ["agent"]),
    "outsider": ("globex", "agent-7", ["agent", "approver"]),
}
"""Who holds a key in every HTTP world: the direct tests' AGENT and REVIEWER, and two others."""


@dataclass
class HttpWorld:
    """A fresh world with a server in front of its ledger and one key per identity."""

    world: World
    keys: ApiKeys
    tokens: dict[str, str]
    client: httpx.Client

    def auth(self, who: str) -> dict[str, str]:
        """The Authorization header of ``who``'s key."""
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def post(self, who: str, path: str, body: Any = None) -> httpx.Response:
        """POST ``body`` as JSON to ``path`` with ``who``'s key."""
        return self.client.post(path, json={} if body is None else body, headers=self.auth(who))

    def get(self, who: str, path: str) -> httpx.Response:
        """GET ``path`` with ``who``'s key."""
        return self.client.get(path, headers=self.auth(who))

    def written(self) -> dict[str, int]:
        """What the ledger and the receiver hold: rows written and effects performed."""
        url = self.world.store_url
        counts = self.world.receiver.counts()
        return {
            "proposals": count_rows(url, "proposals"),
            "approvals": count_rows(url, "approvals"),
            "operations": count_rows(url, "operations"),
            "events": count_rows(url, "audit_events"),
            "submissions": counts.submissions,
            "effects": counts.effects,
        }


@contextmanager
def http_world(
    store_url: str, directory: Path, clock: ManualClock, **app_options: Any
) -> Iterator[HttpWorld]:
    """Build a world in ``directory`` over ``store_url``, serve it, yield it, stop and close it."""
    directory.mkdir(parents=True, exist_ok=True)
    world = build_world(store_url, directory, clock)
    keys = ApiKeys(world.ledger.store, clock=clock)
    tokens = {
        who: keys.create(tenant_id=tenant, actor_id=actor, roles=roles).token
        for who, (tenant, actor, roles) in IDENTITIES.items()
    }
    try:
        with (
            serving(create_app(world.app, keys, **app_options)) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            yield HttpWorld(world, keys, tokens, client)
    finally:
        world.ledger.store.close()
        world.receiver.close()


@pytest.fixture
def api(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[HttpWorld]:
    """A fresh HTTP world on the test's backend."""
    with http_world(store_url, tmp_path / "http", clock) as made:
        yield made
