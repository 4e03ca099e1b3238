"""The reference receiver's contract, and an HTTP destination configured for it.

The receiver deduplicates by ``Idempotency-Key`` and keeps its keys for as long as its database
lives, so a short replay window is safe. It answers 422 ``key_reused`` (or 409 ``key_reused`` with
the fault switch) for a key reused with another body — a permanent rejection — and 409
``key_in_flight`` while the first request is processing, which stays Unknown.
"""

from __future__ import annotations

from datetime import timedelta

from effectledger.destinations.http import (
    HttpAction,
    HttpContract,
    HttpDestination,
    HttpLookup,
    StatusRule,
)
from effectledger.destinations.secrets import SecretHeader
from effectledger.model.evidence import EvidencePolicy
from effectledger.model.operations import Outcome

__all__ = ["REFERENCE_CONTRACT", "reference_destination"]

REFERENCE_CONTRACT = HttpContract(
    rules=(StatusRule(status=409, error_code="key_reused", outcome=Outcome.PERMANENT_REJECTION),),
    deduplicates_by_key=True,
    replay_window=timedelta(seconds=30),
)
"""Default classification, plus: 409 ``key_reused`` is permanent; resend for 30 s."""


def reference_destination(
    url: str,
    *,
    actions: tuple[str, ...] = ("send_support_reply",),
    collection: str = "effects",
    account_id: str = "acct-reference",
    token: SecretHeader | None = None,
    contract: HttpContract = REFERENCE_CONTRACT,
    submit_deadline_s: float = 5.0,
    lookup_deadline_s: float = 5.0,
    evidence_policy: EvidencePolicy | None = None,
) -> HttpDestination:
    """An :class:`HttpDestination` that sends ``actions`` to ``POST {url}/v1/{collection}``.

    The body is ``{"action": ..., "arguments": ...}``; the lookup is
    ``GET {url}/v1/{collection}/{key}``, acceptance only for a ``performed`` effect.
    """
    headers: dict[str, str | SecretHeader] = {}
    if token is not None:
        headers["Authorization"] = token
    action = HttpAction(
        path=f"/v1/{collection}",
        body=lambda command, key: {"action": command.action, "arguments": dict(command.arguments)},
        contract=contract,
    )
    return HttpDestination(
        account_id=account_id,
        endpoint=url,
        actions=dict.fromkeys(actions, action),
        lookup=HttpLookup(
            path=f"/v1/{collection}/{{key}}",
            state_field="state",
            done_states=frozenset({"performed"}),
        ),
        headers=headers,
        submit_deadline_s=submit_deadline_s,
        lookup_deadline_s=lookup_deadline_s,
        evidence_policy=evidence_policy,
    )
