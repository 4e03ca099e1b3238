"""API keys: shown once, stored as a hash, mapped to a fixed identity, revocable once."""

from __future__ import annotations

import multiprocessing
import re
import threading
from datetime import timedelta
from typing import Any

import pytest

from effectledger import ManualClock
from effectledger.app.keys import ApiKeys, hash_token
from effectledger.errors import InvalidInput, NotAuthenticated, NotFound
from effectledger.store import Store, open_store
from tests.conftest import RAW_REFUSED, raw_sql


@pytest.fixture
def keys(store: Store, clock: ManualClock) -> ApiKeys:
    """API keys kept in the test's ledger store."""
    return ApiKeys(store, clock=clock)


def test_a_key_maps_to_its_identity_and_only_its_hash_is_stored(
    keys: ApiKeys, store_url: str
) -> None:
    """The token authenticates as tenant, actor and roles; the database holds only its SHA-256."""
    issued = keys.create(tenant_id="acme", actor_id="rita", roles=["approver", "auditor"])
    context = keys.authenticate(issued.token)
    assert (context.tenant_id, context.actor_id, context.roles) == (
        "acme",
        "rita",
        frozenset({"approver", "auditor"}),
    )
    rows = raw_sql(store_url, "SELECT * FROM api_keys")
    assert len(rows) == 1
    # The documented format, elk_<16 hex key id>_<43-character secret>: the secret may hold "_".
    parsed = re.fullmatch(r"elk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})", issued.token)
    assert parsed is not None, issued.token
    secret = parsed.group(2)
    assert not any(secret in str(value) or issued.token == value for value in rows[0])
    assert hash_token(issued.token) in rows[0]
    listed = keys.list(tenant_id="acme")
    assert [key.to_dict() for key in listed] == [issued.key.to_dict()]
    assert secret not in repr(listed)


def test_wrong_and_malformed_tokens_are_refused(keys: ApiKeys) -> None:
    """Tokens that are missing, malformed, unknown or carry the wrong secret do not authenticate."""
    issued = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    key_id = issued.key.key_id
    for token, reason in [
        (None, "missing_credentials"),
        ("", "missing_credentials"),
        ("elk_short", "invalid_credentials"),
        (f"elk_{key_id}_" + "A" * 43, "invalid_credentials"),
        (issued.token + "x", "invalid_credentials"),
        ("elk_ffffffffffffffff_" + issued.token[-43:], "invalid_credentials"),
    ]:
        with pytest.raises(NotAuthenticated) as refused:
            keys.authenticate(token)
        assert refused.value.details["reason"] == reason


def test_a_known_and_an_unknown_key_id_cost_the_same_work(
    keys: ApiKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong secret under a known key id and any secret under an unknown id each hash the
    token once and compare two digests once, so timing cannot tell which key ids exist."""
    import hmac

    from effectledger.app import keys as module

    issued = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    work: list[str] = []
    monkeypatch.setattr(
        module, "hash_token", lambda token: work.append("hash") or hash_token(token)
    )
    real = hmac.compare_digest
    monkeypatch.setattr(
        module.hmac, "compare_digest", lambda a, b: work.append("compare") or real(a, b)
    )
    done = []
    for token in (f"elk_{issued.key.key_id}_" + "A" * 43, "elk_ffffffffffffffff_" + "A" * 43):
        work.clear()
        with pytest.raises(NotAuthenticated):
            keys.authenticate(token)
        done.append(list(work))
    assert done == [["hash", "compare"], ["hash", "compare"]]


def test_revocation_is_immediate_and_happens_once(keys: ApiKeys, clock: ManualClock) -> None:
    """A revoked key stops authenticating; revoking again keeps the first revocation time."""
    issued = keys.create(tenant_id="acme", actor_id="agent-7")
    first = keys.revoke(issued.key.key_id)
    clock.advance(timedelta(minutes=5))
    again = keys.revoke(issued.key.key_id)
    assert first.revoked_at is not None
    assert again.revoked_at == first.revoked_at
    with pytest.raises(NotAuthenticated) as refused:
        keys.authenticate(issued.token)
    assert refused.value.details["reason"] == "revoked_credentials"
    with pytest.raises(NotFound):
        keys.revoke("0123456789abcdef")


def test_the_database_refuses_to_change_a_keys_identity(keys: ApiKeys, store_url: str) -> None:
    """An out-of-band edit of a key's tenant, actor, roles or hash, or an un-revoke, is refused."""
    issued = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"])
    key_id = issued.key.key_id
    for change in (
        "tenant_id = 'globex'",
        "actor_id = 'rita'",
        "roles_json = '[\"approver\"]'",
        "secret_hash = 'x'",
    ):
        with pytest.raises(RAW_REFUSED):
            raw_sql(store_url, f"UPDATE api_keys SET {change} WHERE key_id = '{key_id}'")
    keys.revoke(key_id)
    with pytest.raises(RAW_REFUSED):
        raw_sql(store_url, f"UPDATE api_keys SET revoked_us = NULL WHERE key_id = '{key_id}'")
    with pytest.raises(NotAuthenticated):
        keys.authenticate(issued.token)


def test_bad_key_input_is_refused(keys: ApiKeys, store_url: str) -> None:
    """Malformed tenants, actors, roles and limits are refused and no key is written."""
    for tenant, actor, roles in [
        ("", "a", []),
        ("acme", "bad actor", []),
        ("acme", "a", "approver"),
        ("acme", "a", ["ok", "not ok"]),
        ("acme", "a", [f"r{i}" for i in range(40)]),
    ]:
        with pytest.raises(InvalidInput):
            keys.create(tenant_id=tenant, actor_id=actor, roles=roles)
    with pytest.raises(InvalidInput):
        keys.list(limit=0)
    assert raw_sql(store_url, "SELECT count(*) FROM api_keys") == [(0,)]


def test_sixteen_threads_revoking_one_key_revoke_it_once(keys: ApiKeys, store_url: str) -> None:
    """Concurrent revocations agree on one revocation time and leave one revoked row."""
    issued = keys.create(tenant_id="acme", actor_id="agent-7")
    barrier = threading.Barrier(16)
    seen: list[Any] = []

    def revoke() -> None:
        barrier.wait()
        seen.append(keys.revoke(issued.key.key_id).revoked_at)

    threads = [threading.Thread(target=revoke) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 16
    assert len(set(seen)) == 1
    assert raw_sql(store_url, "SELECT count(*) FROM api_keys WHERE revoked_us IS NOT NULL") == [
        (1,)
    ]


def _revoke_in_process(store_url: str, key_id: str, barrier: Any, results: Any) -> None:
    store = open_store(store_url)
    try:
        barrier.wait()
        revoked = ApiKeys(store).revoke(key_id).revoked_at
        results.put(None if revoked is None else revoked.isoformat())
    finally:
        store.close()


@pytest.mark.slow
def test_four_processes_revoking_one_key_revoke_it_once(keys: ApiKeys, store_url: str) -> None:
    """Separate processes revoking one key agree on its first revocation time."""
    issued = keys.create(tenant_id="acme", actor_id="agent-7")
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(4), spawn.Queue()
    workers = [
        spawn.Process(
            target=_revoke_in_process, args=(store_url, issued.key.key_id, barrier, results)
        )
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    seen = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert len(set(seen)) == 1
    assert seen[0] is not None
    assert raw_sql(store_url, "SELECT count(*) FROM api_keys WHERE revoked_us IS NOT NULL") == [
        (1,)
    ]
