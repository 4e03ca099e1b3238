"""People's sessions on the desk, on top of the API keys and their roles.

A person logs in with their API key once; the desk keeps, in this process's memory, a session
named by a random 256-bit id (only its SHA-256 is kept) that stands for that key, with its own
CSRF token. Every request re-reads the key, so a revoked key ends its sessions at once, and a
session lasts at most :data:`SESSION_LIFETIME`. The token itself is never stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from effectledger.app.keys import ApiKeys
from effectledger.clock import Clock, SystemClock
from effectledger.errors import NotAuthenticated, NotFound
from effectledger.model import Context

__all__ = ["SESSION_LIFETIME", "Session", "Sessions"]

SESSION_LIFETIME = timedelta(hours=8)
MAX_SESSIONS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """One person's login: the key it stands for, its CSRF token and its end."""

    key_id: str
    context: Context
    csrf: str
    expires_at: datetime

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

        :class:`NotAuthenticated` for a missing, unknown or revoked key.
        """
        context = self.keys.authenticate(token)
        session_id = secrets.token_urlsafe(32)
        session = Session(
            key_id=token[4:20],  # elk_<key id>_<secret>: authenticate checked the shape
            context=context,
            csrf=secrets.token_urlsafe(32),
            expires_at=self.clock.now() + SESSION_LIFETIME,
        )
        now = self.clock.now()
        with self._lock:
            if len(self._live) >= MAX_SESSIONS:
                self._live = {k: s for k, s in self._live.items() if s.expires_at > now}
            if len(self._live) >= MAX_SESSIONS:
                raise NotAuthenticated("too many live sessions", reason="too_many_sessions")
            self._live[_digest(session_id)] = session
        return session_id, session

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
        try:
            return self.keys.get(key_id).revoked_at is None
        except NotFound:
            return False
