"""Helpers shared by the HTTP destination tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from effectledger import Context, DestinationRef, Operation
from effectledger.destinations.http import HttpContract, HttpDestination
from effectledger.destinations.secrets import env_secret
from effectledger.ledger import Ledger
from effectledger.ledger.evidence import load_evidence
from effectledger.model.evidence import Evidence
from effectledger.receiver.contract import REFERENCE_CONTRACT, reference_destination
from effectledger.receiver.server import RunningReceiver
from tests.conftest import reply_command

NO_REPLAY = HttpContract(rules=REFERENCE_CONTRACT.rules)
"""The reference contract without automatic resends: every Unknown goes to recovery."""


def destination(
    served: RunningReceiver,
    *,
    contract: HttpContract = NO_REPLAY,
    deadline_s: float = 2.0,
    **options: Any,
) -> HttpDestination:
    """An HTTP destination for ``served``, its token read from ``RECEIVER_TOKEN``."""
    return reference_destination(
        served.url,
        token=env_secret("RECEIVER_TOKEN", "Bearer {secret}"),
        contract=contract,
        submit_deadline_s=deadline_s,
        lookup_deadline_s=deadline_s,
        **options,
    )  # fmt: skip


def admit_http(
    ledger: Ledger,
    context: Context,
    target: HttpDestination,
    operation_id: str = "op-1",
    **arguments: object,
) -> Operation:
    """Admit ``operation_id`` for the reply command, bound to ``target``."""
    return ledger.admit(
        context,
        operation_id=operation_id,
        revision="rev-1",
        command=reply_command(**arguments),
        destination=DestinationRef(account_id=target.account_id, endpoint=target.endpoint),
        admission_reference=f"approval/{operation_id}",
    )  # fmt: skip


def last_evidence(ledger: Ledger, context: Context, operation_id: str = "op-1") -> Evidence:
    """The stored evidence blob of the operation's latest event."""
    event = ledger.events(context, operation_id)[-1]
    assert event.evidence_reference is not None
    found = load_evidence(ledger.store, context.tenant_id, event.evidence_reference)
    assert found is not None, event.evidence_reference
    return found


def window(seconds: float) -> HttpContract:
    """The reference contract with a replay window of ``seconds``."""
    return HttpContract(
        rules=REFERENCE_CONTRACT.rules,
        deduplicates_by_key=True,
        replay_window=timedelta(seconds=seconds),
    )


def destination_at(url: str, *, contract: HttpContract = NO_REPLAY, deadline_s: float = 2.0,
                   **options: Any) -> HttpDestination:  # fmt: skip
    """The reference destination's configuration pointed at ``url`` (a hostile server, say)."""
    return reference_destination(
        url,
        token=env_secret("RECEIVER_TOKEN", "Bearer {secret}"),
        contract=contract,
        submit_deadline_s=deadline_s,
        lookup_deadline_s=deadline_s,
        **options,
    )  # fmt: skip


LEDGER_TABLES = ("proposals", "operations", "attempts", "audit_events", "evidence_blobs")
"""Every table a destination's text could reach."""
