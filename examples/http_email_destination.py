"""Example: an HTTP destination for an email-style API (send with a message id, look it up).

The API (the reference receiver plays it in the tests):

* ``POST {base}/v1/messages`` with a JSON body that carries the caller's own
  ``"message_id"`` — the API deduplicates on it, not on an ``Idempotency-Key`` header — and
  answers ``201`` or ``202 {"id": "<provider id>", ...}``;
* ``GET {base}/v1/messages/{message_id}`` answers ``200 {"id": ..., "state": "performed"}`` or
  404 (for a while after sending, too: providers index messages with a delay).

So the operation's idempotency key becomes the message id (``message_id`` goes in the body, the
header is switched off), and because this provider does not document a deduplication window the
contract allows no automatic resend: an unknown outcome is settled by looking the message up, and
404 stays Unknown until the index catches up. Recipient addresses are redacted from evidence.

Run ``python examples/http_email_destination.py`` to send once against a reference receiver
started in the same process.
"""

from __future__ import annotations

from effectledger.destinations.http import HttpAction, HttpContract, HttpDestination, HttpLookup
from effectledger.destinations.secrets import SecretHeader, env_secret
from effectledger.model.evidence import EvidencePolicy
from effectledger.model.operations import Command

# Default classification; no deduplication promise, hence no replay window.
EMAIL_CONTRACT = HttpContract()


def message_body(command: Command, key: str) -> dict[str, object]:
    """The provider's send body: the approved message, with the key as its message id."""
    arguments = command.arguments
    return {
        "message_id": key,
        "to": arguments["recipient"],
        "subject": arguments.get("subject", ""),
        "text": arguments["body"],
    }


def email_destination(
    base_url: str,
    *,
    api_key: SecretHeader | None = None,
    account_id: str = "acct-email",
    deadline_s: float = 10.0,
) -> HttpDestination:
    """The destination for the ``send_email`` action of an email-style API."""
    return HttpDestination(
        account_id=account_id,
        endpoint=base_url,
        actions={
            "send_email": HttpAction(
                path="/v1/messages", body=message_body, contract=EMAIL_CONTRACT
            )
        },
        lookup=HttpLookup(
            path="/v1/messages/{key}", state_field="state", done_states=frozenset({"performed"})
        ),
        headers={"Authorization": api_key or env_secret("EMAIL_API_KEY", "Bearer {secret}")},
        idempotency_header=None,
        submit_deadline_s=deadline_s,
        lookup_deadline_s=deadline_s,
        evidence_policy=EvidencePolicy(redact_fields=frozenset({"to", "text"})),
    )


def email_command(recipient: str, subject: str, body: str) -> Command:
    """The command an approved email proposal carries."""
    return Command(
        action="send_email",
        contract_version="email-v1",
        arguments={"recipient": recipient, "subject": subject, "body": body},
    )


if __name__ == "__main__":  # pragma: no cover - a runnable illustration
    import os
    import tempfile
    from pathlib import Path

    from effectledger.receiver.server import serve

    os.environ.setdefault("EMAIL_API_KEY", "example-key")
    folder = Path(tempfile.mkdtemp(prefix="email-example-"))
    with serve(folder / "receiver.db", token=os.environ["EMAIL_API_KEY"]) as receiver:
        mail = email_destination(receiver.url)
        answer = mail.submit(email_command("a@example.com", "Hello", "Hi."), "msg-1")
        print(answer.outcome, answer.provider_reference)
        print(mail.lookup("msg-1").outcome)
        mail.close()
