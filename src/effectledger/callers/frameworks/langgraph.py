"""LangGraph / LangChain agents (``langgraph``, ``langchain``): a ledger action behind the
human-in-the-loop request LangChain's ``HumanInTheLoopMiddleware`` emits.

:func:`ledger_middleware` returns an agent middleware for ``create_agent`` that brings the
action's tool. After each model turn that calls it, the middleware proposes each call as the
identity in ``runtime.context`` and pauses the graph with one ``interrupt()`` whose value is
LangChain's ``HITLRequest`` (what Agent Inbox, Agent Chat UI and Studio render)::

    {"action_requests": [{"name", "args", "description",
                          "effectledger": {"tool_call_id", "proposal_id", "digest"}}, ...],
     "review_configs": [{"action_name", "allowed_decisions"}, ...]}

``args`` are the proposal's (what its digest binds); the ledger's part rides in the extra
``effectledger`` key and in the description. The resume value is LangChain's ``HITLResponse``,
``{"decisions": [...]}`` in the order of the action requests (:meth:`LedgerMiddleware.resume`),
checked by LangGraph before it is saved. The host gives on every resume, in ``invoke(...,
context=...)`` (never checkpointed): its identity (``.context``), the grants of the calls it
let perform (``.grants``: tool-call id -> ``Grant`` or ``Proposal``) and the reviewer who
decided (``.reviewer``, a ``Context`` with the approver role). Each decision:

- ``approve``: performs the call with the grant of this resume, if it is exactly the granted
  proposal of this thread's call (else ``digest_mismatch``; no grant: ``approval_missing``);
- ``edit``: the reviewer denies the call as proposed, the edited call is proposed as a new
  proposal of the same tool call and the reviewer approves its digest, and it is performed:
  the old approval never covers the edited arguments;
- ``reject`` / ``respond``: the reviewer denies the proposal with the message; the model reads
  the denial, the message as its ``note``.

LangGraph re-runs the paused node from its start on resume and hands the first resume value
given to a paused checkpoint to every later resume of it; a repeat proposes, decides and
performs nothing new (``replayed``), and the grants and the reviewer always come from the
resume at hand, so a resume without a grant can be followed by one with it. The tool's own
function never runs: a ledger call that reaches the tools node without the review is refused.

A call's proposal is scoped to its conversation: the graph's ``thread_id`` and the checkpoint
namespace's node path (without LangGraph's per-task ids). The same tool-call id in two threads
is two proposals; the same call re-run or resumed in one thread is one, and a grant of another
thread's call is refused (``digest_mismatch``) instead of answering with that thread's result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from effectledger import (
    ActionHandle,
    Context,
    DenialReason,
    EffectLedger,
    EffectOutcome,
    EffectResult,
    Proposal,
)
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    Grant,
    LedgerGate,
    refusal,
    require_context,
    result_text,
)
from effectledger.errors import (
    ApprovalRefused,
    EffectLedgerError,
    InvalidInput,
    NotPermitted,
    OperationIdTaken,
)
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents.middleware.types import ToolCallRequest
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command, Interrupt

__all__ = ["DECISIONS", "LEDGER_KEY", "LedgerMiddleware", "ReviewResponse", "ledger_middleware"]

LEDGER_KEY = "effectledger"
"""The key of an action request under which the ledger's part of the call rides."""
DECISIONS = ("approve", "edit", "reject", "respond")
"""LangChain's human-in-the-loop decision types, all allowed by default."""
FRAMEWORK = "langgraph"

ContextOf = Callable[[Any], object]
GrantsOf = Callable[[Any], object]
ReviewerOf = Callable[[Any], object]
Answer = tuple[EffectResult | EffectLedgerError, str | None]

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


def conversation_scope(thread_id: object, checkpoint_ns: object) -> str:
    """The scope of a call in thread ``thread_id`` at namespace ``checkpoint_ns``: the thread
    and the nodes' path (``tools``, ``agent|tools``), LangGraph's task ids left out."""
    if thread_id is None or not str(thread_id):
        raise InvalidInput(
            "a LangGraph run of a ledger tool needs a thread: invoke with a checkpointer and "
            'config={"configurable": {"thread_id": ...}}',
            field="thread_id",
        )
    return json.dumps([str(thread_id), _node_path(checkpoint_ns)], separators=(",", ":"))


