"""What the executor checks before anything leaves the process: the row against its trail.

The ``operations`` row is a cache of the operation's hash-chained trail (docs/design.md, invariant
13). Someone with write access to the database can change a row without the ledger: rewrite the
command and its fingerprint, insert an approval, set a finished operation back to READY. Before
a claim commits, :func:`check_dispatchable` reads the trail in the claim's own transaction and
refuses the claim with :class:`~effectledger.errors.TamperedOperation` unless

- the trail is an unbroken hash chain that contains the row's latest event;
- every event the log has sealed still gives its sealed leaf, and the trail still reaches the
  last position the log sealed of it (sealed is final: ``sealed_event_edited``,
  ``sealed_event_deleted``);
- when the ledger holds trail keys, every event of the trail carries a trail tag that one of
  them computed for that event (:mod:`effectledger.events.authentication`): an administrator
  who rewrites events and recomputes their hashes cannot recompute the tags. A retired key
  vouches only for events recorded before its retirement (``retired_key``), so its holder
  cannot make a new trail dispatch; a later ``TrailRetagged`` event tagged by a key held
  vouches for the events before it (``effectledger audit retag``);
- the trail implies the state being claimed (READY);
- the command's fingerprint is the one the chained ``OperationAdmitted`` event admitted, and so
  are the idempotency key and the destination: a row given a new key would make the
  destination see a new request (``key_not_admitted``, ``destination_not_admitted``);
- for an operation admitted on a proposal: the command, destination, pool and units are the
  proposal's (its digest recomputed), no denial preceded the admission, and the consumed
  approval is backed by its chained ``ApprovalGranted`` / ``PreauthorizationApplied`` event
  naming the same approval and digest, and by a granted approval row with that digest.

When the claim runs in the admission's own transaction, the proposal and the approvals that
admission read (and checked) in it are passed in instead of being read again, and the row that
admission wrote from the proposal's values is not compared with them again; the trail is read
and verified either way (the proposal's and the approval's events are the database's).

Nothing is written when a check fails. What the checks cannot see (without trail keys, a forged
event with a correct hash) is described in ``docs/evidence.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from effectledger.errors import ChainBreak, ConcurrentModification, TamperedOperation
from effectledger.events.authentication import TrailKeys
from effectledger.events.chain import sealed_edit, verify_stored_chain
from effectledger.ledger.stored import proposal_from_row
from effectledger.model.authority import Approval, Proposal
from effectledger.model.canonical import COMMAND_VERSION, canonical_bytes, loads_stored
from effectledger.model.operations import Command, OperationState, Row
from effectledger.model.states import AUDIT_ONLY, EventType, implied_state
from effectledger.store import Transaction

__all__ = ["admitted_delivery", "authorized_command", "check_dispatchable", "check_lookup_key"]

_DECISIONS = frozenset({EventType.APPROVAL_GRANTED, EventType.PREAUTHORIZATION_APPLIED})
_event_type = itemgetter("event_type")
"""A stored event's type, for a walk of the trail in C (no call per event)."""


def _refuse(row: Row, reason: str, message: str) -> TamperedOperation:
    return TamperedOperation(
        f"operation {row['operation_id']} is not dispatched: {message}",
        operation_id=row["operation_id"],
        reason=reason,
    )


