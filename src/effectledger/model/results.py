"""What a request to perform an effect came to: the result record and its enums.

:class:`EffectResult` is what ``perform`` returns, with its ordered domain trace of
:class:`TraceStep`; :class:`EffectOutcome` and :class:`DenialReason` say how it came out and why
a refusal was given. The string values are the stable codes of the JSON bodies the tools and the
HTTP API return; being :class:`enum.StrEnum` members, they compare equal to those strings.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from effectledger.errors import AdmissionDenied
from effectledger.model.operations import OperationState

__all__ = ["DenialReason", "EffectOutcome", "EffectResult", "TraceStep"]


class EffectOutcome(enum.StrEnum):
    """How one call to perform (or reconcile) an effect came out.

    ``PERFORMED``: this call admitted and dispatched it, and the destination did not refuse it
    (SUCCEEDED, or uncertain). ``REFUSED``: this call dispatched it and the destination accepted
    nothing (REJECTED or RETRY_PENDING; ``rejection`` says why). ``REPLAYED``: it was already
    admitted; the recorded state is reported and nothing was sent. ``RELEASED``: it failed the
    dispatch-time recheck and was never sent. ``DENIED``: authority did not cover it; nothing
    exists and nothing was spent. ``RECONCILED`` / ``UNRESOLVED``: a recovery pass settled it, or
    did not yet.
    """

    PERFORMED = "performed"
    REFUSED = "refused"
    REPLAYED = "replayed"
    RELEASED = "released"
    DENIED = "denied"
    RECONCILED = "reconciled"
    UNRESOLVED = "unresolved"


class DenialReason(enum.StrEnum):
    """The stable reason an admission was refused (see ``docs/authority.md``).

    ``NOT_FOUND``: the proposal does not exist for the caller's tenant; an unknown id and another
    tenant's id give the same answer.
    """

    ACTOR_MISMATCH = "actor_mismatch"
    TENANT_MISMATCH = "tenant_mismatch"
    EXPIRED = "expired"
    STALE_RESOURCE_VERSION = "stale_resource_version"
    DIGEST_MISMATCH = "digest_mismatch"
    APPROVAL_MISSING = "approval_missing"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_CONSUMED = "approval_consumed"
    CAPACITY_EXCEEDED = "capacity_exceeded"
    POLICY_DENIED = "policy_denied"
    NOT_FOUND = "not_found"


_UNCERTAIN = frozenset(state for state in OperationState if state.uncertain)


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of the domain trace: what was attempted and how it came out."""

    step: str
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectResult:
    """The outcome of one request to perform an approved effect.

    ``outcome`` is :class:`EffectOutcome` ``performed`` (dispatched now), ``replayed`` (already
    admitted: its recorded state is reported), ``released`` (failed the dispatch-time recheck,
    never sent), ``refused`` (dispatched now, and the destination accepted nothing:
    ``rejection`` holds its reason code) or ``denied`` (``reason`` holds the
    :class:`DenialReason`). ``state`` is the operation's state when one exists; ``uncertain`` is
    true while the effect may or may not have happened. Plain strings given for ``outcome`` and
    ``reason`` are turned into the enums.
    """

    outcome: EffectOutcome
    operation_id: str | None
    state: OperationState | None
    reason: DenialReason | None
    provider_reference: str | None
    trace: tuple[TraceStep, ...]
    rejection: str | None = None
    note: str | None = None
    """For ``approval_denied``: the reason the approver gave, their words to the proposer."""

    def __post_init__(self) -> None:
        # Strings are accepted so that every producer yields the enums, whatever it passed.
        if type(self.outcome) is not EffectOutcome:
            object.__setattr__(self, "outcome", EffectOutcome(self.outcome))
        if self.reason is not None:
            object.__setattr__(self, "reason", DenialReason(self.reason))

    @property
    def uncertain(self) -> bool:
        """True while the destination's effect is not established either way."""
        return self.state is not None and self.state.uncertain

    @property
    def denied(self) -> bool:
        """True when authority did not cover the effect (nothing was admitted or sent)."""
        return self.outcome is EffectOutcome.DENIED

    def raise_for_denial(self) -> EffectResult:
        """Raise :class:`AdmissionDenied` (with ``reason``) if denied; else return ``self``."""
        if self.outcome is EffectOutcome.DENIED:
            reason = self.reason or DenialReason.POLICY_DENIED
            details = {} if self.note is None else {"note": self.note}
            raise AdmissionDenied(
                f"the effect was denied: {reason.value}", reason=reason.value, **details
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for tools, HTTP bodies and MCP results)."""
        # ``_value_`` is the member's value without the ``value`` property's call: this runs on
        # every replay a tool or the HTTP API answers.
        state, reason = self.state, self.reason
        return {
            "outcome": self.outcome._value_,
            "operation_id": self.operation_id,
            "state": None if state is None else state._value_,
            "reason": None if reason is None else reason._value_,
            "provider_reference": self.provider_reference,
            "uncertain": state in _UNCERTAIN,
            "rejection": self.rejection,
            "note": self.note,
            "trace": [[step.step, step.outcome] for step in self.trace],
        }
