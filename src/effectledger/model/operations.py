"""Frozen records and enums shared by every part of effectledger.

Records are plain frozen dataclasses with keyword-only fields. Those built from stored rows on
the hot path (a replayed tool call reads one) validate nothing of their own; a :class:`Context`,
which comes from the host's authentication, checks its identifiers when it is built. Other input
from outside is validated where it enters (:mod:`effectledger.model.canonical`, the ledger's
admission checks).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from effectledger.errors import InvalidInput

if TYPE_CHECKING:
    from effectledger.model.evidence import Evidence

__all__ = [
    "Attempt",
    "AuditEvent",
    "Command",
    "Context",
    "DestinationRef",
    "DispatchResult",
    "Observation",
    "Operation",
    "OperationState",
    "Outcome",
    "PreparedAttempt",
    "Row",
    "from_micros",
    "is_identifier",
    "to_micros",
    "validate_identifier",
    "validate_limit",
]

Row = Mapping[str, Any]
"""A stored row as the store hands it over: column name to value."""

_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}")
_whole_identifier = _IDENTIFIER.fullmatch


def is_identifier(value: object) -> bool:
    """Whether ``value`` is a well-formed id (1-128 chars, ``[A-Za-z0-9._:@/-]``)."""
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


def validate_identifier(value: object, what: str) -> str:
    """Return ``value`` if it is a well-formed id (1-128 chars, ``[A-Za-z0-9._:@/-]``).

    Raises :class:`~effectledger.errors.InvalidInput` (code ``invalid_input``) otherwise, naming
    the field, so a malformed id never reaches a query.
    """
    # ``type() is`` first: the common case, a plain str, costs the match alone.
    if (type(value) is not str and not isinstance(value, str)) or _whole_identifier(value) is None:
        raise InvalidInput(
            f"{what} must be 1-128 characters of letters, digits and . _ : @ / -",
            field=what,
        )
    return value


MAX_LIMIT = 10_000


def validate_limit(value: object, what: str = "limit") -> int:
    """Return ``value`` if it is a page or batch size: an integer from 1 to 10,000.

    Raises :class:`~effectledger.errors.InvalidInput` naming the field otherwise (a string, a
    bool, zero or a negative number never means "everything").
    """
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(f"{what} must be an integer from 1 to {MAX_LIMIT}", field=what)
    return value


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch for an aware datetime (the stored time format)."""
    if moment.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime for a stored microsecond timestamp."""
    return _EPOCH + timedelta(microseconds=micros)


class OperationState(enum.StrEnum):
    """Where an admitted operation stands; see docs/design.md, "Operation states", and
    docs/states.md."""

    READY = "READY"
    IN_PROGRESS = "IN_PROGRESS"
    SUCCEEDED = "SUCCEEDED"
    REJECTED = "REJECTED"
    RETRY_PENDING = "RETRY_PENDING"
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
    MANUAL_REVIEW = "MANUAL_REVIEW"
    RELEASED = "RELEASED"

    @property
    def uncertain(self) -> bool:
        """True where the destination may or may not have performed the effect."""
        return self in (
            OperationState.IN_PROGRESS,
            OperationState.OUTCOME_UNKNOWN,
            OperationState.MANUAL_REVIEW,
        )


class Outcome(enum.StrEnum):
    """What a destination told us about one submission or lookup."""

    ACCEPTED = "Accepted"
    PERMANENT_REJECTION = "PermanentRejection"
    RETRYABLE_REJECTION = "RetryableRejection"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """The trusted caller: supplied by the host's authentication, never by model arguments."""

    tenant_id: str
    actor_id: str
    roles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        validate_identifier(self.tenant_id, "tenant_id")
        validate_identifier(self.actor_id, "actor_id")
        roles: object = self.roles
        if type(roles) is not frozenset:
            if isinstance(roles, str) or not isinstance(roles, (set, frozenset, list, tuple)):
                raise InvalidInput("roles must be a set of role names", field="roles")
            object.__setattr__(self, "roles", frozenset(roles))
        for role in self.roles:
            validate_identifier(role, "roles")


