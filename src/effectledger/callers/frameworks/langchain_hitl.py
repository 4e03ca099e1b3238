"""LangChain's human-in-the-loop format, as the LangGraph adapter pauses and answers with it.

The pause is the ``HITLRequest`` that ``HumanInTheLoopMiddleware`` emits and Agent Inbox, Agent
Chat UI and Studio render: one action request per call (``name``, ``args``, ``description``)
with the ledger's part under :data:`LEDGER_KEY`, and one review config per call with the
decisions it allows. The resume value is its ``HITLResponse``, ``{"decisions": [...]}``,
checked against :class:`ReviewResponse` by LangGraph before it is saved. :class:`Decisions`
acts on each decision in the ledger; each call is answered with a ``ToolMessage`` carrying the
ledger's result (or the error) as JSON.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from effectledger import Context, EffectOutcome, EffectResult, Proposal
from effectledger.callers.frameworks.gate import (
    Grant,
    LedgerGate,
    granted,
    require_context,
    result_text,
)
from effectledger.errors import ApprovalRefused, EffectLedgerError, InvalidInput, NotPermitted

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage

__all__ = [
    "DECISIONS",
    "LEDGER_KEY",
    "Answer",
    "Decisions",
    "ReviewResponse",
    "answer",
    "messages",
    "review_request",
    "unreviewed",
]

LEDGER_KEY = "effectledger"
"""The key of an action request under which the ledger's part of the call rides."""
DECISIONS = ("approve", "edit", "reject", "respond")
"""LangChain's human-in-the-loop decision types, all allowed by default."""

Answer = tuple[EffectResult | EffectLedgerError, str | None]
"""What a call is answered: the ledger's result or the error, and a note for the model."""

# refusals of the reviewer's own decision; any other says where the proposal stands (decided or
# admitted already: a resume repeating the review), which the ledger's perform then reports
_REVIEWER_REFUSALS = frozenset({"self_approval", "not_an_approver", "digest_mismatch"})


class ApproveDecision(BaseModel):
    """``approve``: perform the call as proposed, with the grant of this resume."""

    type: Literal["approve"]


class EditedAction(BaseModel):
    """The reviewer's call: the same tool, other arguments."""

    name: str
    args: dict[str, Any]


class EditDecision(BaseModel):
    """``edit``: perform the reviewer's call instead, as a proposal of its own."""

    type: Literal["edit"]
    edited_action: EditedAction


class RejectDecision(BaseModel):
    """``reject``: deny the call, the message as the reason the model reads."""

    type: Literal["reject"]
    message: str | None = None


class RespondDecision(BaseModel):
    """``respond``: deny the call, the reviewer's message as what the model reads."""

    type: Literal["respond"]
    message: str


class ReviewResponse(BaseModel):
    """LangChain's ``HITLResponse`` as the interrupt's ``response_schema``: LangGraph checks a
    resume value against it before saving it (a model, so its validator is built once)."""

    decisions: list[
        Annotated[
            ApproveDecision | EditDecision | RejectDecision | RespondDecision,
            Field(discriminator="type"),
        ]
    ]


