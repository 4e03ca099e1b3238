"""Rows of the ledger's tables as the records callers see.

Pure conversions, no database access: the ledger, the authority and the audit layer build their
records here so that a column is read one way everywhere.
"""

from __future__ import annotations

from datetime import datetime

from effectledger.errors import TamperedProposal
from effectledger.model.authority import Approval, Proposal
from effectledger.model.canonical import digest_matches, loads_stored
from effectledger.model.operations import (
    Attempt,
    Command,
    DestinationRef,
    DispatchResult,
    Operation,
    OperationState,
    Outcome,
    Row,
    from_micros,
)

__all__ = [
    "approval_from_row",
    "attempt_from_row",
    "command_from_row",
    "destination_from_row",
    "operation_from_row",
    "optional_time",
    "proposal_from_row",
    "result_from_row",
]


def optional_time(micros: int | None) -> datetime | None:
    """The time of a nullable microsecond column (``None`` stays ``None``)."""
    return None if micros is None else from_micros(int(micros))


def destination_from_row(row: Row) -> DestinationRef:
    """The destination a row is bound to (its ``destination_account`` and ``_endpoint``).

    Not validated again: the ledger checked both when it wrote them, and a claim compares them
    with what the trail admitted (docs/design.md, invariants 8 and 13).
    """
    destination = _new_destination(DestinationRef)
    _set(destination, "account_id", row["destination_account"])
    _set(destination, "endpoint", row["destination_endpoint"])
    return destination


_new_destination = object.__new__
_set = object.__setattr__


def command_from_row(row: Row) -> Command:
    """The stored command of an ``operations`` row."""
    stored = loads_stored(row["command_json"])
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
        state=_state(row["state"]),
        version=int(row["version"]),
        active_attempt_id=row["active_attempt_id"],
        provider_reference=row["provider_reference"],
        inconclusive_lookups=int(row["inconclusive_lookups"]),
        retries_authorized=int(row["retries_authorized"]),
        review_owner=row["review_owner"],
        review_deadline=(  # optional_time, spelled out: every admission builds one
            None
            if row["review_deadline_us"] is None
            else from_micros(int(row["review_deadline_us"]))
        ),
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


_STATES = {state.value: state for state in OperationState}
"""Each state by its stored name: a dictionary read where ``OperationState(...)`` is two calls."""


def _state(stored: str) -> OperationState:
    """The state of a stored name, as ``OperationState(stored)`` finds it (else raises)."""
    try:
        return _STATES[stored]
    except KeyError:  # not a state: raise as the enum does
        return OperationState(stored)


def result_from_row(row: Row) -> DispatchResult:
    """What an ``operations`` row reports to a caller."""
    stored = row["state"]
    try:
        state = _STATES[stored]
    except KeyError:  # not a state: raise as the enum does
        state = OperationState(stored)
    return DispatchResult(
        operation_id=row["operation_id"],
        state=state,
        provider_reference=row["provider_reference"],
        attempt_id=row["active_attempt_id"],
    )


def _stated_reason(row: Row) -> str | None:
    """The row's ``stated_reason``; ``None`` when empty or when the read did not select it (a
    perform's ``proposal_replay``, which has no use for it)."""
    try:
        reason: str | None = row["stated_reason"]
    except (KeyError, IndexError):
        return None
    return reason


def proposal_from_row(row: Row, *, digest: str | None = None) -> Proposal:
    """A proposal row as a record, its digest recomputed and compared.

    ``digest``: the stored digest's string, for a row that carries it as its stored bytes
    (``proposal_replay``'s ``stored_digest``) rather than as the ``digest`` column.
    """
    proposal = Proposal(
        tenant_id=row["tenant_id"],
        proposal_id=row["proposal_id"],
        operation_id=row["operation_id"],
        proposer_id=row["proposer_id"],
        action=row["action"],
        contract_version=row["contract_version"],
        target=row["target"],
        resource_version=row["resource_version"],
        arguments=loads_stored(row["arguments_json"]),
        units=int(row["units"]),
        pool=row["pool"],
        destination=destination_from_row(row),
        policy_version=row["policy_version"],
        expires_at=from_micros(int(row["expires_us"])),
        correlation=loads_stored(row["correlation_json"]),
        digest=row["digest"] if digest is None else digest,
        created_at=from_micros(int(row["created_us"])),
        stated_reason=_stated_reason(row),
    )
    # The stored digest says its encoding version (v2, or v1 for proposals made before it).
    if not digest_matches("proposal", proposal.digest_body(), proposal.digest):
        raise TamperedProposal(
            f"proposal {proposal.proposal_id} does not match its digest: it was edited",
            proposal_id=proposal.proposal_id,
        )
    return proposal


def approval_from_row(row: Row) -> Approval:
    return Approval(
        tenant_id=row["tenant_id"],
        approval_id=row["approval_id"],
        proposal_id=row["proposal_id"],
        digest=row["digest"],
        granted=row["decision"] == "granted",
        kind=row["kind"],
        approver_id=row["approver_id"],
        policy_version=row["policy_version"],
        reason=row["reason"],
        decided_at=from_micros(int(row["decided_us"])),
        expires_at=from_micros(int(row["expires_us"])),
    )
