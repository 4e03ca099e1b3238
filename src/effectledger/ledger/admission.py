"""Admission on the ledger's side: validate the operation to insert, and insert it once.

:func:`draft_operation` checks every argument without touching the database;
:func:`insert_operation` inserts the draft and its ``OperationAdmitted`` event inside a caller's
transaction (an admission on a proposal, or :func:`admit_in` for one on an outside decision).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from effectledger.errors import (
    AdmissionConflict,
    InvalidInput,
    NotFound,
    OperationIdTaken,
)
from effectledger.events.chain import GENESIS_HASH
from effectledger.ledger.settings import LedgerParts
from effectledger.ledger.stored import operation_from_row
from effectledger.ledger.traces import keep_admitted
from effectledger.ledger.trail import (
    key,
    lock_trail,
    new_id,
    now_us,
    validate_operation_id,
    write_event,
)
from effectledger.ledger.validation import checked_context, reference
from effectledger.model.canonical import fingerprinted
from effectledger.model.operations import (
    Command,
    Context,
    DestinationRef,
    Operation,
    OperationState,
    Row,
    validate_identifier,
)
from effectledger.model.states import EventType
from effectledger.store import Transaction
from effectledger.store.hashes import unpacked

__all__ = [
    "TrailHead",
    "admit_in",
    "draft_checked",
    "draft_operation",
    "insert_operation",
    "insert_operation_row",
    "trail_head",
]

TrailHead = tuple[int, str]
"""The last event of a trail: its sequence and its event hash (``(0, GENESIS_HASH)`` before
the first event)."""

_READY = OperationState.READY.value  # looked up once: ``.value`` is two calls


def trail_head(row: Row) -> TrailHead:
    """The trail head a read returned as ``head_sequence`` and ``head_hash`` (stored bytes)."""
    sequence = row["head_sequence"]
    if sequence is None:
        return 0, GENESIS_HASH
    return int(sequence), unpacked(row["head_hash"])


MAX_UNITS = 2**63 - 1  # what both databases store in a BIGINT
_COMPARED = (
    "requester_id",
    "revision",
    "fingerprint",
    "destination_account",
    "destination_endpoint",
)


def draft_operation(
    context: Context,
    *,
    operation_id: str,
    revision: str,
    command: Command,
    destination: DestinationRef,
    admission_reference: str,
    proposal_id: str | None = None,
    approval_id: str | None = None,
    pool: str | None = None,
    units: int = 0,
) -> dict[str, Any]:
    """Validate an admission and return the row to insert (no database access).

    Every argument is checked before anything is written; a malformed one is refused with
    ``invalid_input`` naming the field.
    """
    checked_context(context)
    validate_operation_id(operation_id)
    validate_identifier(revision, "revision")
    if not isinstance(command, Command):
        raise InvalidInput("command must be a Command", field="command")
    validate_identifier(command.action, "action")
    validate_identifier(command.contract_version, "contract_version")
    if not isinstance(command.arguments, Mapping):
        raise InvalidInput("command.arguments must be a mapping", field="command.arguments")
    if not isinstance(destination, DestinationRef):
        raise InvalidInput("destination must be a DestinationRef", field="destination")
    # A DestinationRef validated its account and endpoint when it was made; re-check in
    # case it was built around that (object.__setattr__ on a frozen record).
    DestinationRef(account_id=destination.account_id, endpoint=destination.endpoint)
    if not isinstance(admission_reference, str) or not admission_reference.strip():
        # The caller left it out: an input error, not stored data failing a check.
        raise InvalidInput(
            "an operation needs the reference of the decision admitting it",
            field="admission_reference",
        )
    reference(admission_reference, "admission_reference")
    for name, value in (("proposal_id", proposal_id), ("approval_id", approval_id)):
        if value is not None:
            validate_identifier(value, name)
    if pool is not None:
        validate_identifier(pool, "pool")
    if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= MAX_UNITS:
        raise InvalidInput(f"units must be an integer from 0 to {MAX_UNITS}", field="units")
    return draft_checked(
        context,
        operation_id=operation_id,
        revision=revision,
        command=command,
        destination=destination,
        admission_reference=admission_reference,
        proposal_id=proposal_id,
        approval_id=approval_id,
        pool=pool,
        units=units,
    )


def draft_checked(
    context: Context,
    *,
    operation_id: str,
    revision: str,
    command: Command,
    destination: DestinationRef,
    admission_reference: str,
    proposal_id: str | None,
    approval_id: str | None,
    pool: str | None,
    units: int,
) -> dict[str, Any]:
    """The row :func:`draft_operation` returns, for values already checked: those it checked,
    or an admitted proposal's, which were checked when it was proposed and whose digest was
    recomputed when it was read (its authority's own ids, checked where they were read)."""
    command_bytes, command_fingerprint = fingerprinted(command)
    return {
        "tenant_id": context.tenant_id,
        "operation_id": operation_id,
        "requester_id": context.actor_id,
        "revision": revision,
        "fingerprint": command_fingerprint,
        "destination_account": destination.account_id,
        "destination_endpoint": destination.endpoint,
        "action": command.action,
        "contract_version": command.contract_version,
        "command_json": command_bytes.decode(),
        "admission_reference": admission_reference,
        "proposal_id": proposal_id,
        "approval_id": approval_id,
        "pool": pool,
        "units": units,
    }


def admit_in(tx: Transaction, ledger: LedgerParts, draft: Mapping[str, Any]) -> Operation:
    """Admit a drafted operation on an outside decision: hold its trail, then insert it."""
    lock_trail(tx, draft["tenant_id"], draft["operation_id"])
    return insert_operation(tx, ledger, draft, own_trail=True)


def insert_operation(
    tx: Transaction, ledger: LedgerParts, draft: Mapping[str, Any], *, own_trail: bool = False
) -> Operation:
    """Insert a drafted operation and its ``OperationAdmitted`` event inside ``tx`` (see
    :func:`insert_operation_row`); the operation, or the stored one it exactly replays."""
    row, inserted = insert_operation_row(tx, ledger, draft, own_trail=own_trail)
    return operation_from_row(row) if inserted else _matching(row, draft)


def insert_operation_row(
    tx: Transaction,
    ledger: LedgerParts,
    draft: Mapping[str, Any],
    *,
    own_trail: bool = False,
    head: TrailHead | None = None,
) -> tuple[Row, bool]:
    """Insert a drafted operation and its ``OperationAdmitted`` event inside ``tx``.

    The caller holds the operation's trail (:func:`lock_trail`). The operation's trail
    continues any events already written under its id (its proposal and approval). Returns
    the stored row and whether this call inserted it; a row that was there already is returned
    as it is, not compared (:func:`insert_operation` compares it). With ``own_trail`` (an
    admission on an outside decision) an id whose trail was begun by a proposal belongs to
    that proposal, and :class:`OperationIdTaken` is raised (nothing is kept); the proposal is
    looked for only when the id already has a trail. ``head``: the trail's head as the caller
    read it in this transaction while holding the trail (else it is read here).
    """
    trail = key(draft["tenant_id"], draft["operation_id"])
    # The insert itself is the existence check: it returns the new row, or none if the id is
    # taken (an earlier admission, or a concurrent one that committed first), and only then
    # is the stored operation read and compared.
    at_us = now_us(ledger.clock)
    # The key every submission, lookup and resend of this operation carries. It is written
    # into the admission event as well as the row, so that the trail key authenticates it: a
    # row given a new key (to make the destination see a new request) is refused at the claim.
    idempotency_key = f"el-{new_id()}"
    if head is None:
        last = tx.one("event_head", trail)
        head = (0, GENESIS_HASH) if last is None else (int(last["sequence"]), last["event_hash"])
    sequence = head[0] + 1
    event = write_event(
        tx,
        **trail,
        sequence=sequence,
        prev_hash=head[1],
        actor=draft["requester_id"],
        event_type=EventType.OPERATION_ADMITTED,
        now_us=at_us,
        keys=ledger.settings.trail_keys,
        evidence_reference=draft["admission_reference"],
        details={
            "revision": draft["revision"],
            "fingerprint": draft["fingerprint"],
            "idempotency_key": idempotency_key,
            "destination_account": draft["destination_account"],
            "destination_endpoint": draft["destination_endpoint"],
        },
        insert=False,
    )
    # One statement inserts the row and, only if it did, its event.
    inserted = tx.one(
        "operation_insert",
        {
            **draft,
            **event,
            "event_hash": event["stored_hash"],
            "idempotency_key": idempotency_key,
            "event_sequence": sequence,
            "now_us": at_us,
        },
    )
    if inserted is None:  # admitted before, or a concurrent admission won: compare with it
        existing = tx.one("operation_get", trail)
        if existing is None:  # pragma: no cover - the conflicting row is visible
            raise NotFound("operation vanished during admission")
        return existing, False
    if own_trail and head[0] > 0 and tx.one("proposal_for_operation", trail):
        # Raised inside the transaction: the row and its event are rolled back with it.
        raise OperationIdTaken(
            f"operation id {draft['operation_id']} belongs to a proposal; admit that proposal",
            operation_id=draft["operation_id"],
        )
    keep_admitted(tx, draft["tenant_id"], draft["operation_id"])
    # The row as inserted, from the values it was written with: not read back.
    row = {
        **draft,
        "idempotency_key": idempotency_key,
        "state": _READY,
        "version": 1,
        "active_attempt_id": None,
        "provider_reference": None,
        "inconclusive_lookups": 0,
        "retries_authorized": 0,
        "review_owner": None,
        "review_deadline_us": None,
        "created_us": at_us,
        "updated_us": at_us,
        "last_event_hash": event["event_hash"],
        "event_sequence": sequence,
    }
    return row, True


def _matching(row: Row, draft: Mapping[str, Any]) -> Operation:
    """The stored operation if ``draft`` is its exact replay, else :class:`AdmissionConflict`."""
    differs = sorted(name for name in _COMPARED if row[name] != draft[name])
    if differs:
        raise AdmissionConflict(
            f"operation {draft['operation_id']} was admitted before with another "
            + ", ".join(differs),
            operation_id=draft["operation_id"],
            differs=differs,
        )
    return operation_from_row(row)