class Decisions:
    """What each of LangChain's decisions does in the ledger, for one action's gate.

    ``approve`` performs the call with the grant of this resume, if it is exactly the granted
    proposal of this conversation's call; ``edit`` denies the call as proposed, proposes the
    edited call as a new proposal of the same tool call, approves its digest as the reviewer
    and performs it (the old approval never covers it); ``reject`` and ``respond`` deny the
    proposal with the message as the reason the model reads. Each is idempotent: a resume
    repeating a review decides nothing new and replays.
    """

    def __init__(self, gate: LedgerGate, allowed_decisions: Sequence[str]) -> None:
        self.gate = gate
        self.allowed_decisions = list(allowed_decisions)

    def decide(
        self,
        who: Context,
        call: Mapping[str, Any],
        proposal: Proposal,
        decision: Mapping[str, Any],
        *,
        grants: object,
        reviewer: object,
        scope: str,
    ) -> Answer:
        """Act on ``decision`` for ``call`` (proposed as ``proposal`` in conversation
        ``scope``) as ``who``: ``approve`` performs this resume's grant of the call (from
        ``grants``); the others are ``reviewer``'s, who must be the host's Context with the
        approver role. Refusals of the decision itself are raised, nothing decided."""
        kind = decision.get("type")
        if kind not in self.allowed_decisions:
            raise InvalidInput(
                f"decision {kind!r} is not allowed for {self.gate.name}: one of "
                f"{', '.join(self.allowed_decisions)}",
                field="decisions",
            )
        call_id = str(call["id"])
        if kind == "approve":
            grant = granted(grants, call_id)
            return self.gate.perform(
                who, grant, tool_name=call["name"], arguments=call["args"], call=(call_id, scope)
            ), None
        decider = require_context(
            reviewer, f"a reviewer's {kind} decision (the host's reviewer Context)"
        )
        if kind == "edit":
            return self._edit(who, decider, call_id, proposal, decision, scope)
        message = decision.get("message")
        reason = (
            message if isinstance(message, str) and message.strip() else "denied by the reviewer"
        )
        self._decided(decider, proposal, approve=False, reason=reason)
        return self.gate.ledger.perform(who, proposal), None

    def _edit(
        self,
        who: Context,
        reviewer: Context,
        call_id: str,
        proposal: Proposal,
        decision: Mapping[str, Any],
        scope: str,
    ) -> Answer:
        edited = decision.get("edited_action")
        name = edited.get("name") if isinstance(edited, Mapping) else None
        arguments = edited.get("args") if isinstance(edited, Mapping) else None
        if name != self.gate.name:
            raise InvalidInput(
                f"an edit keeps the tool: {self.gate.name}", field="edited_action.name"
            )
        if not isinstance(arguments, Mapping):
            raise InvalidInput("an edit names the arguments", field="edited_action.args")
        normalized = self.gate.action.validate(arguments).model_dump(mode="json")
        # deny the call as proposed first: were it admitted already, that is what happened
        standing = self._decided(reviewer, proposal, approve=False, reason="edited by the reviewer")
        if standing == "already_admitted":
            return self.gate.ledger.perform(who, proposal), None
        material = json.dumps([scope, normalized], sort_keys=True, separators=(",", ":"))
        edit_scope = f"edit:{hashlib.sha256(material.encode()).hexdigest()[:40]}"
        replacement = self.gate.propose(who, call_id, normalized, scope=edit_scope)
        self._decided(reviewer, replacement, approve=True, reason=None)
        result = self.gate.perform(
            who,
            Grant.of(replacement),
            tool_name=self.gate.name,
            arguments=normalized,
            call=(call_id, edit_scope),
        )
        note = (
            f"A reviewer replaced this call before it ran: {self.gate.name} ran with arguments "
            f"{json.dumps(normalized, sort_keys=True)} (proposal {replacement.proposal_id}). "
            "Do not re-issue your original call."
        )
        return result, note

    def _decided(
        self, reviewer: Context, proposal: Proposal, *, approve: bool, reason: str | None
    ) -> str | None:
        """The reviewer's decision on the proposal as shown; when the proposal's standing
        refuses it (decided or admitted already, expired, its target changed), that reason,
        for the ledger's perform to report. The reviewer's own refusals are raised."""
        try:
            self.gate.ledger.decide(
                reviewer,
                proposal.proposal_id,
                digest=proposal.digest,
                approve=approve,
                reason=reason,
            )
        except ApprovalRefused as exc:
            if exc.reason in _REVIEWER_REFUSALS:
                raise
            return exc.reason
        return None


def review_request(
    name: str, shown: Sequence[tuple[Any, Proposal]], allowed_decisions: Sequence[str]
) -> dict[str, Any]:
    """LangChain's ``HITLRequest`` for the proposed calls of tool ``name``, the ledger's part
    (the call id, the proposal and its digest) with each: ``args`` are the proposal's, what
    its digest binds."""
    requests, configs = [], []
    for call, proposal in shown:
        arguments = dict(proposal.arguments)
        requests.append(
            {
                "name": name,
                "args": arguments,
                "description": (
                    f"Approve {name} as proposed?\n\n"
                    f"Args: {json.dumps(arguments, sort_keys=True)}\n"
                    f"Ledger proposal {proposal.proposal_id}, digest {proposal.digest}"
                ),
                LEDGER_KEY: {
                    "tool_call_id": str(call["id"]),
                    "proposal_id": proposal.proposal_id,
                    "digest": proposal.digest,
                },
            }
        )
        configs.append({"action_name": name, "allowed_decisions": list(allowed_decisions)})
    return {"action_requests": requests, "review_configs": configs}


def messages(calls: Sequence[Any], answers: Mapping[str, Answer]) -> dict[str, Any]:
    """The state update answering each call, in the order the model made them."""
    return {"messages": [answer(call, *answers[str(call["id"])]) for call in calls]}


def answer(
    call: Mapping[str, Any], outcome: EffectResult | EffectLedgerError, note: str | None
) -> ToolMessage:
    """The ``ToolMessage`` answering ``call``: the result's JSON (an error's as ``{"error"}``),
    ``status`` ``error`` unless it was performed or replayed."""
    from langchain_core.messages import ToolMessage

    if isinstance(outcome, EffectLedgerError):
        text = json.dumps({"error": outcome.to_dict()}, separators=(",", ":"))
        return ToolMessage(content=text, tool_call_id=call["id"], name=call["name"], status="error")
    if note is not None:
        outcome = dataclasses.replace(outcome, note=note)
    done = outcome.outcome in (EffectOutcome.PERFORMED, EffectOutcome.REPLAYED)
    return ToolMessage(
        content=result_text(outcome),
        tool_call_id=call["id"],
        name=call["name"],
        status="success" if done else "error",
    )


def unreviewed(call: Mapping[str, Any]) -> ToolMessage:
    """A ledger call that reached the tools node without its review: refused, nothing run."""
    return answer(
        call,
        NotPermitted(
            "a ledger tool call runs only through its review; the agent's effectledger "
            "middleware answers it after the model's turn"
        ),
        None,
    )
