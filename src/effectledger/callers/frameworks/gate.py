"""The gate every framework adapter shares: the ledger decides at execution time.

A framework's own approval pause (an interrupt, a deferred call, an approval request) only
carries a :class:`Grant` — the proposal's id and the digest the reviewer approved — or nothing
when the host keeps it. When the framework is about to run the call, :meth:`LedgerGate.perform`
rereads the proposal as the identity the host supplies on this resume, refuses if the tool name
or the arguments the framework is about to run are not the proposal's (an edited saved state),
and performs through :meth:`EffectLedger.perform`: once, a repeat answers ``replayed``. The
framework's tool body is never the effect.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from effectledger import (
    ActionHandle,
    Context,
    Correlation,
    DenialReason,
    EffectLedger,
    EffectOutcome,
    EffectResult,
    Proposal,
    TraceStep,
)
from effectledger.actions import Action
from effectledger.errors import InvalidInput, NotAuthenticated, NotFound

__all__ = ["Grant", "LedgerGate", "refusal", "require_context", "require_scope", "result_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """What a pause carries for one tool call: the proposal and the digest that was approved.

    ``approval_id`` names one approval to present; without it the decision recorded on the
    proposal's trail is used (see :meth:`EffectLedger.perform`).
    """

    proposal_id: str
    digest: str
    approval_id: str | None = None

    @classmethod
    def of(cls, proposal: Proposal) -> Grant:
        """The grant of ``proposal`` as recorded."""
        return cls(proposal_id=proposal.proposal_id, digest=proposal.digest)

    @classmethod
    def coerce(cls, value: object) -> Grant | None:
        """``value`` as a grant: one already, its mapping (a resume value, metadata) or None."""
        if value is None or isinstance(value, Grant):
            return value
        if isinstance(value, Mapping):
            proposal_id, digest = value.get("proposal_id"), value.get("digest")
            approval_id = value.get("approval_id")
            if (
                isinstance(proposal_id, str)
                and isinstance(digest, str)
                and (approval_id is None or isinstance(approval_id, str))
            ):
                return cls(proposal_id=proposal_id, digest=digest, approval_id=approval_id)
        raise InvalidInput("a grant is a proposal_id and a digest", field="grant")

    def to_dict(self) -> dict[str, str]:
        """The grant as the plain mapping a pause or a resume value carries."""
        data = {"proposal_id": self.proposal_id, "digest": self.digest}
        if self.approval_id is not None:
            data["approval_id"] = self.approval_id
        return data


def require_context(value: object, where: str) -> Context:
    """``value`` if it is the host's :class:`Context`; else :class:`NotAuthenticated`."""
    if not isinstance(value, Context):
        raise NotAuthenticated(
            f"{where} needs the host's effectledger Context on every run and resume; "
            "a saved state never supplies the identity"
        )
    return value


def require_scope(value: object, where: str) -> str:
    """``value`` as a conversation scope: a non-empty string of at most 256 characters, else
    :class:`InvalidInput` (field ``scope``) saying what ``where`` needs."""
    if not isinstance(value, str) or not value.strip() or len(value) > 256:
        raise InvalidInput(
            f"{where} needs the conversation the call belongs to (scope=: a session, thread or "
            "conversation id of 1-256 characters): a model reuses tool-call ids across "
            "conversations",
            field="scope",
        )
    return value


