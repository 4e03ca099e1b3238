"""The HTTP API's request bodies, response shapes and JSON views of the ledger's records.

Request models are strict and closed: an unknown field, a wrong type or an id of the wrong shape
is refused before any service call. None of them has a tenant, actor or approver field: identity
comes from the API key only. Response models describe the bodies in the published OpenAPI; the
routes build the bodies with the ``*_json`` functions below.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from effectledger.audit.explain import Sentence
from effectledger.model.authority import CORRELATION_PATTERN, Approval, CapacityUsage, Proposal
from effectledger.model.json_text import whole_numbers
from effectledger.model.operations import AuditEvent, Operation

__all__ = [
    "ID_PATTERN",
    "ApproveRequest",
    "DenyRequest",
    "ErrorBody",
    "PerformRequest",
    "ProposeRequest",
    "approval_json",
    "capacity_json",
    "event_json",
    "operation_json",
    "proposal_json",
    "sentence_json",
]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
"""An id in a URL path or body: the ledger's identifiers without ``/`` (a path segment)."""

Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=128)]
REASON_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
"""A reason as the ledger accepts it (not blank, no NUL), as a JSON Schema pattern in the
dialect every validator and generator shares. A lone surrogate, the third case the ledger
refuses, cannot be written in a pattern that Rust-based validators compile (they drop the whole
pattern, rules and all): :data:`REASON_RULE` states it in the field's description instead."""
REASON_RULE = (
    "Not blank, and without NUL (the pattern) or a lone surrogate such as \\ud800 (which I-JSON, "
    "RFC 7493, forbids and the ledger refuses)."
)
Digest = Annotated[str, Field(pattern=r"^(v[0-9]+:)?[0-9a-f]{64}$")]  # a v1 or v2 digest
_CLOSED = ConfigDict(extra="forbid", strict=True, frozen=True)


CorrelationText = Annotated[str, Field(pattern=CORRELATION_PATTERN)]
"""A correlation string: the ledger's own rule, declared so a client sees it."""


class CorrelationBody(BaseModel):
    """Where a proposal came from (for investigators; never part of the digest)."""

    model_config = _CLOSED

    trace_id: CorrelationText | None = None
    tool_call_id: CorrelationText | None = None
    framework: CorrelationText | None = None
    framework_version: CorrelationText | None = None
    tool_schema_version: CorrelationText | None = None
    prompt_version: CorrelationText | None = None


class ProposeRequest(BaseModel):
    """Propose one action with its arguments (validated by the action's own model)."""

    model_config = _CLOSED

    action: Identifier
    arguments: dict[str, Any]
    operation_id: Identifier | None = None
    correlation: CorrelationBody | None = None
    stated_reason: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=2000,
            description="The reason the agent gave (untrusted text, shown to reviewers as the "
            f"agent's; never part of the digest). {REASON_RULE}",
            # The ledger's rule, stated in the schema; enforced by the ledger.
            json_schema_extra={"pattern": REASON_PATTERN},
        ),
    ] = None


class ApproveRequest(BaseModel):
    """Approve the proposal with exactly this digest (the one the approver was shown)."""

    model_config = _CLOSED

    digest: Digest
    # 3600.0 is 3600, as JSON Schema counts it; 3600.5 is refused by the strict int.
    expires_in_s: Annotated[int, Field(ge=1, le=366 * 86_400), BeforeValidator(whole_numbers)] = (
        3600
    )

    @property
    def expires_in(self) -> timedelta:
        """The approval's lifetime."""
        return timedelta(seconds=self.expires_in_s)


class DenyRequest(BaseModel):
    """Deny the proposal with exactly this digest, saying why."""

    model_config = _CLOSED

    digest: Digest
    reason: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description=f"Why the proposal is denied, shown to the agent. {REASON_RULE}",
            # What the ledger checks (check_reason), stated in the schema. Enforced by the
            # ledger, not by this model's validator.
            json_schema_extra={"pattern": REASON_PATTERN},
        ),
    ]


class PerformRequest(BaseModel):
    """Perform a proposal on an approval (omit it for a pre-authorized action).

    ``tenant_id``, when given, is the tenant the caller means to act in: a request naming another
    tenant than the key's is denied (``tenant_mismatch``); it can never widen the key's authority.
    """

    model_config = _CLOSED

    approval_id: Identifier | None = None
    tenant_id: Identifier | None = None


class ErrorBody(BaseModel):
    """Every error: a stable ``code``, a message for people, non-secret ``details``."""

    code: str
    message: str
    details: dict[str, Any]


class ProposalBody(BaseModel):
    """A recorded proposal, exactly as an approver is shown it."""

    proposal_id: str
    operation_id: str
    tenant_id: str
    proposer_id: str
    action: str
    contract_version: str
    target: str
    resource_version: str
    arguments: dict[str, Any]
    units: int
    pool: str
    policy_version: str
    expires_at: str
    created_at: str
    digest: str
    correlation: dict[str, str]
    stated_reason: str | None