MAX_ENDPOINT_LENGTH = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationRef:
    """The external system an operation is bound to: compared exactly, case-sensitively.

    ``account_id`` is an identifier; ``endpoint`` is 1-512 printable characters (no control
    characters, no lone surrogates) and carries no credentials (no ``user:password@`` in a
    URL's authority). Anything else is refused with ``invalid_input`` naming the
    field, wherever a destination is named.
    """

    account_id: str
    endpoint: str

    def __post_init__(self) -> None:
        validate_identifier(self.account_id, "destination.account_id")
        endpoint: object = self.endpoint
        if (
            not isinstance(endpoint, str)
            or not 0 < len(endpoint) <= MAX_ENDPOINT_LENGTH
            or not endpoint.isprintable()
        ):
            raise InvalidInput(
                f"destination.endpoint must be 1-{MAX_ENDPOINT_LENGTH} printable characters",
                field="destination.endpoint",
            )
        if "://" in endpoint and "@" in endpoint.split("://", 1)[1].split("/", 1)[0]:
            # Userinfo would be stored in every row that names the destination.
            raise InvalidInput(
                "destination.endpoint must not carry credentials (user:password@)",
                field="destination.endpoint",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """The exact effect to perform: an action, its handler contract version and its arguments.

    ``arguments`` must be JSON-like (str, int, bool, None, lists, str-keyed mappings); floats are
    refused by the canonical encoding because they cannot be compared exactly.

    A claimed command also names what authorized it, so the destination can keep it with the
    effect and prove which approved action it performed: the operation, and where it was
    admitted on a proposal, the proposal, the consumed approval and the approved ``digest``.
    These are not part of the fingerprint, which covers the action, contract and arguments.
    """

    action: str
    contract_version: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    operation_id: str | None = None
    proposal_id: str | None = None
    approval_id: str | None = None
    digest: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """A destination's answer.

    ``Accepted`` must carry ``provider_reference`` and ``evidence_reference``; the ledger refuses it
    otherwise. ``observation_id``, when the destination supplies a stable one, lets a replayed
    observation be recognised in the audit trail. ``evidence``, when given, is the redacted answer
    itself: the ledger stores it with the event and uses its reference as ``evidence_reference``.
    ``reason``, when the adapter gives one, is its stable code for the answer (``permanent:422``,
    ``ConnectError``, ``no_http_action``); a caller is told it with a rejection.
    """

    outcome: Outcome
    provider_reference: str | None = None
    evidence_reference: str | None = None
    observation_id: str | None = None
    evidence: Evidence | None = None
    reason: str | None = None

    @classmethod
    def unknown(cls, evidence_reference: str | None = None) -> Observation:
        """An inconclusive answer: the effect may or may not have happened."""
        return cls(outcome=Outcome.UNKNOWN, evidence_reference=evidence_reference)

    @classmethod
    def accepted(cls, provider_reference: str, evidence_reference: str) -> Observation:
        """The destination performed the effect: its reference and where the proof is kept."""
        return cls(
            outcome=Outcome.ACCEPTED,
            provider_reference=provider_reference,
            evidence_reference=evidence_reference,
        )

    @classmethod
    def rejected(cls, evidence_reference: str | None = None) -> Observation:
        """The destination refused for good: the effect did not and will not happen."""
        return cls(outcome=Outcome.PERMANENT_REJECTION, evidence_reference=evidence_reference)

    @classmethod
    def retryable(cls, evidence_reference: str | None = None) -> Observation:
        """The destination refused for now, and did not perform the effect."""
        return cls(outcome=Outcome.RETRYABLE_REJECTION, evidence_reference=evidence_reference)


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One admitted intended effect, as the ledger holds it now."""

    tenant_id: str
    operation_id: str
    requester_id: str
    revision: str
    command: Command
    fingerprint: str
    admission_reference: str
    destination: DestinationRef
    idempotency_key: str
    state: OperationState
    version: int
    active_attempt_id: str | None
    provider_reference: str | None
    inconclusive_lookups: int
    retries_authorized: int
    review_owner: str | None
    review_deadline: datetime | None
    created_at: datetime
    updated_at: datetime
    last_event_hash: str
    event_sequence: int = 0
    proposal_id: str | None = None
    approval_id: str | None = None
    pool: str | None = None
    units: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One worker's submission under an operation."""

    tenant_id: str
    operation_id: str
    attempt_id: str
    executor_id: str
    destination: DestinationRef
    idempotency_key: str
    prepared_at: datetime
    recover_after: datetime
    observation: Outcome | None
    provider_reference: str | None
    evidence_reference: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvent:
    """One append-only audit row; ``event_hash`` links it to ``prev_hash`` of its operation."""

    event_id: str
    tenant_id: str
    operation_id: str
    attempt_id: str | None
    sequence: int
    actor: str
    event_type: str
    recorded_at: datetime
    evidence_reference: str | None
    details: Mapping[str, Any]
    observation_id: str | None
    prev_hash: str
    event_hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedAttempt:
    """A committed claim: the only thing an executor may submit."""

    tenant_id: str
    operation_id: str
    attempt_id: str
    command: Command
    idempotency_key: str
    destination: DestinationRef


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchResult:
    """What a dispatch or a status read reports to the caller (and to the model).

    ``uncertain`` is true while the effect may or may not have happened: callers must show it.
    ``rejection`` is why the destination refused, on the result of the dispatch that recorded a
    rejection (REJECTED or RETRY_PENDING): the adapter's reason code, else the outcome's name.
    """

    operation_id: str
    state: OperationState
    provider_reference: str | None = None
    attempt_id: str | None = None
    rejection: str | None = None

    @property
    def uncertain(self) -> bool:
        """True while the destination's effect is not yet established either way."""
        return self.state.uncertain

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view for tool results and API bodies."""
        return {
            "operation_id": self.operation_id,
            "state": self.state.value,
            "provider_reference": self.provider_reference,
            "attempt_id": self.attempt_id,
            "uncertain": self.uncertain,
        }
