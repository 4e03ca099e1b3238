"""People's sessions on the desk, on top of the API keys and their roles.

A person logs in with their API key once; the desk keeps, in this process's memory, a session
named by a random 256-bit id (only its SHA-256 is kept) that stands for that key, with its own
CSRF token. Every request re-reads the key, so a revoked key ends its sessions at once, and a
session lasts at most :data:`SESSION_LIFETIME`. The token itself is never stored.

Sessions are bounded so that no key can lock the others out: one key holds at most
:data:`MAX_SESSIONS_PER_KEY` (its oldest is ended by a new login), and when the desk holds
:data:`MAX_SESSIONS` a login first drops the expired sessions and those of revoked keys, then
ends the oldest session of the key that holds the most. A person logging in always gets a
session; a key spraying logins only ever ends its own, until it holds no more than anyone else.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from effectledger.app.keys import ApiKeys
from effectledger.clock import Clock, SystemClock
from effectledger.errors import NotFound
from effectledger.model import Context

__all__ = ["MAX_SESSIONS", "MAX_SESSIONS_PER_KEY", "SESSION_LIFETIME", "Session", "Sessions"]

SESSION_LIFETIME = timedelta(hours=8)
MAX_SESSIONS = 10_000
"""Sessions the desk keeps at most, across every key."""
MAX_SESSIONS_PER_KEY = 16
"""Sessions one key keeps at most: a person's browsers and devices, not a flood."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """One person's login: the key it stands for, its CSRF token and its end."""

    key_id: str
    context: Context
    csrf: str
    expires_at: datetime
    id_token: str | None = field(default=None, repr=False)
    """A signed-in person's ID token, the hint their provider's logout asks for (kept in this
    process's memory only, never stored or shown)."""

    def csrf_matches(self, presented: str | None) -> bool:
        """True when ``presented`` is this session's CSRF token (compared in constant time)."""
        return isinstance(presented, str) and hmac.compare_digest(presented, self.csrf)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """The desk's live sessions, by the digest of their ids."""

    def __init__(self, keys: ApiKeys, *, clock: Clock | None = None) -> None:
        self.keys = keys
        self.clock = clock or SystemClock()
        self._live: dict[str, Session] = {}
        self._lock = threading.Lock()

    def login(self, token: str) -> tuple[str, Session]:
        """A new session for a live key's ``token``: its id (for the cookie) and the session.

        :class:`~effectledger.errors.NotAuthenticated` for a missing, unknown or revoked key.
        """
        context = self.keys.authenticate(token)
        # elk_<key id>_<secret>: authenticate checked the shape
        return self.open(context, token[4:20])

    def open(
        self, context: Context, key_id: str, *, id_token: str | None = None
    ) -> tuple[str, Session]:
        """A new session for ``context``, counted against ``key_id``'s share: an API key's id,
        or a signed-in person's ``sso:`` key (which no key revocation ends) with the
        ``id_token`` their provider issued."""
        session_id = secrets.token_urlsafe(32)
        session = Session(
            key_id=key_id,
            context=context,
            csrf=secrets.token_urlsafe(32),
            expires_at=self.clock.now() + SESSION_LIFETIME,
            id_token=id_token,
        )
        with self._lock:
            full = len(self._live) >= MAX_SESSIONS
        if full:
            self._prune()  # outside the lock: it reads each key's row
        with self._lock:
            own = [k for k, live in self._live.items() if live.key_id == session.key_id]
            for digest in own[: max(len(own) - MAX_SESSIONS_PER_KEY + 1, 0)]:
                del self._live[digest]  # insertion order: the key's oldest first
            while len(self._live) >= MAX_SESSIONS:
                self._evict_from_the_largest()
            self._live[_digest(session_id)] = session
        return session_id, session

    def count(self, key_id: str | None = None) -> int:
        """Live sessions held (by ``key_id``, or by every key), expired ones included until
        they are dropped."""
        with self._lock:
            return sum(1 for s in self._live.values() if key_id is None or s.key_id == key_id)

    def _prune(self) -> None:
        """Drop expired sessions and those of keys revoked (or deleted) since they logged in."""
        now = self.clock.now()
        with self._lock:
            keys = {session.key_id for session in self._live.values()}
        revoked = {key_id for key_id in keys if not self._key_is_live(key_id)}
        with self._lock:
            self._live = {
                digest: session
                for digest, session in self._live.items()
                if session.expires_at > now and session.key_id not in revoked
            }

    def _evict_from_the_largest(self) -> None:
        """End the oldest session of the key that holds the most (call with the lock held)."""
        held: dict[str, int] = {}
        for session in self._live.values():
            held[session.key_id] = held.get(session.key_id, 0) + 1
        largest = max(held, key=held.__getitem__)
        oldest = next(d for d, session in self._live.items() if session.key_id == largest)
        del self._live[oldest]

    def get(self, session_id: str | None) -> Session | None:
        """The live session named ``session_id``, or ``None`` (ended, expired or revoked key)."""
        if not session_id:
            return None
        key = _digest(session_id)
        with self._lock:
            session = self._live.get(key)
        if session is None:
            return None
        if session.expires_at <= self.clock.now() or not self._key_is_live(session.key_id):
            self.logout(session_id)
            return None
        return session

    def logout(self, session_id: str | None) -> None:
        """End the session named ``session_id`` (nothing if there is none)."""
        if session_id:
            with self._lock:
                self._live.pop(_digest(session_id), None)

    def _key_is_live(self, key_id: str) -> bool:
        if key_id.startswith("sso:"):
            return True  # the identity provider vouched for the person; the session's end bounds it
        try:
            return self.keys.get(key_id).revoked_at is None
        except NotFound:
            return False