class ApprovalBody(BaseModel):
    """A recorded decision bound to one proposal digest."""

    approval_id: str
    proposal_id: str
    digest: str
    granted: bool
    approver_id: str
    policy_version: str
    reason: str | None
    decided_at: str
    expires_at: str


class EffectResultBody(BaseModel):
    """What a perform did: ``performed``, ``refused`` (dispatched, nothing accepted:
    ``rejection`` says why), ``replayed`` or ``released`` (denials are errors)."""

    outcome: str
    operation_id: str | None
    state: str | None
    reason: str | None
    provider_reference: str | None
    uncertain: bool
    rejection: str | None = None
    note: str | None = None
    trace: list[list[str]]


class StatusBody(BaseModel):
    """An operation's recorded state; ``uncertain``: the effect may or may not have happened."""

    operation_id: str
    state: str
    provider_reference: str | None
    attempt_id: str | None
    uncertain: bool


class OperationBody(BaseModel):
    """One operation of the tenant."""

    operation_id: str
    state: str
    uncertain: bool
    requester_id: str
    action: str
    contract_version: str
    proposal_id: str | None
    approval_id: str | None
    provider_reference: str | None
    pool: str | None
    units: int
    created_at: str
    updated_at: str


class EventBody(BaseModel):
    """One hash-linked audit event."""

    event_id: str
    sequence: int
    event_type: str
    actor: str
    recorded_at: str
    attempt_id: str | None
    evidence_reference: str | None
    observation_id: str | None
    details: dict[str, Any]
    prev_hash: str
    event_hash: str


class SentenceBody(BaseModel):
    """One sentence of an explanation and the event it rests on."""

    text: str
    sequence: int
    event_id: str


class ExplanationBody(BaseModel):
    """A plain-language account of an operation, every sentence citing its event."""

    operation_id: str
    sentences: list[SentenceBody]


class CapacityBody(BaseModel):
    """Units of one pool: held by unresolved operations, committed by successes, freed."""

    pool: str
    held: int
    committed: int
    freed: int
    limit: int | None
    available: int | None


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    """The JSON body of a proposal."""
    return {
        "proposal_id": proposal.proposal_id,
        "operation_id": proposal.operation_id,
        "tenant_id": proposal.tenant_id,
        "proposer_id": proposal.proposer_id,
        "action": proposal.action,
        "contract_version": proposal.contract_version,
        "target": proposal.target,
        "resource_version": proposal.resource_version,
        "arguments": dict(proposal.arguments),
        "units": proposal.units,
        "pool": proposal.pool,
        "policy_version": proposal.policy_version,
        "expires_at": proposal.expires_at.isoformat(),
        "created_at": proposal.created_at.isoformat(),
        "digest": proposal.digest,
        "correlation": dict(proposal.correlation),
        "stated_reason": proposal.stated_reason,
    }


def approval_json(approval: Approval) -> dict[str, Any]:
    """The JSON body of a decision."""
    return {
        "approval_id": approval.approval_id,
        "proposal_id": approval.proposal_id,
        "digest": approval.digest,
        "granted": approval.granted,
        "approver_id": approval.approver_id,
        "policy_version": approval.policy_version,
        "reason": approval.reason,
        "decided_at": approval.decided_at.isoformat(),
        "expires_at": approval.expires_at.isoformat(),
    }


def operation_json(operation: Operation) -> dict[str, Any]:
    """The JSON body of one operation in a list."""
    return {
        "operation_id": operation.operation_id,
        "state": operation.state.value,
        "uncertain": operation.state.uncertain,
        "requester_id": operation.requester_id,
        "action": operation.command.action,
        "contract_version": operation.command.contract_version,
        "proposal_id": operation.proposal_id,
        "approval_id": operation.approval_id,
        "provider_reference": operation.provider_reference,
        "pool": operation.pool,
        "units": operation.units,
        "created_at": operation.created_at.isoformat(),
        "updated_at": operation.updated_at.isoformat(),
    }


def event_json(event: AuditEvent) -> dict[str, Any]:
    """The JSON body of one audit event."""
    return {
        "event_id": event.event_id,
        "sequence": event.sequence,
        "event_type": event.event_type,
        "actor": event.actor,
        "recorded_at": event.recorded_at.isoformat(),
        "attempt_id": event.attempt_id,
        "evidence_reference": event.evidence_reference,
        "observation_id": event.observation_id,
        "details": dict(event.details),
        "prev_hash": event.prev_hash,
        "event_hash": event.event_hash,
    }


def sentence_json(sentence: Sentence) -> dict[str, Any]:
    """The JSON body of one explanation sentence."""
    return {"text": sentence.text, "sequence": sentence.sequence, "event_id": sentence.event_id}


def capacity_json(usage: CapacityUsage) -> dict[str, Any]:
    """The JSON body of a pool's usage."""
    return {
        "pool": usage.pool,
        "held": usage.held,
        "committed": usage.committed,
        "freed": usage.freed,
        "limit": usage.limit,
        "available": usage.available,
    }
