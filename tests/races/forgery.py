"""A database administrator's complete forgery of an admitted refund, for the trail tests.

The administrator holds full write access and no key: they drop the protective triggers and
rewrite the amount in the proposal, the approval's digest, the command and the trail events,
recomputing every digest, fingerprint and hash the way the ledger computes them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from effectledger import EffectLedger, OperationState, SimulatedReceiver
from effectledger.events.record import body_from_row, entry_bytes, hash_of_entry
from effectledger.ledger.stored import proposal_from_row
from effectledger.model.canonical import COMMAND_VERSION, canonical_bytes, digest, digest_bytes
from tests.conftest import drop_trigger, run_sql
from tests.races.world import AGENT, REFUND_30, approver

FORGED_AMOUNT = 500_000


def receiver(service: EffectLedger) -> SimulatedReceiver:
    (destination,) = service.destinations.values()
    assert isinstance(destination, SimulatedReceiver)
    return destination


def admitted(service: EffectLedger) -> tuple[str, str]:
    """An approved refund of 30 admitted but not dispatched: (proposal id, operation id)."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    operation = service.authority.admit(
        AGENT, proposal.proposal_id, approval_id=approval.approval_id
    )
    assert operation.state is OperationState.READY
    return proposal.proposal_id, operation.operation_id


def _events(service: EffectLedger, operation_id: str) -> list[dict[str, Any]]:
    trail = {"tenant_id": "acme", "operation_id": operation_id}
    rows = service.ledger.store.read(lambda tx: tx.all("events_for_operation", trail))
    return [dict(row) for row in rows]


def forge(service: EffectLedger, store_url: str, proposal_id: str) -> None:
    """Rewrite the refund to FORGED_AMOUNT everywhere, recomputing every digest and hash.

    The proposal, its approvals' digests, the operation row (once admitted) and every event of
    the trail are rewritten, the chain re-linked from its first event.
    """
    for table in ("proposals", "approvals", "audit_events"):
        drop_trigger(store_url, table, f"{table}_no_update")
    drop_trigger(store_url, "operations", "operations_capacity_fixed")
    store = service.ledger.store
    stored = store.one("proposal_get", {"tenant_id": "acme", "proposal_id": proposal_id})
    assert stored is not None
    genuine = proposal_from_row(stored)
    arguments = {**genuine.arguments, "amount_minor": FORGED_AMOUNT}
    forged = dataclasses.replace(genuine, arguments=arguments, units=FORGED_AMOUNT)
    new_digest = digest("proposal", forged.digest_body())
    run_sql(
        store_url,
        "UPDATE proposals SET arguments_json = ?, units = ?, digest = ? WHERE proposal_id = ?",
        (json.dumps(arguments), FORGED_AMOUNT, new_digest, proposal_id),
    )
    run_sql(
        store_url,
        "UPDATE approvals SET digest = ? WHERE proposal_id = ?",
        (new_digest, proposal_id),
    )
    operation_id = genuine.operation_id
    row = store.one("operation_get", {"tenant_id": "acme", "operation_id": operation_id})
    replacements = [(genuine.digest, new_digest), ('"units":30', f'"units":{FORGED_AMOUNT}')]
    if row is not None:
        command = json.loads(row["command_json"])
        command["arguments"]["amount_minor"] = FORGED_AMOUNT
        command_bytes = canonical_bytes(command, version=COMMAND_VERSION)
        fingerprint = digest_bytes("command", command_bytes, version=COMMAND_VERSION)
        replacements.append((row["fingerprint"], fingerprint))
        run_sql(
            store_url,
            "UPDATE operations SET command_json = ?, fingerprint = ?, units = ? "
            "WHERE operation_id = ?",
            (command_bytes.decode(), fingerprint, FORGED_AMOUNT, operation_id),
        )
    previous = "0" * 64
    for event in _events(service, operation_id):
        details = event["details_json"]
        for old, new in replacements:
            details = details.replace(old, new)
        event.update(details_json=details, prev_hash=previous)
        previous = hash_of_entry(entry_bytes(body_from_row(event)))
        run_sql(
            store_url,
            "UPDATE audit_events SET details_json = ?, prev_hash = ?, event_hash = ? "
            "WHERE event_id = ?",
            (details, event["prev_hash"], previous, event["event_id"]),
        )
    if row is not None:
        run_sql(
            store_url,
            "UPDATE operations SET last_event_hash = ? WHERE operation_id = ?",
            (previous, operation_id),
        )
