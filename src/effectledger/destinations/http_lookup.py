"""What an HTTP destination's lookup answer proves: the record of the key asked about, or nothing.

Recovery knows only the idempotency key, so a lookup is configured once per destination
(:class:`HttpLookup`). A found record is proof of acceptance only if it is done (when a state
field is named) and names the key that was asked about: a record of another key is Unknown
(``lookup:<status>:key_mismatch``), since accepting it would settle one operation with another's
effect. Absence (404 included) is never proof: the record may lag.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from effectledger.destinations.http_exchange import (
    Answer,
    Prepared,
    RawAnswer,
    evidence_of,
    reference_from,
)
from effectledger.model import Observation, Outcome
from effectledger.model.evidence import EvidencePolicy

__all__ = ["HttpLookup", "lookup_observation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpLookup:
    """How to ask the destination what it did under a key.

    A status in ``found`` means it has a record of the key; if ``state_field`` is set, only a
    record whose state is in ``done_states`` counts as acceptance. If ``key_field`` is set and
    the record holds that field (dotted for nested objects), it must equal the key asked about.
    Anything else (404 included: absence is not proof, the record may lag) is Unknown.
    """

    path: str
    method: str = "GET"
    found: frozenset[int] = frozenset({200})
    reference_field: str = "id"
    state_field: str | None = None
    done_states: frozenset[str] = frozenset()
    key_field: str | None = "idempotency_key"


def _field(body: Any, path: str) -> Any:
    value: Any = body
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _verdict(spec: HttpLookup, raw: RawAnswer, key: str) -> str | None:
    """``None`` when the record proves acceptance of ``key``, else why it does not."""
    if raw.status not in spec.found:
        return "not_proof"
    if spec.state_field is not None and _field(raw.body, spec.state_field) not in spec.done_states:
        return "not_proof"
    if spec.key_field is not None:
        named = _field(raw.body, spec.key_field)
        if named is not None and named != key:
            return "key_mismatch"
    return None


def lookup_observation(
    spec: HttpLookup, request: Prepared, key: str, raw: RawAnswer | Answer, policy: EvidencePolicy
) -> Observation:
    """The observation of a lookup of ``key`` that was sent and answered ``raw``."""
    document = {"source": "lookup", "method": request.method, "url": request.shown_url,
                "idempotency_key": key}  # fmt: skip
    if isinstance(raw, Answer):
        evidence = evidence_of(document, raw, policy, request.secrets)
        return Observation(outcome=Outcome.UNKNOWN, evidence=evidence)
    problem = _verdict(spec, raw, key)
    outcome = Outcome.ACCEPTED if problem is None else Outcome.UNKNOWN
    reason = f"lookup:{raw.status}" + ("" if problem is None else f":{problem}")
    evidence = evidence_of(document, Answer.of(raw, outcome, reason), policy, request.secrets)
    if problem is not None:
        return Observation(outcome=Outcome.UNKNOWN, evidence=evidence)
    reference = reference_from(raw.body, spec.reference_field, key, request.secrets)
    return Observation(
        outcome=Outcome.ACCEPTED,
        provider_reference=reference,
        evidence=evidence,
        # Two workers reading the same record record it once.
        observation_id="lookup-" + hashlib.sha256(reference.encode()).hexdigest()[:32],
    )
