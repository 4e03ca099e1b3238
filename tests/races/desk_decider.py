"""One reviewer process deciding a proposal through ``EffectLedger.decide``, for the race tests.

``python -m tests.races.desk_decider URL RECEIVER PROPOSAL_ID DIGEST ACTOR approve|deny``
prints ``granted``, ``denied`` or the refusal's reason.
"""

from __future__ import annotations

import sys

from effectledger import ApprovalRefused, SimulatedReceiver, connect
from effectledger.model import Context
from tests.acceptance.app_support import declare_refund


def decide(
    url: str, receiver_path: str, proposal_id: str, digest: str, actor: str, how: str
) -> str:
    """Decide once as ``actor`` (an approver); the outcome as a word."""
    receiver = SimulatedReceiver(receiver_path, synchronous="NORMAL")
    reviewer = Context(tenant_id="acme", actor_id=actor, roles=frozenset({"approver"}))
    try:
        with connect(url, migrate=False) as app:
            declare_refund(app, receiver)
            made = app.decide(
                reviewer, proposal_id, digest=digest, approve=how == "approve", reason="race"
            )
            return "granted" if made.granted else "denied"
    except ApprovalRefused as exc:
        return str(exc.details.get("reason"))
    finally:
        receiver.close()


if __name__ == "__main__":
    print(decide(*sys.argv[1:7]))