class LedgerGate:
    """One ledger action as a framework sees it: propose a tool call, perform it at execution.

    ``framework`` is recorded in each proposal's correlation. A tool call's operation is
    derived from the framework, the actor, the call's conversation (``scope``: a thread,
    session or conversation id) and its tool-call id: a model reuses call ids across
    conversations (local models, scripted tests number them from 1), so the same id in two
    conversations is two proposals and two effects, while the same call proposed again within
    one conversation is the same proposal.
    """

    def __init__(
        self, ledger: EffectLedger, action: ActionHandle | Action | str, *, framework: str
    ) -> None:
        name = action if isinstance(action, str) else action.name
        self.ledger = ledger
        self.action: Action = ledger.registry.get(name)
        self.framework = framework

    @property
    def name(self) -> str:
        """The tool's name: the action's."""
        return self.action.name

    def operation_id(self, context: Context, tool_call_id: str, scope: str = "") -> str:
        """The operation id of one tool call of ``context``'s actor in conversation ``scope``:
        the same on every repeat. Each part is length-delimited (a JSON list), so no call id
        or scope a model or a host chooses can make two calls' material the same."""
        material = json.dumps(
            [self.framework, context.tenant_id, context.actor_id, scope, tool_call_id],
            separators=(",", ":"),
        )
        return f"op-call-{hashlib.sha256(material.encode()).hexdigest()[:40]}"

    def propose(
        self,
        context: Context,
        tool_call_id: str,
        arguments: Mapping[str, Any],
        *,
        scope: str = "",
    ) -> Proposal:
        """Propose the tool call as ``context``; the same call again returns the same proposal.

        Different arguments under the same tool-call id are refused (``operation_id_taken``).
        """
        context = require_context(context, f"{self.framework} propose")
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidInput("a tool call needs its id", field="tool_call_id")
        return self.ledger.propose(
            context,
            self.action.name,
            dict(arguments),
            operation_id=self.operation_id(context, tool_call_id, scope),
            correlation=Correlation(tool_call_id=tool_call_id[:256], framework=self.framework),
        )

    def perform(
        self,
        context: object,
        grant: Grant | Mapping[str, Any] | None,
        *,
        tool_name: str,
        arguments: Mapping[str, Any],
        call: tuple[str, str] | None = None,
    ) -> EffectResult:
        """Perform the call the framework is about to run, if it is exactly the granted one.

        ``context`` is the host's identity on this resume (:class:`NotAuthenticated` if it is
        missing, before anything is read). Without a grant the call has no approval
        (``approval_missing``); another name, other arguments or another digest than the
        proposal's is ``digest_mismatch``; both write nothing. ``call``, the ``(tool_call_id,
        scope)`` the framework runs now when it knows them, binds the grant to this call: a
        grant of the same call id and arguments in another conversation is ``digest_mismatch``
        too, never that conversation's recorded result. A proposal ``context`` cannot see goes
        to the ledger, which gives its own refusal.
        """
        who = require_context(context, f"{self.framework} tool execution")
        found = Grant.coerce(grant)
        if found is None:
            return refusal(DenialReason.APPROVAL_MISSING)
        if tool_name != self.action.name:
            return refusal(DenialReason.DIGEST_MISMATCH)
        try:
            proposal = self.ledger.proposal(who, found.proposal_id)
        except NotFound:
            return self.ledger.perform(who, found.proposal_id, approval=found.approval_id)
        if (
            proposal.digest != found.digest
            or proposal.action != tool_name
            or self._normalized(arguments) != dict(proposal.arguments)
            or (call is not None and proposal.operation_id != self.operation_id(who, *call))
        ):
            return refusal(DenialReason.DIGEST_MISMATCH)
        return self.ledger.perform(who, proposal, approval=found.approval_id)

    def _normalized(self, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            normalized: dict[str, Any] = self.action.validate(arguments).model_dump(mode="json")
        except InvalidInput:
            return None
        return normalized


def refusal(reason: DenialReason) -> EffectResult:
    """The gate's refusal: nothing admitted, nothing sent, nothing written."""
    return EffectResult(
        outcome=EffectOutcome.DENIED,
        operation_id=None,
        state=None,
        reason=reason,
        provider_reference=None,
        trace=(TraceStep("gate", f"denied:{reason.value}"),),
    )


def result_text(result: EffectResult) -> str:
    """The result as the JSON text a model reads back from the tool."""
    return json.dumps(result.to_dict(), separators=(",", ":"))
