"""Authority records: proposals, approvals, correlation data and capacity usage.

These are the rows an approver and an investigator read. A :class:`Proposal`'s digest is
recomputed whenever one is built from a stored row, so an edited proposal never passes for the
one that was approved (see :mod:`effectledger.authority` for the digest's fields).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from effectledger.errors import InvalidInput
from effectledger.model.operations import DestinationRef, to_micros

__all__ = [
    "CORRELATION_PATTERN",
    "Approval",
    "CapacityUsage",
    "Correlation",
    "Proposal",
    "proposal_digest_body",
]

MAX_CORRELATION_LENGTH = 256
CORRELATION_PATTERN = r"^[\x20-\x7e]{1,256}$"
"""A correlation string: 1-256 printable ASCII characters (the HTTP API declares this rule)."""
_CORRELATION = re.compile(CORRELATION_PATTERN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Correlation:
    """Where a proposal came from: for investigators, never part of the digest."""

    trace_id: str | None = None
    tool_call_id: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    tool_schema_version: str | None = None
    prompt_version: str | None = None

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, str) or _CORRELATION.fullmatch(value) is None
            ):
                raise InvalidInput(
                    f"correlation {name} must be 1-{MAX_CORRELATION_LENGTH} printable ASCII "
                    "characters",
                    field=f"correlation.{name}",
                )

    @classmethod
    def coerce(cls, value: object) -> Correlation:
        """``value`` as a :class:`Correlation`: one already, a mapping of its fields, or None."""
        if value is None:
            return cls()
        if isinstance(value, Correlation):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(str(key) for key in value if key not in cls.__slots__)
            if unknown:
                raise InvalidInput(f"correlation has unknown fields {unknown}", field="correlation")
            return cls(**{str(key): item for key, item in value.items()})
        raise InvalidInput("correlation must be a Correlation or a mapping", field="correlation")

    def to_dict(self) -> dict[str, str]:
        """The fields that are set."""
        return {
            name: value for name in self.__slots__ if (value := getattr(self, name)) is not None
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """One concrete intended effect, exactly as an approver is shown it."""

    tenant_id: str
    proposal_id: str
    operation_id: str
    proposer_id: str
    action: str
    contract_version: str
    target: str
    resource_version: str
    arguments: Mapping[str, Any]
    units: int
    pool: str
    destination: DestinationRef
    policy_version: str
    expires_at: datetime
    correlation: Mapping[str, str]
    digest: str
    created_at: datetime
    stated_reason: str | None = None
    """The reason the agent gave for the proposal: untrusted, model-written text, shown to a
    reviewer as the agent's and never part of the digest."""

    def digest_body(self) -> dict[str, Any]:
        """The exact value whose digest binds approvals to this proposal."""
        return proposal_digest_body(
            tenant_id=self.tenant_id,
            operation_id=self.operation_id,
            proposer_id=self.proposer_id,
            action=self.action,
            contract_version=self.contract_version,
            target=self.target,
            resource_version=self.resource_version,
            arguments=self.arguments,
            units=self.units,
            pool=self.pool,
            destination=self.destination,
            policy_version=self.policy_version,
            expires_us=to_micros(self.expires_at),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """An approver's (or a pre-authorization's) decision bound to one proposal digest."""

    tenant_id: str
    approval_id: str
    proposal_id: str
    digest: str
    granted: bool
    kind: str
    approver_id: str
    policy_version: str
    reason: str | None
    decided_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityUsage:
    """Units of one pool: held by unresolved operations, committed by successes, freed."""

    pool: str
    held: int
    committed: int
    freed: int
    limit: int | None

    @property
    def available(self) -> int | None:
        """Units still admissible under the limit (``None``: no limit)."""
        return None if self.limit is None else self.limit - self.held - self.committed


def proposal_digest_body(
    *,
    tenant_id: str,
    operation_id: str,
    proposer_id: str,
    action: str,
    contract_version: str,
    target: str,
    resource_version: str,
    arguments: Mapping[str, Any],
    units: int,
    pool: str,
    destination: DestinationRef,
    policy_version: str,
    expires_us: int,
) -> dict[str, Any]:
    """The exact value whose ``proposal`` digest binds approvals to a proposal."""
    return {
        "action": action,
        "arguments": dict(arguments),
        "contract_version": contract_version,
        "destination": {"account_id": destination.account_id, "endpoint": destination.endpoint},
        "expires_us": expires_us,
        "operation_id": operation_id,
        "policy_version": policy_version,
        "pool": pool,
        "proposer_id": proposer_id,
        "resource_version": resource_version,
        "target": target,
        "tenant_id": tenant_id,
        "units": units,
    }
