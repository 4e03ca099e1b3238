"""API keys: the HTTP API's credentials, each mapped to one tenant, actor and set of roles.

A key is a token ``elk_<key id>_<secret>``: the 16-hex-digit key id is public (it finds the row
and names the key in lists and logs); the secret is 256 bits from :mod:`secrets`. The ledger
database keeps only the SHA-256 of the whole token, so a copy of the database (or a backup, or a
log of its rows) does not let anyone call the API. A fast hash is right here and a slow password
hash is not: slow hashes exist to protect guessable human passwords, while a 256-bit random secret
cannot be guessed at any hashing speed, and a fast hash keeps the per-request check at one indexed
read and one digest.

The token is returned once, by :meth:`ApiKeys.create`; it cannot be read back. A key's identity
never changes (the database refuses it); it can be revoked, once, and a revoked key stops
authenticating on the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from effectledger.clock import Clock, SystemClock
from effectledger.errors import InvalidInput, NotAuthenticated, NotFound
from effectledger.ledger.stored import optional_time
from effectledger.model.operations import (
    Context,
    Row,
    from_micros,
    to_micros,
    validate_identifier,
)
from effectledger.store import Store

__all__ = ["ApiKey", "ApiKeys", "IssuedKey", "hash_token"]

TOKEN_PREFIX = "elk_"
_TOKEN = re.compile(r"elk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
MAX_ROLES = 32
MAX_LISTED = 10_000


_NO_KEY = "0" * 64
"""Compared against when no key has the id: a SHA-256 hex digest no token is known to have."""


def hash_token(token: str) -> str:
    """The stored form of a token: the hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """One key as listed: who it stands for and whether it still works. Never the secret."""

    key_id: str
    tenant_id: str
    actor_id: str
    roles: frozenset[str]
    created_at: datetime
    revoked_at: datetime | None

    @property
    def context(self) -> Context:
        """The trusted context a request authenticated with this key runs under."""
        return Context(tenant_id=self.tenant_id, actor_id=self.actor_id, roles=self.roles)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, without any secret."""
        return {
            "key_id": self.key_id,
            "tenant_id": self.tenant_id,
            "actor_id": self.actor_id,
            "roles": sorted(self.roles),
            "created_at": self.created_at.isoformat(),
            "revoked_at": None if self.revoked_at is None else self.revoked_at.isoformat(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuedKey:
    """A newly created key and its token: show the token once, then forget it."""

    key: ApiKey
    token: str


def _key_from_row(row: Row) -> ApiKey:
    return ApiKey(
        key_id=row["key_id"],
        tenant_id=row["tenant_id"],
        actor_id=row["actor_id"],
        roles=frozenset(json.loads(row["roles_json"])),
        created_at=from_micros(int(row["created_us"])),
        revoked_at=optional_time(row["revoked_us"]),
    )


def _roles(roles: Iterable[str]) -> frozenset[str]:
    if isinstance(roles, str):
        raise InvalidInput("roles must be a collection of role names, not one string")
    checked = frozenset(validate_identifier(role, "role") for role in roles)
    if len(checked) > MAX_ROLES:
        raise InvalidInput(f"a key holds at most {MAX_ROLES} roles", field="roles")
    return checked


class ApiKeys:
    """Create, revoke, list and check API keys kept in the ledger database."""

    def __init__(self, store: Store, *, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or SystemClock()

    def create(self, *, tenant_id: str, actor_id: str, roles: Iterable[str] = ()) -> IssuedKey:
        """Create a key for ``actor_id`` of ``tenant_id`` with ``roles``; return it with its token.

        The token is in the result only: the database keeps its SHA-256.
        """
        context = Context(tenant_id=tenant_id, actor_id=actor_id, roles=_roles(roles))
        key_id = secrets.token_hex(8)
        token = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now_us = to_micros(self.clock.now())
        row = {
            "key_id": key_id,
            "secret_hash": hash_token(token),
            "tenant_id": context.tenant_id,
            "actor_id": context.actor_id,
            "roles_json": json.dumps(sorted(context.roles)),
            "now_us": now_us,
        }
        self.store.write(lambda tx: tx.run("api_key_insert", row), label="api_key_create")
        key = ApiKey(
            key_id=key_id,
            tenant_id=context.tenant_id,
            actor_id=context.actor_id,
            roles=context.roles,
            created_at=from_micros(now_us),
            revoked_at=None,
        )
        return IssuedKey(key=key, token=token)

    def get(self, key_id: str) -> ApiKey:
        """The key named ``key_id`` (:class:`NotFound` if there is none)."""
        validate_identifier(key_id, "key_id")
        row = self.store.one("api_key_get", {"key_id": key_id})
        if row is None:
            raise NotFound(f"no API key {key_id}", key_id=key_id)
        return _key_from_row(row)

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke the key; revoking it again keeps the first revocation. Returns the key."""
        validate_identifier(key_id, "key_id")
        now_us = to_micros(self.clock.now())
        self.store.write(
            lambda tx: tx.run("api_key_revoke", {"key_id": key_id, "now_us": now_us}),
            label="api_key_revoke",
        )
        return self.get(key_id)

    def list(self, *, tenant_id: str | None = None, limit: int = 1000) -> list[ApiKey]:
        """Keys, oldest first, optionally of one tenant; never their secrets."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_LISTED:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_LISTED}", field="limit")
        if tenant_id is None:
            rows = self.store.read(lambda tx: tx.all("api_keys_list", {"limit": limit}))
        else:
            params = {"tenant_id": validate_identifier(tenant_id, "tenant_id"), "limit": limit}
            rows = self.store.read(lambda tx: tx.all("api_keys_list_tenant", params))
        return [_key_from_row(row) for row in rows]

    def authenticate(self, token: str | None) -> Context:
        """The trusted context of a live key's token, or :class:`NotAuthenticated`.

        One indexed read; the comparison of digests takes the same time wherever they differ.
        """
        if not token:
            raise NotAuthenticated(
                "no credentials: send Authorization: Bearer <API key>", reason="missing_credentials"
            )
        match = _TOKEN.fullmatch(token)
        row = None if match is None else self.store.one("api_key_get", {"key_id": match[1]})
        # The same work whether or not the key id is known: hash, then compare with the row's
        # digest or with one no token has, so timing does not tell which key ids exist.
        stored = _NO_KEY if row is None else str(row["secret_hash"])
        if not hmac.compare_digest(stored, hash_token(token)) or row is None:
            raise NotAuthenticated("the API key is not valid", reason="invalid_credentials")
        if row["revoked_us"] is not None:
            raise NotAuthenticated("the API key was revoked", reason="revoked_credentials")
        return _key_from_row(row).context
