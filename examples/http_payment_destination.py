"""Example: an HTTP destination for a payment-style API (refund by key, lookup by key).

The API (the reference receiver plays it in the tests):

* ``POST {base}/v1/refunds`` with ``Idempotency-Key: <key>`` and a JSON body
  ``{"charge": "ch_...", "amount": 2500, "currency": "eur", "reason": "..."}``; it answers
  ``201 {"id": "re_...", ...}``, and the same key with the same body replays that answer.
* ``GET {base}/v1/refunds/{key}`` answers ``200 {"id": ..., "state": "performed"}`` or 404.

What to decide for a real provider, and where it goes:

* which statuses mean what — start from the default table and override only what the provider
  documents (here: its 409 ``key_reused`` is a permanent refusal);
* whether it deduplicates by key and for how long — the replay window must not exceed the time
  the provider keeps keys (many keep them for 24 hours; take the documented figure);
* which fields of its answers are personal data — redact them before they become evidence;
* where the API key lives — an environment variable here, read per request.

Run ``python examples/http_payment_destination.py`` to refund once against a reference receiver
started in the same process.
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
from effectledger.destinations.secrets import SecretHeader, env_secret
from effectledger.model.evidence import DEFAULT_REDACTED_HEADERS, EvidencePolicy
from effectledger.model.operations import Command, Outcome

REFUND_CONTRACT = HttpContract(
    rules=(StatusRule(status=409, error_code="key_reused", outcome=Outcome.PERMANENT_REJECTION),),
    deduplicates_by_key=True,
    # Shorter than the provider's key retention, so a resend always lands on a remembered key.
    replay_window=timedelta(minutes=10),
)


def refund_body(command: Command, key: str) -> dict[str, object]:
    """The provider's refund body, built only from the approved command's arguments."""
    arguments = command.arguments
    return {
        "charge": arguments["charge_id"],
        "amount": arguments["amount_minor"],
        "currency": str(arguments["currency"]).lower(),
        "reason": arguments.get("reason", "requested_by_customer"),
    }


def payment_destination(
    base_url: str,
    *,
    api_key: SecretHeader | None = None,
    account_id: str = "acct-payments",
    deadline_s: float = 10.0,
) -> HttpDestination:
    """The destination for the ``refund_charge`` action of a payment-style API."""
    return HttpDestination(
        account_id=account_id,
        endpoint=base_url,
        actions={
            "refund_charge": HttpAction(
                path="/v1/refunds", body=refund_body, contract=REFUND_CONTRACT
            )
        },
        lookup=HttpLookup(
            path="/v1/refunds/{key}", state_field="state", done_states=frozenset({"performed"})
        ),
        headers={"Authorization": api_key or env_secret("PAYMENTS_API_KEY", "Bearer {secret}")},
        submit_deadline_s=deadline_s,
        lookup_deadline_s=deadline_s,
        evidence_policy=EvidencePolicy(
            redact_headers=DEFAULT_REDACTED_HEADERS | {"stripe-account"},
            redact_fields=frozenset({"customer_email", "billing_details"}),
        ),
    )


def refund_command(charge_id: str, amount_minor: int, currency: str) -> Command:
    """The command an approved refund proposal carries."""
    return Command(
        action="refund_charge",
        contract_version="refund-v1",
        arguments={"charge_id": charge_id, "amount_minor": amount_minor, "currency": currency},
    )


if __name__ == "__main__":  # pragma: no cover - a runnable illustration
    import os
    import tempfile
    from pathlib import Path

    from effectledger.receiver.server import serve

    os.environ.setdefault("PAYMENTS_API_KEY", "example-key")
    folder = Path(tempfile.mkdtemp(prefix="payment-example-"))
    with serve(folder / "receiver.db", token=os.environ["PAYMENTS_API_KEY"]) as receiver:
        refunds = payment_destination(receiver.url)
        answer = refunds.submit(refund_command("ch_1", 2500, "EUR"), "refund-key-1")
        print(answer.outcome, answer.provider_reference)
        print(refunds.lookup("refund-key-1").outcome)
        refunds.close()
