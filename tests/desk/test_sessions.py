"""The desk's sessions are bounded per key and overall, and no key can lock the others out.

Over a real ledger's API keys: a key that logs in again and again ends only its own oldest
sessions; a desk full of one agent's (or many agents') sessions still lets a reviewer in, and
those of a revoked key are dropped first. Sixteen threads logging in at once with one key leave
it no more than its share.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from effectledger.app.keys import ApiKeys
from effectledger.callers.desk import sessions as desk_sessions
from effectledger.callers.desk.sessions import MAX_SESSIONS_PER_KEY, Sessions
from effectledger.clock import ManualClock
from effectledger.store import Store, open_store


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated ledger store."""
    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def clock() -> ManualClock:
    """The desk's clock."""
    return ManualClock(datetime(2026, 12, 4, 9, 0, tzinfo=UTC))


@pytest.fixture
def keys(store: Store, clock: ManualClock) -> ApiKeys:
    """The ledger's API keys."""
    return ApiKeys(store, clock=clock)


def test_one_key_logging_in_again_and_again_ends_only_its_own_oldest(
    keys: ApiKeys, clock: ManualClock
) -> None:
    """The 17th login of a key ends its first session; a reviewer's session is untouched."""
    agent = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    rita = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"])
    sessions = Sessions(keys, clock=clock)
    reviewer, _ = sessions.login(rita.token)
    sprayed = [sessions.login(agent.token)[0] for _ in range(MAX_SESSIONS_PER_KEY + 4)]
    assert sessions.count(agent.key.key_id) == MAX_SESSIONS_PER_KEY
    assert [sessions.get(one) is None for one in sprayed[:4]] == [True] * 4
    assert all(sessions.get(one) is not None for one in sprayed[4:])
    assert sessions.get(reviewer) is not None


def test_a_full_desk_still_lets_a_reviewer_in(
    keys: ApiKeys, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many agent keys fill the desk: a reviewer logs in, an agent's session makes room."""
    monkeypatch.setattr(desk_sessions, "MAX_SESSIONS", 40)
    agents = [
        keys.create(tenant_id="acme", actor_id=f"agent-{n}", roles=["agent"]) for n in range(5)
    ]
    sessions = Sessions(keys, clock=clock)
    for agent in agents:
        for _ in range(MAX_SESSIONS_PER_KEY):
            sessions.login(agent.token)
    assert sessions.count() == 40
    rita = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"])
    reviewer, _ = sessions.login(rita.token)
    assert sessions.get(reviewer) is not None
    assert sessions.count() == 40
    assert sessions.count(rita.key.key_id) == 1
    sam = keys.create(tenant_id="acme", actor_id="sam", roles=["approver"])
    second, _ = sessions.login(sam.token)  # still the agents' sessions that make room
    assert sessions.get(reviewer) is not None
    assert sessions.get(second) is not None


def test_a_revoked_keys_sessions_and_expired_ones_are_dropped_first(
    keys: ApiKeys, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the cap, a login drops a revoked key's sessions and expired ones before any other."""
    monkeypatch.setattr(desk_sessions, "MAX_SESSIONS", 20)
    early = keys.create(tenant_id="acme", actor_id="early", roles=["approver"])
    agent = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    sessions = Sessions(keys, clock=clock)
    old, _ = sessions.login(early.token)
    clock.advance(desk_sessions.SESSION_LIFETIME - timedelta(minutes=1))
    for _ in range(MAX_SESSIONS_PER_KEY):
        sessions.login(agent.token)
    other = keys.create(tenant_id="acme", actor_id="agent-8", roles=["agent"])
    kept = [sessions.login(other.token)[0] for _ in range(3)]
    assert sessions.count() == 20
    keys.revoke(agent.key.key_id)
    clock.advance(timedelta(minutes=2))  # the early session has expired
    rita = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"])
    sessions.login(rita.token)
    assert sessions.count(agent.key.key_id) == 0
    assert sessions.count(early.key.key_id) == 0
    assert sessions.get(old) is None
    assert all(sessions.get(one) is not None for one in kept)


def test_sixteen_threads_logging_in_with_one_key_keep_it_within_its_share(
    keys: ApiKeys, clock: ManualClock
) -> None:
    """Racing logins of one key never leave it more than its share, nor lose a reviewer's."""
    agent = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    rita = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"])
    sessions = Sessions(keys, clock=clock)
    reviewer, _ = sessions.login(rita.token)
    barrier = threading.Barrier(16)

    def spray() -> None:
        barrier.wait()
        for _ in range(10):
            sessions.login(agent.token)

    threads = [threading.Thread(target=spray) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sessions.count(agent.key.key_id) == MAX_SESSIONS_PER_KEY
    assert sessions.get(reviewer) is not None


def test_a_session_lasts_its_lifetime_at_most(keys: ApiKeys, clock: ManualClock) -> None:
    """The bounds change nothing else: a session ends after its lifetime."""
    rita = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"])
    sessions = Sessions(keys, clock=clock)
    one, _ = sessions.login(rita.token)
    clock.advance(desk_sessions.SESSION_LIFETIME)
    assert sessions.get(one) is None