def check_dispatchable(
    tx: Transaction,
    row: Row,
    *,
    proposal: Proposal | None = None,
    approvals: Sequence[Approval] = (),
    keys: TrailKeys | None = None,
    admitted_here: bool = False,
) -> str | None:
    """Check a READY ``row`` against its trail and authority; return the approved digest.

    ``keys``: the ledger's trail keys; every event of the trail must then carry a tag that
    one of them computed for it (reason ``trail_not_authentic``).

    ``None`` for an operation admitted on an outside decision (no proposal). ``proposal`` and
    ``approvals`` are what an admission in this same transaction read and checked; without
    them both are read here. ``admitted_here``: that admission also wrote ``row`` and its
    admission event from ``proposal``'s values, so the row's command, key and destination are not
    compared with the proposal and the event again. Raises
    :class:`TamperedOperation` (nothing written) when the row and its trail disagree, and
    :class:`ConcurrentModification` when the trail shows the operation moved on since ``row``
    was read.
    """
    operation_id = row["operation_id"]
    key = {"tenant_id": row["tenant_id"], "operation_id": operation_id}
    events = tx.all("events_for_operation", key)
    try:
        verify_stored_chain(events)
    except ChainBreak as exc:
        raise _refuse(row, "chain_broken", "its audit trail is not an unbroken chain") from exc
    count = len(events)
    if events and int(events[0]["sealed_through"] or 0) > count:
        raise _refuse(
            row,
            "sealed_event_deleted",
            f"the log sealed {int(events[0]['sealed_through'])} events of its trail, which now "
            f"holds {count}: sealed events were deleted",
        )
    edited = sealed_edit(events)
    if edited is not None:
        raise _refuse(
            row,
            "sealed_event_edited",
            f"event {edited['sequence']} of its trail was changed after the log sealed it",
        )
    sequence = int(row["event_sequence"])
    if not 0 < sequence <= count or events[sequence - 1]["event_hash"] != row["last_event_hash"]:
        raise _refuse(row, "chain_broken", "its row does not point into its audit trail")
    for later in events[sequence:]:
        if later["event_type"] not in AUDIT_ONLY:
            raise ConcurrentModification(
                "the operation changed while this step ran; reload it",
                operation_id=row["operation_id"],
            )
    trail = events[:sequence]
    if keys is not None:
        _check_tags(row, trail, keys)
    try:
        state = implied_state(map(_event_type, trail))
    except ValueError as exc:
        raise _refuse(row, "state_not_in_trail", "its trail holds an unknown event") from exc
    if state is not OperationState.READY:
        raise _refuse(
            row, "state_not_in_trail", f"its trail leaves it {state}, not {OperationState.READY}"
        )
    admitted: Row | None = None  # the trail's last OperationAdmitted (a loop: no call)
    for event in trail:
        if event["event_type"] == EventType.OPERATION_ADMITTED:
            admitted = event
    admission = {} if admitted is None else _details(admitted)
    if admitted is None or admission.get("fingerprint") != row["fingerprint"]:
        raise _refuse(row, "command_not_admitted", "its command is not the one admitted")
    if not admitted_here:
        _check_admitted_delivery(row, admission)
    if row["proposal_id"] is None:
        return None
    if proposal is None:
        proposal = _proposal(tx, row)
    elif (proposal.proposal_id, proposal.operation_id) != (row["proposal_id"], operation_id):
        raise _refuse(row, "command_not_proposed", "its proposal names another operation")
    if not admitted_here:
        _check_command(row, proposal)
    _check_authority(tx, row, proposal, trail, int(admitted["sequence"]), approvals)
    return proposal.digest


