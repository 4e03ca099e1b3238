"""Single sign-on for the desk: OpenID Connect, the authorization code flow with PKCE.

The desk sends a person to the identity provider with a fresh ``state``, ``nonce`` and PKCE
verifier (kept here, in this process's memory, for ten minutes and used once; the ``state`` also
sits in a cookie of the person's browser, so a callback started elsewhere is refused). On the
way back it exchanges the code at the provider's token endpoint with the client secret and the
verifier (Authlib's client), and checks the ID token against the provider's published keys
(joserfc): the signature, the issuer, the audience (this client), the nonce, the expiry and
``sub``. The person's tenant, actor and roles come from configured claims: a tenant this desk
does not serve, no role, or an identifier the ledger cannot hold is refused with a clear page
and no session. The provider's discovery document must name the configured issuer.

Requires the ``sso`` extra (Authlib, with joserfc, and httpx).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from effectledger.errors import InvalidInput, NotAuthenticated
from effectledger.model import Context
from effectledger.model.operations import validate_identifier

__all__ = ["OpenIdLogin", "SsoSettings"]

PENDING_LIFETIME_S = 600
"""How long a started login may take to come back from the provider."""
MAX_PENDING = 10_000
"""Logins started and not finished that the desk keeps at most (the oldest are dropped)."""
ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
"""ID token signature algorithms accepted (never ``none``, never a shared-secret HMAC)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SsoSettings:
    """The desk's OpenID Connect client: the provider, the client and how claims map.

    ``tenants`` are the tenants this desk serves: the ``tenant_claim`` of a person must name one.
    ``roles_claim`` holds the person's roles (a list, or text separated by spaces), used as the
    ledger's roles, or, with ``role_map``, the provider's group names mapped to ledger roles
    (groups the map does not name grant nothing); ``actor_claim`` names the actor (``sub`` by
    default, or ``email``).
    """

    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    tenants: frozenset[str]
    tenant_claim: str = "tenant"
    roles_claim: str = "roles"
    actor_claim: str = "sub"
    scopes: tuple[str, ...] = ("openid",)
    role_map: Mapping[str, str] | None = None
    leeway_s: int = 60
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.issuer)
        loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise InvalidInput("the SSO issuer must be an https URL", field="sso_issuer")
        if not self.client_id or not self.client_secret:
            raise InvalidInput("SSO needs a client id and a client secret", field="sso_client_id")
        tenants = frozenset(self.tenants)
        if not tenants:
            raise InvalidInput("name the tenants this desk serves", field="sso_tenants")
        for tenant in tenants:
            validate_identifier(tenant, "sso_tenants")
        object.__setattr__(self, "tenants", tenants)
        if self.role_map is not None:
            for role in self.role_map.values():
                validate_identifier(role, "sso_role_map")
            object.__setattr__(self, "role_map", dict(self.role_map))
        if "openid" not in self.scopes:
            object.__setattr__(self, "scopes", ("openid", *self.scopes))


@dataclass(frozen=True, slots=True)
class _Pending:
    nonce: str
    verifier: str
    redirect_uri: str
    expires: float


def _refused(message: str, reason: str) -> NotAuthenticated:
    return NotAuthenticated(message, reason=reason)


