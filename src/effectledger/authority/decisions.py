"""Decisions on a proposal: an approver's approval bound to its digest, or a final denial."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from effectledger.actions.registry import Action
from effectledger.errors import ApprovalRefused, InvalidInput
from effectledger.ledger import Ledger, append_event, lock_trail, new_id
from effectledger.model.authority import Proposal
from effectledger.model.operations import Context, to_micros
from effectledger.model.states import EventType
from effectledger.store import Transaction

__all__ = [
    "MAX_APPROVAL_LIFETIME",
    "MAX_REASON_LENGTH",
    "Check",
    "check_lifetime",
    "check_reason",
    "decide_in",
    "decision_row",
]

Check = Callable[[Transaction], None]
"""A test run under the trail lock before a decision is written; it raises to refuse."""

MAX_APPROVAL_LIFETIME = timedelta(days=366)
MAX_REASON_LENGTH = 500


def check_lifetime(expires_in: object) -> timedelta:
    """``expires_in`` if it is a positive duration of at most :data:`MAX_APPROVAL_LIFETIME`."""
    if (
        not isinstance(expires_in, timedelta)
        or expires_in <= timedelta(0)
        or expires_in > MAX_APPROVAL_LIFETIME
    ):
        raise InvalidInput(
            "expires_in must be a positive timedelta of at most 366 days", field="expires_in"
        )
    return expires_in


def check_reason(value: object) -> str:
    """``value`` if it is printable text of 1-500 characters that every store can hold."""
    limit = MAX_REASON_LENGTH
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.strip():
        raise InvalidInput(f"reason must be text of 1-{limit} characters", field="reason")
    if "\x00" in value or any(0xD800 <= ord(char) <= 0xDFFF for char in value):
        raise InvalidInput("reason holds a NUL or a lone surrogate", field="reason")
    return value


def decision_row(
    approver: Context,
    proposal: Proposal,
    action: Action,
    shown_digest: str,
    expires_in: timedelta,
    *,
    granted: bool,
    reason: str | None,
    now: datetime,
) -> dict[str, Any]:
    """The approval (or denial) row to store, once the approver may decide on what was shown.

    Raises :class:`ApprovalRefused` when the approver was shown another digest, policy does not
    let them decide, or (for an approval) the proposal has expired.
    """
    if shown_digest != proposal.digest:
        raise ApprovalRefused(
            "the approver was shown another proposal than the one stored",
            reason="digest_mismatch",
            proposal_id=proposal.proposal_id,
        )
    refusal = action.policy.may_approve(approver, proposal)
    if refusal is not None:
        raise ApprovalRefused(f"{approver.actor_id} may not decide this", reason=refusal)
    if granted and now >= proposal.expires_at:
        raise ApprovalRefused("the proposal has expired", reason="expired")
    return {
        "tenant_id": approver.tenant_id,
        "approval_id": f"appr-{new_id()}",
        "proposal_id": proposal.proposal_id,
        "digest": proposal.digest,
        "decision": "granted" if granted else "denied",
        "kind": "approval",
        "approver_id": approver.actor_id,
        "policy_version": action.policy.version,
        "reason": reason,
        "decided_us": to_micros(now),
        "expires_us": to_micros(now + expires_in),
    }


def decide_in(
    tx: Transaction,
    ledger: Ledger,
    operation_id: str,
    row: Mapping[str, Any],
    check: Check | None = None,
) -> None:
    """Store the decision ``row`` on the trail of ``operation_id``, with its event first.

    A proposal already denied takes no further decision (``proposal_denied``); a proposal whose
    operation is already admitted (in any state, performed included) takes no further decision
    either (``already_admitted``): it is decided, and its effect may be under way. A refusal
    appends nothing to the trail and writes no decision row.
    ``check``, when given, runs first under the trail's lock and may refuse the decision (a
    reviewer's "only while it still waits"): racing deciders see each other's decisions.
    """
    tenant_id, proposal_id = row["tenant_id"], row["proposal_id"]
    granted = row["decision"] == "granted"
    lock_trail(tx, tenant_id, operation_id)
    if check is not None:
        check(tx)
    if tx.one("proposal_denial", {"tenant_id": tenant_id, "proposal_id": proposal_id}):
        raise ApprovalRefused(
            "this proposal was denied: a denial is final",
            reason="proposal_denied",
            proposal_id=proposal_id,
        )
    if tx.one("operation_get", {"tenant_id": tenant_id, "operation_id": operation_id}):
        raise ApprovalRefused(
            "this proposal was already admitted: it is decided, and its effect may be under way",
            reason="already_admitted",
            proposal_id=proposal_id,
        )
    # The event first: the database refuses a decision without the event recording it.
    append_event(
        tx,
        ledger,
        tenant_id=tenant_id,
        operation_id=operation_id,
        actor=row["approver_id"],
        event_type=EventType.APPROVAL_GRANTED if granted else EventType.APPROVAL_DENIED,
        evidence_reference=f"approval/{row['approval_id']}",
        details={"approval_id": row["approval_id"], "digest": row["digest"]},
    )
    tx.run("approval_insert", row)