def admitted_delivery(details: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The idempotency key and destination an ``OperationAdmitted`` event's details admitted.

    ``None`` for an event admitted before the admission carried them (such an operation's key is
    trusted from its row, as it always was).
    """
    found = (
        details.get("idempotency_key"),
        details.get("destination_account"),
        details.get("destination_endpoint"),
    )
    if all(value is None for value in found):
        return None
    key, account, endpoint = found
    return (str(key), str(account), str(endpoint))


def _check_admitted_delivery(row: Row, details: Mapping[str, Any]) -> None:
    admitted = admitted_delivery(details)
    if admitted is None:
        return
    key, account, endpoint = admitted
    if row["idempotency_key"] != key:
        raise _refuse(
            row,
            "key_not_admitted",
            "its idempotency key is not the one its admission recorded",
        )
    if (row["destination_account"], row["destination_endpoint"]) != (account, endpoint):
        raise _refuse(
            row,
            "destination_not_admitted",
            "its destination is not the one its admission recorded",
        )


def check_lookup_key(
    tx: Transaction, row: Row, attempt: Row, *, keys: TrailKeys | None = None
) -> None:
    """Refuse a lookup (or resend) under ``attempt`` unless its key and destination are the ones
    the operation's authenticated admission recorded.

    The trail is read and verified (chain, sealed positions, tags) as a claim reads it; an
    attempt row given another key would have the destination asked about a request never made,
    and its "not found" taken for "never sent". Raises :class:`TamperedOperation` (reasons as
    :func:`check_dispatchable`); nothing is written.
    """
    events = tx.all(
        "events_for_operation", {"tenant_id": row["tenant_id"], "operation_id": row["operation_id"]}
    )
    try:
        verify_stored_chain(events)
    except ChainBreak as exc:
        raise _refuse(row, "chain_broken", "its audit trail is not an unbroken chain") from exc
    if events and int(events[0]["sealed_through"] or 0) > len(events):
        raise _refuse(row, "sealed_event_deleted", "sealed events of its trail were deleted")
    if keys is not None:
        _check_tags(row, events, keys)
    admitted = [event for event in events if event["event_type"] == EventType.OPERATION_ADMITTED]
    if not admitted:
        raise _refuse(row, "command_not_admitted", "its trail holds no admission")
    delivery = admitted_delivery(_details(admitted[-1]))
    if delivery is None:
        return
    key, account, endpoint = delivery
    if attempt["idempotency_key"] != key or row["idempotency_key"] != key:
        raise _refuse(
            row, "key_not_admitted", "its attempt's idempotency key is not the one admitted"
        )
    if (attempt["destination_account"], attempt["destination_endpoint"]) != (account, endpoint):
        raise _refuse(
            row, "destination_not_admitted", "its attempt's destination is not the one admitted"
        )


def _check_tags(row: Row, trail: Sequence[Row], keys: TrailKeys) -> None:
    found = keys.trail_problem(trail)
    if found is not None:
        event, problem = found
        why = (
            "tagged by a trail key retired before it was recorded"
            if problem == "retired_key"
            else "not authenticated by the ledger's trail key"
        )
        raise _refuse(
            row,
            "trail_not_authentic",
            f"event {event['sequence']} of its trail is {why} ({problem})",
        )


def _details(event: Row) -> dict[str, Any]:
    """The details of a stored event whose chain was verified (its text hashed as stored)."""
    details = loads_stored(event["details_json"])
    return details if type(details) is dict else {}  # JSON's objects are plain dicts


def _proposal(tx: Transaction, row: Row) -> Proposal:
    found = tx.one(
        "proposal_get", {"tenant_id": row["tenant_id"], "proposal_id": row["proposal_id"]}
    )
    if found is None:
        raise _refuse(row, "command_not_proposed", "its proposal is missing")
    try:
        proposal = proposal_from_row(found)
    except Exception as exc:  # TamperedProposal, or a row too broken to read
        raise _refuse(row, "command_not_proposed", "its proposal was edited") from exc
    if proposal.operation_id != row["operation_id"]:
        raise _refuse(row, "command_not_proposed", "its proposal names another operation")
    return proposal


def _check_command(row: Row, proposal: Proposal) -> None:
    proposed = canonical_bytes(
        {
            "action": proposal.action,
            "contract_version": proposal.contract_version,
            "arguments": proposal.arguments,
        },
        version=COMMAND_VERSION,
    )
    same = (
        proposed == row["command_json"].encode()
        and proposal.destination.account_id == row["destination_account"]
        and proposal.destination.endpoint == row["destination_endpoint"]
        and proposal.pool == row["pool"]
        and proposal.units == int(row["units"])
        and proposal.proposer_id == row["requester_id"]
    )
    if not same:
        raise _refuse(row, "command_not_proposed", "its command is not the approved proposal's")


def _check_authority(
    tx: Transaction,
    row: Row,
    proposal: Proposal,
    trail: Sequence[Row],
    admitted_at: int,
    approvals: Sequence[Approval],
) -> None:
    # The trail's chain was verified: its events are sequences 1, 2, ... in order.
    before = trail[: admitted_at - 1]
    for event in before:
        if event["event_type"] == EventType.APPROVAL_DENIED:
            raise _refuse(row, "proposal_denied", "its proposal was denied before it was admitted")
    approval_id = row["approval_id"]
    if approval_id is None:
        return
    backed = False
    for event in before:
        if event["event_type"] in _DECISIONS:
            details = _details(event)
            if (
                details.get("approval_id") == approval_id
                and details.get("digest") == proposal.digest
            ):
                backed = True
                break
    known: Approval | None = None
    for approval in approvals:
        if approval.approval_id == approval_id:
            known = approval
            break
    granted: bool
    digest: str | None
    proposal_id: str | None
    if known is not None:  # read and checked by the admission in this transaction
        granted, digest, proposal_id = known.granted, known.digest, known.proposal_id
    else:
        stored = tx.one("approval_get", {"tenant_id": row["tenant_id"], "approval_id": approval_id})
        granted, digest, proposal_id = (
            (False, None, None)
            if stored is None
            else (stored["decision"] == "granted", stored["digest"], stored["proposal_id"])
        )
    if (
        not backed
        or not granted
        or digest != proposal.digest
        or proposal_id != proposal.proposal_id
    ):
        raise _refuse(row, "approval_not_in_trail", "its approval is not backed by its audit trail")


def authorized_command(row: Row, digest: str | None) -> Command:
    """The stored command of ``row`` with what authorized it, as the destination receives it."""
    stored = loads_stored(row["command_json"])  # command_from_row's values, one record made
    return Command(
        action=stored["action"],
        contract_version=stored["contract_version"],
        arguments=stored["arguments"],
        operation_id=row["operation_id"],
        proposal_id=row["proposal_id"],
        approval_id=row["approval_id"],
        digest=digest,
    )
