"""Evidence blobs: the destination's own answer that justified an outcome, kept and protected.

A destination adapter turns the response (or lookup answer) it classified into an
:class:`Evidence` with :func:`capture`: configured headers and JSON fields are redacted first,
then the document is encoded once, bounded to :data:`MAX_EVIDENCE_BYTES` and hashed. The adapter
puts it on its :class:`~effectledger.model.Observation`; :meth:`~effectledger.ledger.Ledger.record`
stores it (:mod:`effectledger.ledger.evidence`) in the
same transaction as the event, and the event's
evidence reference names it (``evidence_blobs/sha256:<hex>``). Blobs are content-addressed within
a tenant and append-only (the database refuses UPDATE and DELETE).

What never goes in: credentials (``Authorization``, cookies and API-key headers and
authorization-like body keys are redacted by default; a
:class:`~effectledger.destinations.http.HttpDestination` never copies its request headers, and
every credential value it sent is scrubbed wherever an answer echoes it) and raw exception text
(a transport failure is recorded by its class name only). A secret the destination transforms
before echoing it (encodes, splits, hashes) cannot be recognised and is not scrubbed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from effectledger.errors import InvalidInput

__all__ = [
    "DEFAULT_REDACTED_FIELDS",
    "DEFAULT_REDACTED_HEADERS",
    "EVIDENCE_REFERENCE",
    "MAX_EVIDENCE_BYTES",
    "REDACTED",
    "Evidence",
    "EvidencePolicy",
    "capture",
    "redact_fields",
    "redact_headers",
    "scrub",
]

MAX_EVIDENCE_BYTES = 64 * 1024
"""The largest blob the table accepts (its CHECK constraint says the same)."""

REDACTED = "[redacted]"
"""What a redacted header or field value is replaced with."""

DEFAULT_REDACTED_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
    }
)
"""Header names (lower case) that are redacted unless a policy says otherwise."""

DEFAULT_REDACTED_FIELDS = DEFAULT_REDACTED_HEADERS | frozenset(
    {
        "api_key",
        "apikey",
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "password",
        "secret",
        "token",
    }
)
"""JSON object keys (compared in lower case) redacted in a body unless a policy says otherwise."""

_PREFIX = "evidence_blobs/sha256:"
EVIDENCE_REFERENCE = re.compile(r"evidence_blobs/sha256:([0-9a-f]{64})")


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidencePolicy:
    """What is removed from an answer before it is kept, and how much of it is kept.

    ``redact_headers``: header names, compared case-insensitively. ``redact_fields``: JSON object
    keys redacted wherever they occur in a body, compared case-insensitively (default:
    :data:`DEFAULT_REDACTED_FIELDS`). ``max_bytes``: a larger document keeps only the size and
    SHA-256 of its body.
    """

    redact_headers: frozenset[str] = DEFAULT_REDACTED_HEADERS
    redact_fields: frozenset[str] = DEFAULT_REDACTED_FIELDS
    max_bytes: int = MAX_EVIDENCE_BYTES

    def __post_init__(self) -> None:
        if not 256 <= self.max_bytes <= MAX_EVIDENCE_BYTES:
            raise InvalidInput(
                f"max_bytes must be between 256 and {MAX_EVIDENCE_BYTES}", field="max_bytes"
            )
        object.__setattr__(
            self, "redact_headers", frozenset(name.lower() for name in self.redact_headers)
        )
        object.__setattr__(
            self, "redact_fields", frozenset(name.lower() for name in self.redact_fields)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """Redacted, bounded bytes of one answer; ``reference`` is what audit events carry."""

    content: bytes
    media_type: str = "application/json"
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if len(self.content) > MAX_EVIDENCE_BYTES:
            raise InvalidInput(
                f"evidence is limited to {MAX_EVIDENCE_BYTES} bytes", field="evidence"
            )
        object.__setattr__(self, "sha256", hashlib.sha256(self.content).hexdigest())

    @property
    def reference(self) -> str:
        """Where the blob is kept and its hash: ``evidence_blobs/sha256:<hex>``."""
        return _PREFIX + self.sha256

    def document(self) -> Any:
        """The decoded JSON document (evidence is always captured as JSON)."""
        return json.loads(self.content)


def redact_headers(headers: Iterable[tuple[str, str]], names: frozenset[str]) -> dict[str, str]:
    """``headers`` as a dict with lower-case names, the values of ``names`` replaced."""
    kept: dict[str, str] = {}
    for name, value in headers:
        lowered = name.lower()
        shown = REDACTED if lowered in names else value
        kept[lowered] = f"{kept[lowered]}, {shown}" if lowered in kept else shown
    return kept


def redact_fields(value: Any, names: frozenset[str]) -> Any:
    """A copy of the JSON value ``value`` with every object key in ``names`` (lower case)
    redacted, keys compared case-insensitively."""
    if isinstance(value, Mapping):
        return {
            str(key): REDACTED if str(key).lower() in names else redact_fields(item, names)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_fields(item, names) for item in value]
    return value


def scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    """A copy of the JSON value ``value`` with every occurrence of each of ``secrets`` (longest
    first) replaced by :data:`REDACTED`, in strings and object keys alike."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {scrub(str(key), secrets): scrub(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item, secrets) for item in value]
    return value


def _encode(document: Mapping[str, Any]) -> bytes:
    # Sorted keys and fixed separators: the same answer always hashes the same. (Not the
    # canonical command encoding: a destination's body may carry floats.)
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode("utf-8")


def capture(
    document: Mapping[str, Any],
    policy: EvidencePolicy,
    *,
    headers: Iterable[tuple[str, str]] = (),
    body: Any = None,
    scrub: tuple[str, ...] = (),
) -> Evidence:
    """Evidence of one answer: ``document`` plus redacted ``headers`` and ``body``.

    Every occurrence of a value in ``scrub`` (the credentials that were sent) is removed from
    headers and body. Redaction happens before encoding and hashing, so a secret never reaches
    the hash either. If
    the encoded document is larger than ``policy.max_bytes``, the body is replaced by its size and
    SHA-256 (``{"truncated": true, ...}``); the rest of the answer is kept.
    """
    full: dict[str, Any] = dict(document)
    secrets = tuple(sorted({secret for secret in scrub if secret}, key=len, reverse=True))
    full["headers"] = _scrub(redact_headers(headers, policy.redact_headers), secrets)
    full["body"] = _scrub(redact_fields(body, policy.redact_fields), secrets)
    encoded = _encode(full)
    if len(encoded) > policy.max_bytes:
        body_bytes = _encode({"body": full["body"]})
        full["body"] = {
            "truncated": True,
            "size": len(body_bytes),
            "sha256": hashlib.sha256(body_bytes).hexdigest(),
        }
        encoded = _encode(full)
        if len(encoded) > policy.max_bytes:
            full = {"truncated": True, "size": len(encoded), "sha256": _sha(encoded)}
            encoded = _encode(full)
    return Evidence(content=encoded)


_scrub = scrub


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