class OpenIdLogin:
    """Starts and finishes logins at one identity provider (see the module docstring)."""

    def __init__(self, settings: SsoSettings, *, now: Any = time.time) -> None:
        self.settings = settings
        self._now = now
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None

    # -- the provider --------------------------------------------------------------------

    def _get(self, url: str) -> Any:
        import httpx

        try:
            response = httpx.get(url, timeout=self.settings.timeout_s)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise _refused(
                f"the identity provider did not answer at {url} ({type(exc).__name__})",
                "sso_provider_unreachable",
            ) from None

    def metadata(self) -> dict[str, Any]:
        """The provider's discovery document; its ``issuer`` must be the configured one."""
        if self._metadata is None:
            issuer = self.settings.issuer.rstrip("/")
            document = self._get(f"{issuer}/.well-known/openid-configuration")
            if not isinstance(document, dict) or document.get("issuer") != self.settings.issuer:
                named = document.get("issuer") if isinstance(document, dict) else None
                raise _refused(
                    f"the identity provider at {issuer} names its issuer {named!r}, not the "
                    f"configured {self.settings.issuer!r}: check the desk's SSO issuer",
                    "sso_issuer_mismatch",
                )
            self._metadata = document
        return self._metadata

    # -- a login -------------------------------------------------------------------------

    def start(self, redirect_uri: str) -> tuple[str, str]:
        """The provider's authorization URL for a new login, and its ``state`` (for a cookie)."""
        from authlib.integrations.httpx_client import OAuth2Client

        endpoint = self.metadata()["authorization_endpoint"]
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        client = OAuth2Client(
            self.settings.client_id,
            scope=" ".join(self.settings.scopes),
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
        )
        url, _ = client.create_authorization_url(
            endpoint, state=state, nonce=nonce, code_verifier=verifier
        )
        now = self._now()
        with self._lock:
            self._pending = {s: p for s, p in self._pending.items() if p.expires > now}
            while len(self._pending) >= MAX_PENDING:
                del self._pending[next(iter(self._pending))]
            self._pending[state] = _Pending(nonce, verifier, redirect_uri, now + PENDING_LIFETIME_S)
        return url, state

    def finish(self, *, state: str, cookie_state: str | None, code: str | None) -> Context:
        """The person the provider vouched for, as a ledger context; ``NotAuthenticated`` with
        a stable reason for anything else (nothing is kept of a refused login)."""
        return self.finish_login(state=state, cookie_state=cookie_state, code=code)[0]

    def finish_login(
        self, *, state: str, cookie_state: str | None, code: str | None
    ) -> tuple[Context, str]:
        """:meth:`finish`, with the checked ID token (the hint a later logout gives)."""
        if not cookie_state or not secrets.compare_digest(state, cookie_state):
            raise _refused(
                "this sign-in did not start in this browser: start it again from the desk",
                "sso_state_mismatch",
            )
        with self._lock:
            pending = self._pending.pop(state, None)
        if pending is None or pending.expires <= self._now():
            raise _refused(
                "this sign-in is unknown, used already or too old: start it again",
                "sso_state_unknown",
            )
        if not code:
            raise _refused("the identity provider sent no code back", "sso_no_code")
        id_token = self._exchange(code, pending)
        return self._context(self._claims(id_token, pending)), id_token

    def logout_url(self, id_token: str, after: str) -> str | None:
        """Where to send a signed-in person so the provider ends its own session too (OpenID
        Connect RP-initiated logout), coming back to ``after``; ``None`` when the provider
        publishes no ``end_session_endpoint`` (or does not answer): the desk's own logout
        then stands alone."""
        from urllib.parse import urlencode

        try:
            endpoint = self.metadata().get("end_session_endpoint")
        except NotAuthenticated:
            return None
        if not isinstance(endpoint, str) or urlsplit(endpoint).scheme not in ("https", "http"):
            return None
        query = urlencode(
            {
                "id_token_hint": id_token,
                "post_logout_redirect_uri": after,
                "client_id": self.settings.client_id,
            }
        )
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    def _exchange(self, code: str, pending: _Pending) -> str:
        from authlib.integrations.base_client import OAuthError
        from authlib.integrations.httpx_client import OAuth2Client

        with OAuth2Client(
            self.settings.client_id,
            self.settings.client_secret,
            redirect_uri=pending.redirect_uri,
            timeout=self.settings.timeout_s,
        ) as client:
            try:
                token = client.fetch_token(
                    self.metadata()["token_endpoint"],
                    code=code,
                    code_verifier=pending.verifier,
                    grant_type="authorization_code",
                )
            except OAuthError as exc:
                raise _refused(
                    f"the identity provider refused the code ({exc.error})", "sso_code_refused"
                ) from None
            except Exception as exc:  # the transport's errors, whatever the client raises
                raise _refused(
                    f"the identity provider's token endpoint failed ({type(exc).__name__})",
                    "sso_provider_unreachable",
                ) from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise _refused("the identity provider sent no ID token", "sso_invalid_token")
        return id_token

    def _claims(self, id_token: str, pending: _Pending) -> dict[str, Any]:
        from joserfc import errors, jwt
        from joserfc.jwk import KeySet

        keys = KeySet.import_key_set(self._get(self.metadata()["jwks_uri"]))
        try:
            token = jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
            jwt.JWTClaimsRegistry(
                now=int(self._now()),
                leeway=self.settings.leeway_s,
                iss={"essential": True, "value": self.settings.issuer},
                aud={"essential": True, "value": self.settings.client_id},
                nonce={"essential": True, "value": pending.nonce},
                exp={"essential": True},
                sub={"essential": True},
            ).validate(token.claims)
        except errors.ExpiredTokenError:
            raise _refused("the ID token has expired", "sso_token_expired") from None
        except errors.InvalidClaimError as exc:
            raise _refused(
                f"the ID token's {exc.claim} is not this desk's",
                f"sso_{exc.claim}_mismatch"
                if exc.claim in ("iss", "aud", "nonce")
                else "sso_invalid_token",
            ) from None
        except errors.JoseError as exc:
            raise _refused(
                f"the ID token does not verify ({exc.error})", "sso_invalid_token"
            ) from None
        return dict(token.claims)

    def _context(self, claims: dict[str, Any]) -> Context:
        settings = self.settings
        tenant = claims.get(settings.tenant_claim)
        if not isinstance(tenant, str) or tenant not in settings.tenants:
            raise _refused(
                f"your identity provider names no tenant this desk serves "
                f"({settings.tenant_claim}: {tenant!r})",
                "sso_tenant_not_served",
            )
        raw = claims.get(settings.roles_claim)
        roles = raw.split() if isinstance(raw, str) and settings.role_map is None else raw
        if isinstance(raw, str) and settings.role_map is not None:
            roles = [raw]  # one group name, spaces and all
        if isinstance(roles, list) and settings.role_map is not None:
            mapped = settings.role_map
            roles = sorted(
                {mapped[group] for group in roles if isinstance(group, str) and group in mapped}
            )
        if not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles):
            raise _refused(
                f"your identity provider gives you no role on this desk ({settings.roles_claim})",
                "sso_no_roles",
            )
        actor = claims.get(settings.actor_claim)
        try:
            validate_identifier(actor, "actor_id")
            for role in roles:
                validate_identifier(role, "role")
        except InvalidInput:
            raise _refused(
                f"your identity's {settings.actor_claim} or roles are not ids the ledger can "
                "record (1-128 characters of letters, digits and . _ : @ / -)",
                "sso_bad_identity",
            ) from None
        return Context(tenant_id=tenant, actor_id=str(actor), roles=frozenset(roles))

    def subject_key(self, context: Context) -> str:
        """The session key of a signed-in person: bounded like an API key's sessions."""
        who = f"{self.settings.issuer}\n{context.tenant_id}\n{context.actor_id}"
        return "sso:" + hashlib.sha256(who.encode()).hexdigest()[:12]
