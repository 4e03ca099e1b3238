"""Rows of the ledger's tables as the records callers see.

Pure conversions, no database access: the ledger, the authority and the audit layer build their
records here so that a column is read one way everywhere.
"""

from __future__ import annotations

import json
from datetime import datetime

from effectledger.model import (
    Attempt,
    Command,
    DestinationRef,
    DispatchResult,
    Operation,
    OperationState,
    Outcome,
    from_micros,
)
from effectledger.store import Row

__all__ = [
    "attempt_from_row",
    "command_from_row",
    "destination_from_row",
    "operation_from_row",
    "optional_time",
    "result_from_row",
]


def optional_time(micros: int | None) -> datetime | None:
    """The time of a nullable microsecond column (``None`` stays ``None``)."""
    return None if micros is None else from_micros(int(micros))


def destination_from_row(row: Row) -> DestinationRef:
    """The destination a row is bound to (its ``destination_account`` and ``_endpoint``)."""
    return DestinationRef(
        account_id=row["destination_account"], endpoint=row["destination_endpoint"]
    )


def command_from_row(row: Row) -> Command:
    """The stored command of an ``operations`` row."""
    stored = json.loads(row["command_json"])
    return Command(
        action=stored["action"],
        contract_version=stored["contract_version"],
        arguments=stored["arguments"],
    )


def operation_from_row(row: Row) -> Operation:
    """An ``operations`` row as an :class:`Operation`."""
    return Operation(
        tenant_id=row["tenant_id"],
        operation_id=row["operation_id"],
        requester_id=row["requester_id"],
        revision=row["revision"],
        command=command_from_row(row),
        fingerprint=row["fingerprint"],
        admission_reference=row["admission_reference"],
        destination=destination_from_row(row),
        idempotency_key=row["idempotency_key"],
        state=OperationState(row["state"]),
        version=int(row["version"]),
        active_attempt_id=row["active_attempt_id"],
        provider_reference=row["provider_reference"],
        inconclusive_lookups=int(row["inconclusive_lookups"]),
        retries_authorized=int(row["retries_authorized"]),
        review_owner=row["review_owner"],
        review_deadline=optional_time(row["review_deadline_us"]),
        created_at=from_micros(int(row["created_us"])),
        updated_at=from_micros(int(row["updated_us"])),
        last_event_hash=row["last_event_hash"],
        event_sequence=int(row["event_sequence"]),
        proposal_id=row["proposal_id"],
        approval_id=row["approval_id"],
        pool=row["pool"],
        units=int(row["units"]),
    )


def attempt_from_row(row: Row) -> Attempt:
    """An ``attempts`` row as an :class:`Attempt`."""
    observation = row["observation"]
    return Attempt(
        tenant_id=row["tenant_id"],
        operation_id=row["operation_id"],
        attempt_id=row["attempt_id"],
        executor_id=row["executor_id"],
        destination=destination_from_row(row),
        idempotency_key=row["idempotency_key"],
        prepared_at=from_micros(int(row["prepared_us"])),
        recover_after=from_micros(int(row["recover_after_us"])),
        observation=None if observation is None else Outcome(observation),
        provider_reference=row["provider_reference"],
        evidence_reference=row["evidence_reference"],
    )


def result_from_row(row: Row) -> DispatchResult:
    """What an ``operations`` row reports to a caller."""
    return DispatchResult(
        operation_id=row["operation_id"],
        state=OperationState(row["state"]),
        provider_reference=row["provider_reference"],
        attempt_id=row["active_attempt_id"],
    )
