"""Pydantic AI (``pydantic-ai-slim``): a ledger action as a deferred tool that needs approval.

:func:`ledger_tool` returns a ``Tool`` for ``Agent(..., tools=[tool], output_type=[str,
DeferredToolRequests], deps_type=...)``. On the model's call the tool proposes it as the
identity in ``ctx.deps`` and raises Pydantic AI's own ``ApprovalRequired`` with the grant as
metadata, so the run ends with ``DeferredToolRequests`` as usual (``.metadata[call_id]`` is
``{"proposal_id", "digest"}``). The host lets the reviewer approve the proposal in the ledger
and resumes with ``DeferredToolResults(approvals={call_id: True}, metadata={call_id: grant})``
and its identity in ``deps=`` (:func:`approved`).

``deps`` is the application's own dependencies object: the tool reads the ledger's
:class:`~effectledger.Context` from it with ``context_of`` (by default the object itself, its
``ledger_context`` attribute or its ``context`` attribute; see
:func:`~effectledger.callers.frameworks.gate.ledger_context_of`), on the model's call and again
on every resume. A ``deps`` without the host's identity is refused (``not_authenticated``) and
nothing is written.

On the approved call the tool rereads the proposal as ``ctx.deps``, compares the arguments it
is about to run (an edited message history, a ``ToolApproved(override_args=...)``) and performs
through the ledger: a repeat is ``replayed``, other arguments ``digest_mismatch``.

A call's proposal is scoped to the run's ``conversation_id`` (``ctx.conversation_id``: the one
``Agent.run`` was given, else the one on the message history, which a deferred-tool resume
keeps). The same tool-call id in two conversations is two proposals; on the approved call the
tool checks that the grant is this conversation's call (else ``digest_mismatch``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, EffectLedger, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    ContextOf,
    Grant,
    LedgerGate,
    host_context,
    ledger_context_of,
    require_scope,
    result_text,
)
from effectledger.errors import EffectLedgerError, InvalidInput
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext, Tool

__all__ = ["approved", "ledger_tool"]

FRAMEWORK = "pydantic-ai"


def ledger_tool(
    ledger: EffectLedger,
    action: ActionHandle | Action | str,
    *,
    context_of: ContextOf = ledger_context_of,
) -> Tool[Any]:
    """The deferred tool of ``action``; ``context_of`` reads the host's Context from ``deps``
    (the application's own dependencies object)."""
    require_extra("pydantic-ai", "The Pydantic AI adapter")
    from pydantic_ai import ApprovalRequired, Tool

    gate = LedgerGate(ledger, action, framework=FRAMEWORK)

    def effectledger_call(ctx: RunContext[Any], **arguments: Any) -> str:
        try:
            who = host_context(ctx.deps, context_of, "a Pydantic AI run (deps=...)")
            if not ctx.tool_call_id:
                raise InvalidInput("a tool call needs its id", field="tool_call_id")
            scope = require_scope(ctx.conversation_id, "a Pydantic AI run")
            if not ctx.tool_call_approved:
                proposal = gate.propose(who, ctx.tool_call_id, arguments, scope=scope)
                raise ApprovalRequired(metadata=Grant.of(proposal).to_dict())
            metadata = ctx.tool_call_metadata
            result = gate.perform(
                who,
                Grant.coerce(metadata) if metadata else None,
                tool_name=ctx.tool_name or "",
                arguments=arguments,
                call=(ctx.tool_call_id, scope),
            )
        except EffectLedgerError as exc:
            return json.dumps({"error": exc.to_dict()}, separators=(",", ":"))
        return result_text(result)

    return Tool.from_schema(
        effectledger_call,
        name=gate.name,
        description=gate.action.description or f"Propose {gate.name}.",
        json_schema=gate.action.json_schema(),
        takes_ctx=True,
    )


def approved(
    requests: DeferredToolRequests | Mapping[str, Grant | Proposal],
    *,
    rejected: Mapping[str, str] | None = None,
) -> DeferredToolResults:
    """The ``DeferredToolResults`` that resume the paused calls with their grants.

    Give the run's ``DeferredToolRequests`` (its metadata holds the grants the tool attached),
    or the host's own ``{call_id: grant}``. The calls ``rejected`` names by call id are denied
    in Pydantic AI instead (``ToolDenied`` with that message, which the model reads): their tool
    never runs and nothing of theirs is performed.
    """
    require_extra("pydantic-ai", "The Pydantic AI adapter")
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

    rejected = rejected or {}
    if isinstance(requests, DeferredToolRequests):
        grants = {
            call.tool_call_id: requests.metadata.get(call.tool_call_id, {})
            for call in requests.approvals
        }
    else:
        grants = {
            call_id: (Grant.of(grant) if isinstance(grant, Proposal) else grant).to_dict()
            for call_id, grant in requests.items()
        }
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {
        call_id: ToolDenied(rejected[call_id]) if call_id in rejected else True
        for call_id in [*grants, *(call_id for call_id in rejected if call_id not in grants)]
    }
    metadata = {k: dict(v) for k, v in grants.items() if k not in rejected}
    return DeferredToolResults(approvals=approvals, metadata=metadata)