def _node_path(checkpoint_ns: object) -> str:
    """``tools:1f0c...`` -> ``tools``; ``agent:ab|tools:cd`` -> ``agent|tools``."""
    return "|".join(part.split(":", 1)[0] for part in str(checkpoint_ns or "").split("|") if part)


def context_attribute(runtime_context: Any) -> object:
    """The host's identity in ``runtime.context``: itself, or its ``context`` attribute."""
    if isinstance(runtime_context, Context):
        return runtime_context
    return getattr(runtime_context, "context", None)


def grants_attribute(runtime_context: Any) -> object:
    """The grants of this resume in ``runtime.context``: its ``grants`` attribute, if any."""
    return (
        None if isinstance(runtime_context, Context) else getattr(runtime_context, "grants", None)
    )


def reviewer_attribute(runtime_context: Any) -> object:
    """The reviewer of this resume in ``runtime.context``: its ``reviewer`` attribute, if any."""
    if isinstance(runtime_context, Context):
        return None
    return getattr(runtime_context, "reviewer", None)


class LedgerMiddleware:
    """The tool of a ledger action (``.tool``) and the agent middleware (``.middleware``)."""

    def __init__(
        self,
        ledger: EffectLedger,
        action: ActionHandle | Action | str,
        *,
        context_of: ContextOf = context_attribute,
        grants_of: GrantsOf = grants_attribute,
        reviewer_of: ReviewerOf = reviewer_attribute,
        allowed_decisions: Sequence[str] = DECISIONS,
    ) -> None:
        require_extra("langgraph", "The LangGraph adapter")
        from langchain.agents.middleware import AgentMiddleware
        from langchain_core.tools import StructuredTool

        unknown = sorted(set(allowed_decisions) - set(DECISIONS))
        if unknown or not allowed_decisions:
            raise InvalidInput(
                f"allowed_decisions are some of {', '.join(DECISIONS)}", field="allowed_decisions"
            )
        self.gate = LedgerGate(ledger, action, framework=FRAMEWORK)
        self.allowed_decisions = list(dict.fromkeys(allowed_decisions))
        self._context_of = context_of
        self._grants_of = grants_of
        self._reviewer_of = reviewer_of
        self.tool = StructuredTool.from_function(
            func=_unreachable,
            name=self.gate.name,
            description=self.gate.action.description or f"Propose {self.gate.name}.",
            args_schema=self.gate.action.arguments,
        )
        outer = self

        class EffectLedgerMiddleware(AgentMiddleware):
            """Pauses a turn's calls of the ledger tool for review and performs them."""

            tools = [outer.tool]  # noqa: RUF012 - the class attribute LangChain reads

            @property
            def name(self) -> str:
                return f"effectledger_{outer.gate.name}"  # one node per action, never shared

            def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
                return outer._review(state, runtime)

            async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
                return outer._review(state, runtime)

            def wrap_tool_call(
                self,
                request: ToolCallRequest,
                handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
            ) -> ToolMessage | Command[Any]:
                if request.tool_call["name"] != outer.gate.name:
                    return handler(request)
                return _unreviewed(request.tool_call)

            async def awrap_tool_call(
                self,
                request: ToolCallRequest,
                handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
            ) -> ToolMessage | Command[Any]:
                if request.tool_call["name"] != outer.gate.name:
                    return await handler(request)
                return _unreviewed(request.tool_call)

        self.middleware: AgentMiddleware = EffectLedgerMiddleware()

    # -- the host's side ---------------------------------------------------------------------

    def proposals(
        self, context: Context, interrupt: Interrupt | Mapping[str, Any]
    ) -> dict[str, Proposal]:
        """The proposals a pause shows, by tool-call id, as the ledger records them for
        ``context`` (the interrupt's own copy is never trusted)."""
        value = interrupt if isinstance(interrupt, Mapping) else interrupt.value
        requests = value.get("action_requests") if isinstance(value, Mapping) else None
        if not isinstance(requests, list):
            raise InvalidInput("this interrupt is not a human-in-the-loop request")
        found: dict[str, Proposal] = {}
        for request in requests:
            ours = request.get(LEDGER_KEY) if isinstance(request, Mapping) else None
            if request.get("name") != self.gate.name or not isinstance(ours, Mapping):
                continue
            call_id, proposal_id = ours.get("tool_call_id"), ours.get("proposal_id")
            if not isinstance(call_id, str) or not isinstance(proposal_id, str):
                raise InvalidInput("an action request names no ledger proposal", field=LEDGER_KEY)
            found[call_id] = self.gate.ledger.proposal(context, proposal_id)
        return found

    def proposal(self, context: Context, interrupt: Interrupt | Mapping[str, Any]) -> Proposal:
        """The one proposal of a pause that shows one call of this action."""
        found = list(self.proposals(context, interrupt).values())
        if len(found) != 1:
            raise InvalidInput(f"this interrupt shows {len(found)} calls of {self.gate.name}")
        return found[0]

    @staticmethod
    def resume(decisions: Mapping[str, Sequence[Mapping[str, Any]]]) -> Command[Any]:
        """The ``Command`` that resumes paused reviews, by interrupt id, with their decisions
        (``HITLResponse``: one per action request, in order)."""
        from langgraph.types import Command

        return Command(
            resume={
                key: {"decisions": [dict(d) for d in found]} for key, found in decisions.items()
            }
        )

    # -- the pause and the decisions ---------------------------------------------------------

    def _review(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        from langchain_core.messages import AIMessage
        from langgraph.config import get_config
        from langgraph.types import interrupt

        messages = list(state.get("messages") or [])
        at = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)),
            None,
        )
        if at is None:
            return None
        # a call another middleware answered already (a rejection) is not this review's
        answered = {getattr(m, "tool_call_id", None) for m in messages[at + 1 :]}
        calls = [
            c
            for c in messages[at].tool_calls
            if c["name"] == self.gate.name and c["id"] not in answered
        ]
        if not calls:
            return None
        host = None if runtime is None else runtime.context
        answers: dict[str, Answer] = {}
        shown: list[tuple[Any, Proposal]] = []
        try:
            # the identity is checked before the pause and again on every resume
            who = require_context(
                self._context_of(host), "a LangGraph run (invoke(..., context=...))"
            )
            configurable = get_config().get("configurable") or {}
            scope = conversation_scope(
                configurable.get("thread_id"), configurable.get("checkpoint_ns")
            )
        except EffectLedgerError as exc:
            return _messages(calls, {str(call["id"]): (exc, None) for call in calls})
        grants = self._grants_of(host)
        for call in calls:
            named = _named_elsewhere(grants, str(call["id"]), who)
            if named is not None:  # this resume's grant is addressed to another tenant
                answers[str(call["id"])] = (
                    self.gate.ledger.perform(who, named.proposal_id, tenant_id=named.tenant_id),
                    None,
                )
                continue
            try:
                shown.append(
                    (call, self.gate.propose(who, str(call["id"]), call["args"], scope=scope))
                )
            except OperationIdTaken:  # this call was proposed with other arguments
                answers[str(call["id"])] = (refusal(DenialReason.DIGEST_MISMATCH), None)
            except EffectLedgerError as exc:
                answers[str(call["id"])] = (exc, None)
        if shown:
            response = interrupt(self._request(shown), response_schema=ReviewResponse)
            decisions = [d.model_dump(exclude_none=True) for d in response.decisions]
            for index, (call, proposal) in enumerate(shown):
                if len(decisions) != len(shown):
                    answers[str(call["id"])] = (
                        InvalidInput(
                            f"the review shows {len(shown)} calls and got {len(decisions)} "
                            "decisions",
                            field="decisions",
                        ),
                        None,
                    )
                    continue
                try:
                    answers[str(call["id"])] = self._decide(
                        who, host, call, proposal, decisions[index], scope
                    )
                except EffectLedgerError as exc:
                    answers[str(call["id"])] = (exc, None)
        return _messages(calls, answers)

    def _request(self, shown: Sequence[tuple[Any, Proposal]]) -> dict[str, Any]:
        """LangChain's ``HITLRequest`` for the proposed calls, the ledger's part with each."""
        requests, configs = [], []
        for call, proposal in shown:
            arguments = dict(proposal.arguments)
            requests.append(
                {
                    "name": self.gate.name,
                    "args": arguments,
                    "description": (
                        f"Approve {self.gate.name} as proposed?\n\n"
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
            configs.append(
                {"action_name": self.gate.name, "allowed_decisions": list(self.allowed_decisions)}
            )
        return {"action_requests": requests, "review_configs": configs}

    def _decide(
        self,
        who: Context,
        host: Any,
        call: Mapping[str, Any],
        proposal: Proposal,
        decision: Mapping[str, Any],
        scope: str,
    ) -> Answer:
        kind = decision.get("type")
        if kind not in self.allowed_decisions:
            raise InvalidInput(
                f"decision {kind!r} is not allowed for {self.gate.name}: one of "
                f"{', '.join(self.allowed_decisions)}",
                field="decisions",
            )
        call_id = str(call["id"])
        if kind == "approve":
            grant = _grant_for(self._grants_of(host), call_id)
            return self.gate.perform(
                who, grant, tool_name=call["name"], arguments=call["args"], call=(call_id, scope)
            ), None
        reviewer = require_context(
            self._reviewer_of(host), f"a reviewer's {kind} decision (the host's reviewer Context)"
        )
        if kind == "edit":
            return self._edit(who, reviewer, call_id, proposal, decision, scope)
        message = decision.get("message")
        reason = (
            message if isinstance(message, str) and message.strip() else "denied by the reviewer"
        )
        self._decided(reviewer, proposal, approve=False, reason=reason)
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


def ledger_middleware(
    ledger: EffectLedger,
    action: ActionHandle | Action | str,
    *,
    context_of: ContextOf = context_attribute,
    grants_of: GrantsOf = grants_attribute,
    reviewer_of: ReviewerOf = reviewer_attribute,
    allowed_decisions: Sequence[str] = DECISIONS,
) -> LedgerMiddleware:
    """The gate of ``action`` for ``create_agent(model, middleware=[m.middleware], ...)``.

    From ``runtime.context`` (the object given as ``invoke(..., context=...)``) ``context_of``
    reads the host's :class:`~effectledger.Context` (default: the context itself or its
    ``context`` attribute), ``grants_of`` the grants of this resume by tool-call id (its
    ``grants`` attribute) and ``reviewer_of`` the reviewer's Context (its ``reviewer``
    attribute). ``allowed_decisions`` is what each review config offers.
    """
    return LedgerMiddleware(
        ledger,
        action,
        context_of=context_of,
        grants_of=grants_of,
        reviewer_of=reviewer_of,
        allowed_decisions=allowed_decisions,
    )


def _grant_for(grants: object, call_id: str) -> Any:
    """The grant this resume's ``grants`` hold for ``call_id`` (a proposal as its grant)."""
    grant = grants.get(call_id) if isinstance(grants, Mapping) else None
    return Grant.of(grant) if isinstance(grant, Proposal) else grant


def _named_elsewhere(grants: object, call_id: str, who: Context) -> Grant | None:
    """The grant of ``call_id`` in this resume's ``grants`` when it names a tenant other than
    ``who``'s: stopped at the tenant step before anything is proposed or read."""
    try:
        found = Grant.coerce(_grant_for(grants, call_id))
    except EffectLedgerError:
        return None
    if found is None or found.tenant_id is None or found.tenant_id == who.tenant_id:
        return None
    return found


def _messages(calls: Sequence[Any], answers: Mapping[str, Answer]) -> dict[str, Any]:
    """The state update answering each call, in the order the model made them."""
    return {"messages": [_answer(call, *answers[str(call["id"])]) for call in calls]}


def _answer(
    call: Mapping[str, Any], outcome: EffectResult | EffectLedgerError, note: str | None
) -> ToolMessage:
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


def _unreviewed(call: Mapping[str, Any]) -> ToolMessage:
    """A ledger call that reached the tools node without its review: refused, nothing run."""
    return _answer(
        call,
        NotPermitted(
            "a ledger tool call runs only through its review; the agent's effectledger "
            "middleware answers it after the model's turn"
        ),
        None,
    )


def _unreachable(**arguments: Any) -> str:
    raise NotPermitted(
        "a ledger tool runs only through its effectledger middleware; add it to the agent"
    )
