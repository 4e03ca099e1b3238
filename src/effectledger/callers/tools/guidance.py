"""What a model may tell the user about a result: one sentence per outcome, truthful by design.

An uncertain state is never worded as done or failed: it says the effect may or may not have
happened and is being checked. A denial says nothing happened. Every caller (function tools,
MCP) attaches the same sentence to the same result.
"""

from __future__ import annotations

import functools

from effectledger.display import printable
from effectledger.errors import EffectLedgerError, InvalidInput, NotFound
from effectledger.model.operations import OperationState

__all__ = ["UNCERTAIN", "error_guidance", "proposal_guidance", "result_guidance"]

UNCERTAIN = (
    "The outcome is not known yet: the action may or may not have happened and the destination "
    "is being asked. Tell the user it is pending confirmation; do not say it succeeded or "
    "failed, and do not try it again."
)

_DENIALS = {
    "approval_missing": "it needs a reviewer's approval first. Tell the user it awaits approval.",
    "approval_denied": "a reviewer denied it. Tell the user it was declined.",
    "approval_consumed": "its approval was already used for another operation.",
    "digest_mismatch": "the approval covers a different proposal than this one.",
    "expired": "the proposal or its approval expired. A new proposal needs a new approval.",
    "stale_resource_version": "the target changed since it was proposed. Propose it again.",
    "actor_mismatch": "only the actor who proposed it may perform it.",
    "tenant_mismatch": "it was addressed to another tenant.",
    "not_found": "no such proposal is visible to you.",
    "capacity_exceeded": "the capacity limit for this kind of action is reached.",
    "policy_denied": "the policy does not allow it for you.",
}

_STATES = {
    OperationState.SUCCEEDED: (
        "The destination confirmed the action. You may tell the user it is done."
    ),
    OperationState.REJECTED: (
        "The destination refused the action; it did not happen. Tell the user it was refused."
    ),
    OperationState.RELEASED: (
        "The action was not sent: its authority no longer held when it was due. It did not "
        "happen; a new proposal and approval are needed."
    ),
    OperationState.READY: (
        "The action is admitted and waiting to be sent; it has not happened yet."
    ),
    OperationState.RETRY_PENDING: (
        "The destination asked to try later; the action has not happened yet."
    ),
}


def proposal_guidance() -> str:
    """What to say after a proposal was recorded."""
    return (
        "The proposal is recorded; nothing has happened yet. Show the user what was proposed. "
        "It takes effect only when performed, and usually only after a reviewer approves it."
    )


@functools.lru_cache(maxsize=256)  # a pure function of a few short strings: answered once
def result_guidance(
    outcome: str, state: OperationState | None, reason: str | None, note: str | None = None
) -> str:
    """The sentence for a perform or status result; ``note`` is a denying approver's reason."""
    if outcome == "denied":
        why = _DENIALS.get(reason or "", "the ledger refused it.")
        said = "" if not note else f' The reviewer\'s reason: "{printable(note)}".'
        return f"Nothing happened: {why}{said} Do not tell the user it was done."
    if state is None:  # pragma: no cover - every other outcome names a state
        return UNCERTAIN
    if state.uncertain:
        return UNCERTAIN
    text = _STATES[state]
    if outcome == "replayed" and state is OperationState.SUCCEEDED:
        return "This was already performed earlier; no second effect was made. " + text
    return text


def error_guidance(error: EffectLedgerError, *, performing: bool) -> str:
    """The sentence for a refused call: nothing written, or (mid-perform) not known yet."""
    if isinstance(error, InvalidInput | NotFound):
        return (
            f"The call was refused ({error.code}) and nothing was recorded. Correct the call; "
            "do not tell the user anything happened."
        )
    if performing:
        return (
            f"The call did not complete ({error.code}). Whether the action happened is not known "
            "from this reply: check operation_status before telling the user anything."
        )
    return f"The call was refused ({error.code}). Do not tell the user anything happened."
