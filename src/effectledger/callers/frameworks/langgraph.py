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

A resume only reads the proposals: the identity resuming finds its own proposals of the paused
calls, and one that proposed none of them (another actor of the tenant, another tenant) is
answered with the ledger's refusal for that identity, with nothing proposed or decided for it.
The request and response format lives in
:mod:`~effectledger.callers.frameworks.langchain_hitl`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from effectledger import ActionHandle, Context, DenialReason, EffectLedger, Proposal
from effectledger.actions import Action
from effectledger.callers.frameworks.gate import (
    Grant,
    LedgerGate,
    granted,
    refusal,
    require_context,
)
from effectledger.callers.frameworks.langchain_hitl import (
    DECISIONS,
    LEDGER_KEY,
    Answer,
    Decisions,
    ReviewResponse,
    messages,
    review_request,
    unreviewed,
)
from effectledger.errors import (
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

FRAMEWORK = "langgraph"

ContextOf = Callable[[Any], object]
GrantsOf = Callable[[Any], object]
ReviewerOf = Callable[[Any], object]


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


def resuming(configurable: Mapping[str, Any]) -> bool:
    """Whether the node running now resumes its pause: LangGraph holds a resume value for its
    first ``interrupt()`` (what ``interrupt()`` itself looks up, read without consuming it)."""
    from langgraph._internal._constants import CONFIG_KEY_SCRATCHPAD

    scratchpad = configurable.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is None:
        return False
    return bool(scratchpad.resume) or scratchpad.get_null_resume(False) is not None


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
        self.decisions = Decisions(self.gate, self.allowed_decisions)
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
                return unreviewed(request.tool_call)

            async def awrap_tool_call(
                self,
                request: ToolCallRequest,
                handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
            ) -> ToolMessage | Command[Any]:
                if request.tool_call["name"] != outer.gate.name:
                    return await handler(request)
                return unreviewed(request.tool_call)

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

        history = list(state.get("messages") or [])
        at = next(
            (i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], AIMessage)),
            None,
        )
        if at is None:
            return None
        # a call another middleware answered already (a rejection) is not this review's
        answered = {getattr(m, "tool_call_id", None) for m in history[at + 1 :]}
        calls = [
            c
            for c in history[at].tool_calls
            if c["name"] == self.gate.name and c["id"] not in answered
        ]
        if not calls:
            return None
        host = None if runtime is None else runtime.context
        answers: dict[str, Answer] = {}
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
            return messages(calls, {str(call["id"]): (exc, None) for call in calls})
        grants = self._grants_of(host)
        # The first pass proposes the calls; a resume reads the proposals of who resumes.
        recorded: dict[str, Proposal | None] = {}
        if resuming(configurable):
            recorded = {str(c["id"]): self.gate.recorded(who, str(c["id"]), scope) for c in calls}
            if not any(recorded.values()):  # who paused none of them: someone else's review
                return messages(
                    calls, {str(c["id"]): self._unpaused(who, grants, c) for c in calls}
                )
        shown: list[tuple[Any, Proposal]] = []
        for call in calls:
            call_id = str(call["id"])
            named = _named_elsewhere(grants, call_id, who)
            if named is not None:  # this resume's grant is addressed to another tenant
                answers[call_id] = (
                    self.gate.ledger.perform(who, named.proposal_id, tenant_id=named.tenant_id),
                    None,
                )
                continue
            found = recorded.get(call_id)
            if found is not None:
                shown.append((call, found))
                continue
            try:
                shown.append((call, self.gate.propose(who, call_id, call["args"], scope=scope)))
            except OperationIdTaken:  # this call was proposed with other arguments
                answers[call_id] = (refusal(DenialReason.DIGEST_MISMATCH), None)
            except EffectLedgerError as exc:
                answers[call_id] = (exc, None)
        if shown:
            request = review_request(self.gate.name, shown, self.allowed_decisions)
            response = interrupt(request, response_schema=ReviewResponse)
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
                    answers[str(call["id"])] = self.decisions.decide(
                        who,
                        call,
                        proposal,
                        decisions[index],
                        grants=grants,
                        reviewer=self._reviewer_of(host),
                        scope=scope,
                    )
                except EffectLedgerError as exc:
                    answers[str(call["id"])] = (exc, None)
        return messages(calls, answers)

    def _unpaused(self, who: Context, grants: object, call: Mapping[str, Any]) -> Answer:
        """The answer to a call resumed by an identity that did not pause it: with this
        resume's grant, the ledger's refusal for that identity (``actor_mismatch``,
        ``not_found``); without one, ``not_found``. Nothing is proposed or decided for it."""
        try:
            grant = granted(grants, str(call["id"]))
            if grant is None:
                return refusal(DenialReason.NOT_FOUND), None
            return self.gate.perform(
                who, grant, tool_name=call["name"], arguments=call["args"]
            ), None
        except EffectLedgerError as exc:
            return exc, None


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


def _named_elsewhere(grants: object, call_id: str, who: Context) -> Grant | None:
    """The grant of ``call_id`` in this resume's ``grants`` when it names a tenant other than
    ``who``'s: stopped at the tenant step before anything is proposed or read."""
    try:
        found = granted(grants, call_id)
    except EffectLedgerError:
        return None
    if found is None or found.tenant_id is None or found.tenant_id == who.tenant_id:
        return None
    return found


def _unreachable(**arguments: Any) -> str:
    raise NotPermitted(
        "a ledger tool runs only through its effectledger middleware; add it to the agent"
    )
