"""The gate every framework adapter shares: the ledger decides at execution time.

A framework's own approval pause (an interrupt, a deferred call, an approval request) only
carries a :class:`Grant` — the proposal's id and the digest the reviewer approved — or nothing
when the host keeps it. When the framework is about to run the call, :meth:`LedgerGate.perform`
validates the arguments it is about to run (``invalid_input`` naming the field), rereads the
proposal as the identity the host supplies on this resume, refuses if the tool name or the
arguments are not the proposal's (an edited saved state: ``digest_mismatch``), and performs
through :meth:`EffectLedger.perform`: once, a repeat answers ``replayed``. The framework's tool
body is never the effect. Its own refusals carry the trace steps every caller's do.

The identity comes from the application's own context object (a run context, ``deps``, the
keyword arguments of a resume), read by a :data:`ContextOf`: by default
:func:`ledger_context_of`, which takes the :class:`Context` itself or an object with a
``ledger_context`` attribute (:class:`CarriesLedgerContext`) or a ``context`` attribute.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

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

__all__ = [
    "CarriesLedgerContext",
    "ContextOf",
    "Grant",
    "LedgerGate",
    "granted",
    "host_context",
    "ledger_context_of",
    "refusal",
    "require_context",
    "require_scope",
    "result_text",
]

ContextOf = Callable[[Any], Context | None]
"""Reads the ledger's :class:`Context` from an application's own context object, or None when
it carries no identity (then the call is refused, ``not_authenticated``, nothing written)."""


@runtime_checkable
class CarriesLedgerContext(Protocol):
    """An application's own context object that carries the ledger's identity of its run.

    Any object with a ``ledger_context`` attribute holding the host's :class:`Context` (a
    dataclass field, a property) is one; the adapters read it with no ``context_of=`` given.
    """

    @property
    def ledger_context(self) -> Context | None:
        """The host's authenticated identity for this run, or None."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """What a pause carries for one tool call: the proposal and the digest that was approved.

    ``approval_id`` names one approval to present; without it the decision recorded on the
    proposal's trail is used (see :meth:`EffectLedger.perform`). ``tenant_id`` names the tenant
    the grant is addressed to: compared first with the resuming identity's tenant, another one is
    ``tenant_mismatch`` with nothing read; it can only narrow what the identity reaches.
    """

    proposal_id: str
    digest: str
    approval_id: str | None = None
    tenant_id: str | None = None

    @classmethod
    def of(cls, proposal: Proposal) -> Grant:
        """The grant of ``proposal`` as recorded, addressed to its tenant."""
        return cls(
            proposal_id=proposal.proposal_id, digest=proposal.digest, tenant_id=proposal.tenant_id
        )

    @classmethod
    def coerce(cls, value: object) -> Grant | None:
        """``value`` as a grant: one already, its mapping (a resume value, metadata) or None."""
        if value is None or isinstance(value, Grant):
            return value
        if isinstance(value, Mapping):
            proposal_id, digest = value.get("proposal_id"), value.get("digest")
            approval_id, tenant_id = value.get("approval_id"), value.get("tenant_id")
            if (
                isinstance(proposal_id, str)
                and isinstance(digest, str)
                and (approval_id is None or isinstance(approval_id, str))
                and (tenant_id is None or isinstance(tenant_id, str))
            ):
                return cls(
                    proposal_id=proposal_id,
                    digest=digest,
                    approval_id=approval_id,
                    tenant_id=tenant_id,
                )
        raise InvalidInput("a grant is a proposal_id and a digest", field="grant")

    def to_dict(self) -> dict[str, str]:
        """The grant as the plain mapping a pause or a resume value carries."""
        data = {"proposal_id": self.proposal_id, "digest": self.digest}
        if self.approval_id is not None:
            data["approval_id"] = self.approval_id
        if self.tenant_id is not None:
            data["tenant_id"] = self.tenant_id
        return data


def granted(grants: object, call_id: str) -> Grant | None:
    """The grant a host's ``grants`` (a mapping by tool-call id of :class:`Grant`, a proposal
    or its mapping) hold for ``call_id``, or None; :class:`InvalidInput` for one malformed."""
    found = grants.get(call_id) if isinstance(grants, Mapping) else None
    return Grant.of(found) if isinstance(found, Proposal) else Grant.coerce(found)


def ledger_context_of(app_context: object) -> Context | None:
    """The ledger's identity an application's context carries: the object itself if it is a
    :class:`Context`, else its ``ledger_context`` attribute, else its ``context`` attribute
    (the adapters' ``HostRun``, earlier hosts); None when none of them is a Context."""
    if isinstance(app_context, Context):
        return app_context
    for name in ("ledger_context", "context"):
        value = getattr(app_context, name, None)
        if isinstance(value, Context):
            return value
    return None


def host_context(app_context: object, context_of: ContextOf, where: str) -> Context:
    """The host's :class:`Context`: ``app_context`` itself if it is one, else read from it by
    ``context_of``; else :class:`NotAuthenticated` saying what ``where`` needs.

    A ``context_of`` that fails on the object it is given (an attribute or key it lacks: the
    plain data a saved state restores instead of the application's object) reads as no
    identity, so the call is refused rather than raised into the framework.
    """
    if isinstance(app_context, Context):
        return app_context
    try:
        found = None if app_context is None else context_of(app_context)
    except (AttributeError, KeyError, TypeError):
        found = None
    return require_context(found, where)


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

        Arguments the action does not take are :class:`InvalidInput` naming the field, as at
        execution; different arguments under the same tool-call id are refused
        (``operation_id_taken``). Neither writes anything.
        """
        context = require_context(context, f"{self.framework} propose")
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidInput("a tool call needs its id", field="tool_call_id")
        self.validated(arguments)
        return self.ledger.propose(
            context,
            self.action.name,
            dict(arguments),
            operation_id=self.operation_id(context, tool_call_id, scope),
            correlation=Correlation(tool_call_id=tool_call_id[:256], framework=self.framework),
        )

    def recorded(self, context: Context, tool_call_id: str, scope: str = "") -> Proposal | None:
        """The proposal ``context`` recorded for this tool call in conversation ``scope``, or
        None when it proposed none: a read, nothing written (another actor of the tenant, or
        another tenant, finds none of ``context``'s calls)."""
        try:
            return self.ledger.proposal_for(
                context, self.operation_id(context, tool_call_id, scope)
            )
        except NotFound:
            return None

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

        The refusals come in one order, each writing nothing: ``context``, the host's identity
        on this resume, missing is :class:`NotAuthenticated`, before anything is read; arguments
        the action does not take (a field it does not have, such as ``approved_by`` or
        ``tenant_id``, or a value of the wrong type) are :class:`InvalidInput` naming the field;
        a call without a grant has no approval (``approval_missing``); valid arguments, a name
        or a digest other than the proposal's are ``digest_mismatch``. ``call``, the
        ``(tool_call_id, scope)`` the framework runs now when it knows them, binds the grant to
        this call: a grant of the same call id and arguments in another conversation is
        ``digest_mismatch`` too, never that conversation's recorded result. A proposal
        ``context`` cannot see goes to the ledger, which gives its own refusal.
        """
        who = require_context(context, f"{self.framework} tool execution")
        if tool_name != self.action.name:
            return refusal(DenialReason.DIGEST_MISMATCH)
        normalized = self.validated(arguments)
        found = Grant.coerce(grant)
        if found is None:
            return refusal(DenialReason.APPROVAL_MISSING)
        addressed = found.tenant_id
        if addressed is not None and addressed != who.tenant_id:
            # Another tenant named: the ledger stops at its tenant step, nothing is read.
            return self.ledger.perform(who, found.proposal_id, tenant_id=addressed)
        try:
            proposal = self.ledger.proposal(who, found.proposal_id)
        except NotFound:
            return self.ledger.perform(
                who, found.proposal_id, approval=found.approval_id, tenant_id=addressed
            )
        if (
            proposal.digest != found.digest
            or proposal.action != tool_name
            or normalized != dict(proposal.arguments)
            or (call is not None and proposal.operation_id != self.operation_id(who, *call))
        ):
            return refusal(DenialReason.DIGEST_MISMATCH)
        return self.ledger.perform(who, proposal, approval=found.approval_id, tenant_id=addressed)

    def validated(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``arguments`` as the action takes them (normalized), or :class:`InvalidInput` whose
        ``field`` names the first one at fault (``problems`` lists them all)."""
        if not isinstance(arguments, Mapping):
            raise InvalidInput(f"{self.name} takes an object of arguments", field="arguments")
        try:
            model = self.action.validate(arguments)
        except InvalidInput as exc:
            problems = exc.details.get("problems") or [{"field": "arguments"}]
            raise InvalidInput(
                exc.message, field=str(problems[0]["field"]), **exc.details
            ) from None
        normalized: dict[str, Any] = model.model_dump(mode="json")
        return normalized


def refusal(reason: DenialReason) -> EffectResult:
    """The gate's refusal: nothing admitted, nothing sent, nothing written.

    Its trace is the one :meth:`EffectLedger.perform` gives the same refusal (request
    received, tenant accepted, reservation denied), so a caller's trace never depends on
    which of the two said no.
    """
    return EffectResult(
        outcome=EffectOutcome.DENIED,
        operation_id=None,
        state=None,
        reason=reason,
        provider_reference=None,
        trace=(
            TraceStep("request", "received"),
            TraceStep("tenant", "accepted"),
            TraceStep("reservation", f"denied:{reason.value}"),
        ),
    )


def result_text(result: EffectResult) -> str:
    """The result as the JSON text a model reads back from the tool."""
    return json.dumps(result.to_dict(), separators=(",", ":"))
