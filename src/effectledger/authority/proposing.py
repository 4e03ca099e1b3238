"""Proposals: the immutable, digest-bound record of one concrete intended effect.

The proposer is the trusted context's actor; the target, resource version, units, pool,
destination, policy version and expiry come from the registered action, never from the
arguments the model sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from effectledger.actions.registry import Action
from effectledger.clock import Clock
from effectledger.errors import InvalidInput, NotFound, OperationIdTaken
from effectledger.ledger import Ledger, append_event, lock_trail, new_id, validate_operation_id
from effectledger.ledger.stored import proposal_from_row
from effectledger.model.authority import Correlation, Proposal, proposal_digest_body
from effectledger.model.canonical import canonical_bytes, digest
from effectledger.model.operations import Context, to_micros, validate_identifier
from effectledger.model.states import EventType
from effectledger.store import Store, Transaction

__all__ = [
    "MAX_STATED_REASON",
    "MAX_UNITS",
    "approval_consumed_by",
    "get_proposal",
    "get_proposal_for_operation",
    "proposal_row",
    "propose_in",
    "same_tool_call",
]

MAX_UNITS = 2**53 - 1  # what every JSON reader holds exactly
MAX_STATED_REASON = 2000
"""The most characters of an agent's stated reason a proposal keeps."""


def stated_reason_of(value: object) -> str | None:
    """``value`` as an agent's stated reason: ``None``, or 1-2000 characters of text that is
    not only whitespace, with no NUL and no lone surrogate (else :class:`InvalidInput`)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("stated_reason must be text that is not empty", field="stated_reason")
    if len(value) > MAX_STATED_REASON:
        raise InvalidInput(
            f"stated_reason is longer than {MAX_STATED_REASON} characters", field="stated_reason"
        )
    if "\x00" in value or any("\ud800" <= c <= "\udfff" for c in value):
        raise InvalidInput("stated_reason holds a NUL or a lone surrogate", field="stated_reason")
    return value


def proposal_row(
    context: Context,
    action: Action,
    arguments: Mapping[str, Any],
    *,
    operation_id: str | None,
    correlation: Correlation | Mapping[str, str] | None,
    clock: Clock,
    stated_reason: str | None = None,
) -> dict[str, Any]:
    """The proposal row to store, its digest computed; every input checked, nothing written."""
    stated_reason = stated_reason_of(stated_reason)
    model = action.validate(arguments)
    normalized = model.model_dump(mode="json")
    arguments_bytes = canonical_bytes(normalized)  # refuses floats, oversize, surrogates
    if operation_id is None:
        operation_id = f"op-{new_id()}"
    validate_operation_id(operation_id)
    correlation_record = Correlation.coerce(correlation)
    target = action.target(model)
    units = action.units(model)
    if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= MAX_UNITS:
        raise InvalidInput(
            f"{action.name} computed an invalid number of units (0-{MAX_UNITS})", field="units"
        )
    resource_version = action.resource_version(context, target)
    now = clock.now()
    body = proposal_digest_body(
        tenant_id=context.tenant_id,
        operation_id=operation_id,
        proposer_id=context.actor_id,
        action=action.name,
        contract_version=action.contract_version,
        target=target,
        resource_version=resource_version,
        arguments=normalized,
        units=units,
        pool=action.pool,
        destination=action.destination,
        policy_version=action.policy.version,
        expires_us=to_micros(now + action.proposal_ttl),
    )
    return {
        **{k: v for k, v in body.items() if k not in {"arguments", "destination"}},
        "proposal_id": f"prop-{new_id()}",
        "arguments_json": arguments_bytes.decode(),
        "destination_account": action.destination.account_id,
        "destination_endpoint": action.destination.endpoint,
        "correlation_json": canonical_bytes(correlation_record.to_dict()).decode(),
        "digest": digest("proposal", body),
        "created_us": to_micros(now),
        "stated_reason": stated_reason,
    }


def propose_in(tx: Transaction, ledger: Ledger, row: Mapping[str, Any]) -> Mapping[str, Any]:
    """Store the proposal ``row`` and its ``ProposalRecorded`` event, on a trail of its own.

    Returns the stored row: ``row``, or the proposal already recorded for the same tool call
    (see :func:`same_tool_call`), which a repeated call gets back unchanged. Raises
    :class:`OperationIdTaken` when the operation id already names another proposal, operation
    or trail.
    """
    tenant_id, operation_id = row["tenant_id"], row["operation_id"]
    key = {"tenant_id": tenant_id, "operation_id": operation_id}
    lock_trail(tx, tenant_id, operation_id)
    existing = tx.one("proposal_for_operation", key)
    if existing is not None and same_tool_call(existing, row):
        return existing
    if existing or tx.one("event_head", key):
        raise OperationIdTaken(
            f"operation id {operation_id} is already taken", operation_id=operation_id
        )
    tx.run("proposal_insert", row)
    append_event(
        tx,
        ledger,
        tenant_id=tenant_id,
        operation_id=operation_id,
        actor=row["proposer_id"],
        event_type=EventType.PROPOSAL_RECORDED,
        evidence_reference=f"proposal/{row['proposal_id']}",
        details=_recorded_details(row),
    )
    return row


def _recorded_details(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ProposalRecorded`` event's details: the proposal, its digest and units, and the
    agent's stated reason when it gave one (so the trail key authenticates what a reviewer
    was shown)."""
    details = {"proposal_id": row["proposal_id"], "digest": row["digest"], "units": row["units"]}
    if row.get("stated_reason") is not None:
        details["stated_reason"] = row["stated_reason"]
    return details


def same_tool_call(existing: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether ``row`` repeats the stored proposal ``existing`` for one model tool call.

    A framework may run a tool call again (LangGraph re-runs a node from its start on resume):
    the same proposer, action, contract and normalized arguments under the same correlation
    tool-call id is that call again. Anything else under a taken operation id is a conflict.
    """
    call = json.loads(row["correlation_json"]).get("tool_call_id")
    return (
        call is not None
        and json.loads(existing["correlation_json"]).get("tool_call_id") == call
        and all(
            existing[field] == row[field]
            for field in ("proposer_id", "action", "contract_version", "arguments_json")
        )
    )


def get_proposal(store: Store, context: Context, proposal_id: str) -> Proposal:
    """The tenant's proposal, its digest recomputed (:class:`TamperedProposal` if edited)."""
    validate_identifier(proposal_id, "proposal_id")
    row = store.one("proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id})
    if row is None:
        raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
    return proposal_from_row(row)


def get_proposal_for_operation(store: Store, context: Context, operation_id: str) -> Proposal:
    """The tenant's proposal recorded under ``operation_id``, its digest recomputed; an
    operation id without one is :class:`NotFound`. A read: nothing is written."""
    validate_operation_id(operation_id)
    row = store.one(
        "proposal_for_operation", {"tenant_id": context.tenant_id, "operation_id": operation_id}
    )
    if row is None:
        raise NotFound(f"no proposal under {operation_id}", operation_id=operation_id)
    return proposal_from_row(row)


def approval_consumed_by(store: Store, context: Context, approval_id: str) -> str | None:
    """The operation that consumed the approval, or ``None`` while it is unspent."""
    validate_identifier(approval_id, "approval_id")
    row = store.one("consumption_get", {"tenant_id": context.tenant_id, "approval_id": approval_id})
    return None if row is None else str(row["operation_id"])
