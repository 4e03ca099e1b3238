"""The ledger: every state transition of an operation and its audit event, and nowhere else.

Each public method that writes is one database transaction (DESIGN.md §4). A transition always
goes through :meth:`Ledger._transition`, which updates the operation under its version (a stale
writer changes nothing) and appends exactly one hash-linked audit event; if either write fails
the transaction rolls back and the operation is as it was.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from effectledger._failpoints import crash_point
from effectledger.canonical import COMMAND_VERSION, canonical_bytes, digest_bytes
from effectledger.clock import Clock, SystemClock
from effectledger.dispatch_checks import authorized_command, check_dispatchable
from effectledger.errors import (
    AdmissionConflict,
    CommitUncertain,
    ConcurrentModification,
    DestinationMismatch,
    IntegrityError,
    InvalidInput,
    InvalidTransition,
    MissingAdmission,
    NotFound,
    NotPermitted,
    OperationIdTaken,
    StorageError,
    TamperedCommand,
)
from effectledger.events.chain import GENESIS_HASH, event_body, hash_event
from effectledger.events.record import event_from_row
from effectledger.evidence import store_evidence
from effectledger.model import (
    Attempt,
    AuditEvent,
    Command,
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    OperationState,
    Outcome,
    PreparedAttempt,
    is_identifier,
    to_micros,
    validate_identifier,
    validate_limit,
)
from effectledger.rows import (
    attempt_from_row,
    operation_from_row,
    result_from_row,
)
from effectledger.store import Row, Store, Transaction
from effectledger.text import unprintable
from effectledger.transitions import transition

__all__ = [
    "AUDITOR_ROLE",
    "DISPATCH_WORKER",
    "RECOVERY_WORKER",
    "DueWork",
    "Ledger",
    "LedgerSettings",
    "lock_scope",
    "lock_trail",
    "new_id",
    "validate_operation_id",
]

AUDITOR_ROLE = "auditor"
log = logging.getLogger(__name__)

DISPATCH_WORKER = "dispatch-worker"
RECOVERY_WORKER = "recovery-worker"
MAX_REFERENCE_LENGTH = 512
_RECORD_ATTEMPTS = 3
_CLAIM_PASSES = 8  # READY rows failing their integrity check that one pool claim passes over
_TRAIL_PASSES = 16  # audit-only events one transition lets pass before it gives up
_OWNING_STATES = (
    OperationState.IN_PROGRESS.value,
    OperationState.OUTCOME_UNKNOWN.value,
    OperationState.MANUAL_REVIEW.value,
)
_RECOVERABLE_STATES = (OperationState.IN_PROGRESS.value, OperationState.OUTCOME_UNKNOWN.value)
_STATE_BY_OUTCOME = {
    Outcome.ACCEPTED: OperationState.SUCCEEDED,
    Outcome.PERMANENT_REJECTION: OperationState.REJECTED,
    Outcome.RETRYABLE_REJECTION: OperationState.RETRY_PENDING,
    Outcome.UNKNOWN: OperationState.OUTCOME_UNKNOWN,
}


def _key(tenant_id: str, operation_id: str) -> dict[str, Any]:
    return {"tenant_id": tenant_id, "operation_id": operation_id}


def lock_scope(tx: Transaction, tenant_id: str, scope: str) -> None:
    """Hold ``scope`` of ``tenant_id`` until ``tx`` ends (one writer at a time reads-then-writes).

    Scopes: ``operation:<id>`` (an operation's trail, before and after admission),
    ``budget:<action>`` (a pre-authorization budget), ``pool:<pool>`` (a capacity pool). A
    transaction takes them in that order, so two transactions never wait for each other in a
    cycle. SQLite's ``BEGIN IMMEDIATE`` already serializes every writer.
    """
    tx.run("advisory_lock", {"tenant_id": tenant_id, "scope": scope})


def lock_trail(tx: Transaction, tenant_id: str, operation_id: str) -> None:
    """Hold the trail of ``operation_id`` until ``tx`` ends (see :func:`lock_scope`)."""
    lock_scope(tx, tenant_id, f"operation:{operation_id}")


RESERVED_PREFIXES = ("pool:",)
"""Operation ids the ledger keeps for trails of its own (a pool's limit changes)."""


def validate_operation_id(value: object) -> str:
    """``value`` if it is a well-formed operation id outside the reserved prefixes."""
    operation_id = validate_identifier(value, "operation_id")
    if operation_id.startswith(RESERVED_PREFIXES):
        raise InvalidInput(
            f"operation ids starting with {', '.join(RESERVED_PREFIXES)} are reserved",
            field="operation_id",
        )
    return operation_id


def new_id() -> str:
    """A fresh random identifier (32 lower-case hex digits)."""
    return os.urandom(16).hex()


def _event_type(outcome: Outcome, *, owns_state: bool, reconciled: bool) -> str:
    if not owns_state:
        return f"Late{outcome.value}Observation"
    if outcome is Outcome.ACCEPTED:
        return "ProviderAcceptanceReconciled" if reconciled else "ProviderAcceptanceConfirmed"
    if outcome is Outcome.UNKNOWN:
        return "SubmissionOutcomeUnknown"
    return outcome.value


def _reference(value: str | None, what: str) -> str | None:
    problem = _reference_problem(value)
    if problem is not None:
        raise InvalidInput(
            f"{what} must be 1-{MAX_REFERENCE_LENGTH} printable characters ({problem})",
            field=what,
            problem=problem,
        )
    return value


def _reference_problem(value: object) -> str | None:
    """Why ``value`` cannot be stored as a reference (``None``: it can, or it is absent)."""
    if value is None:
        return None
    if not isinstance(value, str):
        return "not_text"
    if len(value) > MAX_REFERENCE_LENGTH:
        return "too_long"
    return unprintable(value)


def _unrecordable(observation: object) -> str | None:
    """Why a destination's reply cannot be recorded as it stands, or ``None``.

    The effect may have happened whatever the reply looks like, so a reply the ledger cannot
    store is never an input error: :meth:`Ledger.record` records it as Unknown with this reason.
    """
    if not isinstance(observation, Observation) or not isinstance(observation.outcome, Outcome):
        return "reply:not_an_observation"
    for what in ("provider_reference", "evidence_reference"):
        problem = _reference_problem(getattr(observation, what))
        if problem is not None:
            return f"{what}:{problem}"
    if observation.observation_id is not None and not is_identifier(observation.observation_id):
        return "observation_id:malformed"
    if observation.outcome is Outcome.ACCEPTED:
        if observation.provider_reference is None:
            return "provider_reference:missing"
        if observation.evidence_reference is None:
            return "evidence_reference:missing"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class DueWork:
    """What one :meth:`Ledger.reserve_due` transaction took on.

    ``lookups``: attempts whose lookup this worker reserved and must now perform.
    ``escalated``: ``(tenant, operation)`` moved to MANUAL_REVIEW instead of being looked up.
    """

    lookups: tuple[Attempt, ...] = ()
    escalated: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerSettings:
    """Timing and escalation rules.

    ``recover_after``: how long after a claim recovery may look at an unanswered attempt.
    ``lookup_interval``: how far a reserved lookup pushes the next check.
    ``max_inconclusive_lookups``: inconclusive lookups before ``MANUAL_REVIEW``.
    ``review_owner`` / ``review_deadline``: who gets manual review, and by when.
    ``record_budget``: how long :meth:`Ledger.record` may take to write a result, waits for
    locks and re-reads included, whatever the caller does meanwhile. Past it the record fails
    with :class:`~effectledger.errors.StorageBusy`, nothing is written, and the attempt stays
    unresolved for recovery to look up. ``None`` leaves only the store's own timeouts.
    """

    recover_after: timedelta = timedelta(seconds=30)
    lookup_interval: timedelta = timedelta(seconds=30)
    max_inconclusive_lookups: int = 5
    review_owner: str = "operations"
    review_deadline: timedelta = timedelta(hours=24)
    record_budget: timedelta | None = timedelta(seconds=2)


class Ledger:
    """The durable record of every admitted operation, its attempts and its audit trail.

    Reads and writes are scoped by the trusted :class:`~effectledger.model.Context`: another
    tenant's operation is reported as not found. Methods without a context (``record``,
    ``reserve_lookup``, ``escalate``) are for the trusted workers that hold a claim.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        settings: LedgerSettings | None = None,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or LedgerSettings()

    # -- helpers -------------------------------------------------------------------------

    def _now_us(self) -> int:
        return to_micros(self.clock.now())

    def _event(
        self,
        tx: Transaction,
        *,
        tenant_id: str,
        operation_id: str,
        sequence: int,
        prev_hash: str,
        actor: str,
        event_type: str,
        now_us: int,
        attempt_id: str | None = None,
        evidence_reference: str | None = None,
        details: Mapping[str, Any] | None = None,
        observation_id: str | None = None,
        insert: bool = True,
    ) -> dict[str, Any]:
        body = event_body(
            event_id=new_id(),
            tenant_id=tenant_id,
            operation_id=operation_id,
            attempt_id=attempt_id,
            sequence=sequence,
            actor=actor,
            event_type=event_type,
            recorded_us=now_us,
            evidence_reference=evidence_reference,
            details=details or {},
            observation_id=observation_id,
            prev_hash=prev_hash,
        )
        # The body is encoded once: the hash and the stored details text both come from it.
        body["event_hash"], body["details_json"] = hash_event(body)
        if insert:
            tx.run("event_insert", body)
        return body

    def _transition(
        self,
        tx: Transaction,
        row: Row,
        *,
        actor: str,
        event_type: str,
        now_us: int,
        attempt_id: str | None = None,
        evidence_reference: str | None = None,
        details: Mapping[str, Any] | None = None,
        observation_id: str | None = None,
        **changes: Any,
    ) -> dict[str, Any]:
        """Apply ``changes`` to the operation under its version and append one event.

        The update is guarded by the operation's ``version`` (its concurrency token, which moves
        only when ``changes`` change something) and by its ``event_sequence`` (the head of its
        trail). When only audit-only events were appended since ``row`` was read, the decision
        taken on ``row`` still holds: the row is re-read in this transaction and the event is
        chained after the new head. When the version moved, :class:`ConcurrentModification` is
        raised and the transaction must roll back.
        """
        fields = {
            "state": row["state"],
            "active_attempt_id": row["active_attempt_id"],
            "provider_reference": row["provider_reference"],
            "inconclusive_lookups": row["inconclusive_lookups"],
            "retries_authorized": row["retries_authorized"],
            "review_owner": row["review_owner"],
            "review_deadline_us": row["review_deadline_us"],
        }
        if not changes.keys() <= fields.keys():  # pragma: no cover - a programming error
            raise TypeError(f"unknown operation fields {sorted(changes.keys() - fields.keys())}")
        current = OperationState(row["state"])
        allowed = transition(event_type, current)  # InvalidTransition unless the table allows it
        fields.update(changes)
        if fields["state"] != (allowed.to_state or current).value:  # pragma: no cover
            raise InvalidTransition(
                f"{event_type} leaves an operation {allowed.to_state or current}, "
                f"not {fields['state']}",
                operation_id=row["operation_id"],
            )
        version = int(row["version"])
        new_version = version + 1 if changes else version
        for _ in range(_TRAIL_PASSES):
            sequence = int(row["event_sequence"])
            event = self._event(
                tx,
                tenant_id=row["tenant_id"],
                operation_id=row["operation_id"],
                sequence=sequence + 1,
                prev_hash=row["last_event_hash"],
                actor=actor,
                event_type=event_type,
                now_us=now_us,
                attempt_id=attempt_id,
                evidence_reference=evidence_reference,
                details=details,
                observation_id=observation_id,
                insert=False,
            )
            params = {
                **fields,
                "tenant_id": row["tenant_id"],
                "operation_id": row["operation_id"],
                "version": version,
                "new_version": new_version,
                "sequence": sequence,
                "new_sequence": sequence + 1,
                "event_hash": event["event_hash"],
                "now_us": now_us,
            }
            if tx.run("operation_update", params) == 1:
                break
            fresh = tx.one("operation_get", _key(row["tenant_id"], row["operation_id"]))
            if fresh is None or int(fresh["version"]) != version:
                raise ConcurrentModification(
                    "the operation changed while this step ran; reload it",
                    operation_id=row["operation_id"],
                )
            row = fresh  # only its trail grew: chain this event after the new head
        else:
            raise ConcurrentModification(
                "the operation's trail kept growing while this step ran; try again",
                operation_id=row["operation_id"],
            )
        tx.run("event_insert", event)
        updated = dict(row)
        updated.update(fields)
        updated["version"] = new_version
        updated["event_sequence"] = sequence + 1
        updated["last_event_hash"] = event["event_hash"]
        return updated

    # -- admission -----------------------------------------------------------------------

    def admit(
        self,
        context: Context,
        *,
        operation_id: str,
        revision: str,
        command: Command,
        destination: DestinationRef,
        admission_reference: str,
    ) -> Operation:
        """Admit ``operation_id`` for exactly this command, once.

        This is admission on a decision made outside effectledger, named by
        ``admission_reference``; :meth:`effectledger.authority.Authority.admit` admits on a
        proposal and a consumed approval instead. A repeat by the same requester with the same
        revision, command and destination returns the stored operation unchanged; any other
        repeat raises :class:`AdmissionConflict` and writes nothing. The destination and its
        idempotency key are fixed here for good. A lost COMMIT acknowledgement is settled here
        by that replay, never left to the caller.
        """
        draft = self.draft_operation(
            context,
            operation_id=operation_id,
            revision=revision,
            command=command,
            destination=destination,
            admission_reference=admission_reference,
        )

        def body(tx: Transaction) -> Operation:
            lock_trail(tx, context.tenant_id, operation_id)
            return self.insert_operation(tx, draft, own_trail=True)

        try:
            operation = self.store.write(body, label="admit")
        except CommitUncertain:
            # An admission is its own exact replay: run again, it returns the operation the
            # lost COMMIT stored (the insert waits for that transaction to end first), or
            # admits it now if it was not stored.
            operation = self.store.write(body, label="admit")
        crash_point("after_admit")
        return operation

    def draft_operation(
        self,
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
        _context(context)
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
            raise MissingAdmission("an operation needs the reference of the decision admitting it")
        _reference(admission_reference, "admission_reference")
        for name, value in (("proposal_id", proposal_id), ("approval_id", approval_id)):
            if value is not None:
                validate_identifier(value, name)
        if pool is not None:
            validate_identifier(pool, "pool")
        if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= _MAX_UNITS:
            raise InvalidInput(f"units must be an integer from 0 to {_MAX_UNITS}", field="units")
        stored_command = {
            "action": command.action,
            "contract_version": command.contract_version,
            "arguments": command.arguments,
        }
        command_bytes = canonical_bytes(stored_command, version=COMMAND_VERSION)
        return {
            "tenant_id": context.tenant_id,
            "operation_id": operation_id,
            "requester_id": context.actor_id,
            "revision": revision,
            "fingerprint": digest_bytes("command", command_bytes, version=COMMAND_VERSION),
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

    def insert_operation(
        self, tx: Transaction, draft: Mapping[str, Any], *, own_trail: bool = False
    ) -> Operation:
        """Insert a drafted operation and its ``OperationAdmitted`` event inside ``tx``.

        The caller holds the operation's trail (:func:`lock_trail`). The operation's trail
        continues any events already written under its id (its proposal and approval). An
        existing operation with the same requester, revision, fingerprint and destination is
        returned as it is; any other raises :class:`AdmissionConflict`. With ``own_trail`` (an
        admission on an outside decision) an id whose trail was begun by a proposal belongs to
        that proposal, and :class:`OperationIdTaken` is raised (nothing is kept); the proposal is
        looked for only when the id already has a trail.
        """
        key = _key(draft["tenant_id"], draft["operation_id"])
        compared = (
            "requester_id",
            "revision",
            "fingerprint",
            "destination_account",
            "destination_endpoint",
        )

        def matching(row: Row) -> Operation:
            differs = sorted(name for name in compared if row[name] != draft[name])
            if differs:
                raise AdmissionConflict(
                    f"operation {draft['operation_id']} was admitted before with another "
                    + ", ".join(differs),
                    operation_id=draft["operation_id"],
                    differs=differs,
                )
            return operation_from_row(row)

        # The insert itself is the existence check: it returns the new row, or none if the id is
        # taken (an earlier admission, or a concurrent one that committed first), and only then
        # is the stored operation read and compared.
        now_us = self._now_us()
        head = tx.one("event_head", key)
        sequence = 1 if head is None else int(head["sequence"]) + 1
        event = self._event(
            tx,
            **key,
            sequence=sequence,
            prev_hash=GENESIS_HASH if head is None else head["event_hash"],
            actor=draft["requester_id"],
            event_type="OperationAdmitted",
            now_us=now_us,
            evidence_reference=draft["admission_reference"],
            details={"revision": draft["revision"], "fingerprint": draft["fingerprint"]},
            insert=False,
        )
        inserted = tx.one(
            "operation_insert",
            {
                **draft,
                "idempotency_key": f"el-{new_id()}",
                "event_sequence": sequence,
                "now_us": now_us,
                "event_hash": event["event_hash"],
            },
        )
        if inserted is None:  # admitted before, or a concurrent admission won: compare with it
            existing = tx.one("operation_get", key)
            if existing is None:  # pragma: no cover - the conflicting row is visible
                raise NotFound("operation vanished during admission")
            return matching(existing)
        if own_trail and head is not None and tx.one("proposal_for_operation", key):
            raise OperationIdTaken(
                f"operation id {draft['operation_id']} belongs to a proposal; admit that proposal",
                operation_id=draft["operation_id"],
            )
        tx.run("event_insert", event)
        return operation_from_row(inserted)

    def append_event(
        self,
        tx: Transaction,
        *,
        tenant_id: str,
        operation_id: str,
        actor: str,
        event_type: str,
        evidence_reference: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append one event to the trail of ``operation_id`` without changing any state.

        Used for what happens around admission (proposal, approval, a denied admission). The
        trail is held first (:func:`lock_trail`), so concurrent appends chain one after another.
        If the operation exists the event goes through its guarded update without moving its
        version, so the trail and the row stay in step; otherwise it continues the trail written
        so far under the id.
        """
        key = _key(tenant_id, operation_id)
        lock_trail(tx, tenant_id, operation_id)
        row = tx.one("operation_get", key)
        if row is not None:
            return self._transition(
                tx,
                row,
                actor=actor,
                event_type=event_type,
                now_us=self._now_us(),
                evidence_reference=evidence_reference,
                details=details,
            )
        transition(event_type, None)  # only what the table allows before admission
        head = tx.one("event_head", key)
        return self._event(
            tx,
            **key,
            sequence=1 if head is None else int(head["sequence"]) + 1,
            prev_hash=GENESIS_HASH if head is None else head["event_hash"],
            actor=actor,
            event_type=event_type,
            now_us=self._now_us(),
            evidence_reference=evidence_reference,
            details=details,
        )

    # -- reads ---------------------------------------------------------------------------

    def get(self, context: Context, operation_id: str) -> Operation:
        """The operation as stored, if it belongs to the context's tenant."""
        _context(context)
        validate_identifier(operation_id, "operation_id")
        row = self.store.one("operation_get", _key(context.tenant_id, operation_id))
        if row is None:
            raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
        return operation_from_row(row)

    def status(self, context: Context, operation_id: str) -> DispatchResult:
        """The recorded state of an operation the context's actor requested.

        A foreign tenant or another requester is told ``not_found``, never the state.
        """
        _context(context)
        validate_identifier(operation_id, "operation_id")
        row = self.store.one("operation_status", _key(context.tenant_id, operation_id))
        if row is None or row["requester_id"] != context.actor_id:
            raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
        return DispatchResult(
            operation_id=operation_id,
            state=OperationState(row["state"]),
            provider_reference=row["provider_reference"],
            attempt_id=row["active_attempt_id"],
        )

    def recorded_for_proposal(
        self, context: Context, proposal_id: str, approval_id: str | None
    ) -> DispatchResult | None:
        """The recorded state of an exact replay of a finished ``perform``, or ``None``.

        One plain read: the operation admitted for ``proposal_id`` if it exists, belongs to the
        context's actor, was admitted with ``approval_id`` (when one is named) and is past READY.
        Anything else (not admitted, READY, another actor, another approval) returns ``None``
        and the caller takes the full path, which decides it.
        """
        row = self.store.one(
            "proposal_replay", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
        )
        if (
            row is None
            or row["requester_id"] != context.actor_id
            or row["state"] == OperationState.READY.value
            or (approval_id is not None and row["approval_id"] != approval_id)
        ):
            return None
        return result_from_row(row)

    def list_operations(self, context: Context, *, limit: int = 100) -> list[Operation]:
        """The tenant's most recent operations, newest first (``limit``: 1 to 10,000)."""
        _context(context)
        limit = validate_limit(limit)
        rows = self.store.read(
            lambda tx: tx.all("operations_list", {"tenant_id": context.tenant_id, "limit": limit})
        )
        return [operation_from_row(row) for row in rows]

    def attempts(self, context: Context, operation_id: str) -> list[Attempt]:
        """Every attempt of one of the tenant's operations, oldest first."""
        self.get(context, operation_id)  # validates the context and the id
        rows = self.store.read(
            lambda tx: tx.all("attempts_for_operation", _key(context.tenant_id, operation_id))
        )
        return [attempt_from_row(row) for row in rows]

    def events(self, context: Context, operation_id: str) -> list[AuditEvent]:
        """The audit trail under an operation id in sequence order (proposal events included).

        Raises ``NotFound`` when the tenant has no events under that id.
        """
        _context(context)
        validate_identifier(operation_id, "operation_id")
        rows = self.store.read(
            lambda tx: tx.all("events_for_operation", _key(context.tenant_id, operation_id))
        )
        if not rows:
            raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
        return [event_from_row(row) for row in rows]

    # -- claim ---------------------------------------------------------------------------

    def claim(
        self,
        context: Context,
        operation_id: str,
        *,
        attempt_id: str,
        executor_id: str = DISPATCH_WORKER,
        bound_to: DestinationRef | None = None,
        expected_version: int | None = None,
    ) -> PreparedAttempt | None:
        """Claim a READY operation for one attempt, or return ``None`` if it is not READY.

        One transaction: the stored command is checked against its fingerprint and admission,
        the operation moves to IN_PROGRESS under its version, the attempt row and the
        ``AttemptPrepared`` event are written. Only a returned claim may be submitted.
        ``bound_to`` is the executor's destination: if it is not exactly the operation's, the
        claim is refused with :class:`DestinationMismatch` and nothing is written.
        ``expected_version``, when given, is the version a dispatch-time check approved: if the
        operation moved on since, nothing is claimed.
        """
        validate_identifier(operation_id, "operation_id")
        validate_identifier(attempt_id, "attempt_id")
        key = _key(context.tenant_id, operation_id)

        def body(tx: Transaction) -> PreparedAttempt | None:
            row = tx.one("operation_lock", key)
            if row is None or row["requester_id"] != context.actor_id:
                raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
            if row["state"] != OperationState.READY.value:
                return None
            if expected_version is not None and int(row["version"]) != expected_version:
                return None
            return self._claim_row(
                tx, row, attempt_id=attempt_id, executor_id=executor_id, bound_to=bound_to
            )

        prepared = self.store.write(body, label="claim")
        if prepared is not None:
            crash_point("after_claim")
        return prepared

    def claim_in(
        self,
        tx: Transaction,
        context: Context,
        operation_id: str,
        *,
        attempt_id: str,
        executor_id: str = DISPATCH_WORKER,
        bound_to: DestinationRef | None = None,
    ) -> PreparedAttempt | None:
        """The claim of :meth:`claim`, inside ``tx`` (for an admission that claims at once).

        Nothing may be submitted before ``tx`` commits; a ``CommitUncertain`` from that commit is
        settled with :meth:`committed_claim` under ``attempt_id``.
        """
        row = tx.one("operation_lock", _key(context.tenant_id, operation_id))
        if row is None or row["requester_id"] != context.actor_id:
            raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
        return self._claim_row(
            tx, row, attempt_id=attempt_id, executor_id=executor_id, bound_to=bound_to
        )

    def claim_or_status(
        self,
        context: Context,
        operation_id: str,
        *,
        executor_id: str = DISPATCH_WORKER,
        bound_to: DestinationRef | None = None,
    ) -> PreparedAttempt | DispatchResult:
        """Claim the operation if it is READY, or return its recorded state: an executor's step.

        The operation is read once, outside any transaction: a foreign tenant or another
        requester is told ``not_found`` as :meth:`status` tells them, and an operation that is
        not READY (a repeated call) costs that one read and writes nothing. A READY operation is
        claimed under a fresh attempt id on the row just read, with the checks and writes of
        :meth:`claim`; its update is guarded by the version read, so if the operation changed in
        between (another executor claimed it), this claim rolls back and the state recorded by
        then is returned. A :class:`CommitUncertain` names the attempt id, so the caller can
        check the claim with :meth:`committed_claim`.
        """
        row = self.store.one("operation_dispatch", _key(context.tenant_id, operation_id))
        if row is None or row["requester_id"] != context.actor_id:
            raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
        if row["state"] != OperationState.READY.value:
            return result_from_row(row)
        attempt_id = new_id()
        try:
            prepared = self.store.write(
                lambda tx: self._claim_row(
                    tx, row, attempt_id=attempt_id, executor_id=executor_id, bound_to=bound_to
                ),
                label="claim",
            )
        except ConcurrentModification:
            prepared = None
        except CommitUncertain as exc:
            raise CommitUncertain(
                exc.message,
                tenant_id=context.tenant_id,
                operation_id=operation_id,
                attempt_id=attempt_id,
            ) from exc
        if prepared is None:  # another executor's claim came first
            return self.status(context, operation_id)
        crash_point("after_claim")
        return prepared

    def ready_operations(
        self, destination: DestinationRef, *, limit: int = 100
    ) -> list[tuple[str, str, str]]:
        """``(tenant, operation, requester)`` of READY operations bound to ``destination``."""
        rows = self.store.read(
            lambda tx: tx.all(
                "operations_ready",
                {
                    "destination_account": destination.account_id,
                    "destination_endpoint": destination.endpoint,
                    "limit": limit,
                },
            )
        )
        return [(row["tenant_id"], row["operation_id"], row["requester_id"]) for row in rows]

    def claim_next(
        self,
        destination: DestinationRef,
        *,
        attempt_id: str,
        executor_id: str = DISPATCH_WORKER,
    ) -> PreparedAttempt | None:
        """Claim the oldest READY operation bound to ``destination``, or return ``None``.

        For trusted executor pools: the same claim as :meth:`claim`, on an operation picked in
        the same transaction among those no other executor is claiming (``FOR UPDATE SKIP
        LOCKED`` on PostgreSQL), so any number of pools share the queue and each operation is
        claimed once. An operation that fails its integrity check is left READY and logged,
        never claimed. If the COMMIT's acknowledgement is lost, the :class:`CommitUncertain`
        raised names the operation, so the caller can check the claim with
        :meth:`committed_claim`.
        """
        validate_identifier(attempt_id, "attempt_id")
        picked: list[Row] = []
        start = {
            "destination_account": destination.account_id,
            "destination_endpoint": destination.endpoint,
            "after_us": -1,
            "after_tenant": "",
            "after_operation": "",
        }

        def body(tx: Transaction) -> PreparedAttempt | None:
            picked.clear()
            position = start
            for _ in range(_CLAIM_PASSES):
                row = tx.one("operations_ready_lock", position)
                if row is None:
                    return None
                try:
                    prepared = self._claim_row(
                        tx, row, attempt_id=attempt_id, executor_id=executor_id
                    )
                except IntegrityError as exc:  # raised before anything is written
                    log.error("not claiming %s/%s: %s", row["tenant_id"], row["operation_id"], exc)
                    position = {
                        **start,
                        "after_us": row["created_us"],
                        "after_tenant": row["tenant_id"],
                        "after_operation": row["operation_id"],
                    }
                    continue
                picked.append(row)
                return prepared
            return None

        try:
            prepared = self.store.write(body, label="claim_next")
        except CommitUncertain as exc:
            if not picked:
                raise
            raise CommitUncertain(
                exc.message,
                tenant_id=picked[0]["tenant_id"],
                operation_id=picked[0]["operation_id"],
                attempt_id=attempt_id,
            ) from exc
        if prepared is not None:
            crash_point("after_claim")
        return prepared

    def _claim_row(
        self,
        tx: Transaction,
        row: Row,
        *,
        attempt_id: str,
        executor_id: str,
        bound_to: DestinationRef | None = None,
    ) -> PreparedAttempt | None:
        """The claim step on a READY row: checks, attempt, state change, event.

        ``row`` is read (and locked) in this transaction, or read just before it: the state
        change is guarded by the row's version either way, so a row that changed since is not
        claimed (:class:`ConcurrentModification`, and the transaction must roll back). Raises an
        :class:`IntegrityError` before writing anything if the stored command no longer hashes
        to its fingerprint or the admission reference is missing, and
        :class:`DestinationMismatch` if ``bound_to`` is not the operation's destination.
        """
        operation_id = row["operation_id"]
        if row["state"] != OperationState.READY.value:
            return None
        # The stored bytes themselves must still hash to the admitted fingerprint.
        command = row["command_json"].encode()
        if digest_bytes("command", command, version=COMMAND_VERSION) != row["fingerprint"]:
            raise TamperedCommand(
                f"the stored command of {operation_id} does not match its fingerprint",
                operation_id=operation_id,
            )
        if not str(row["admission_reference"] or "").strip():
            raise MissingAdmission(
                f"operation {operation_id} has no admission reference",
                operation_id=operation_id,
            )
        destination = DestinationRef(
            account_id=row["destination_account"], endpoint=row["destination_endpoint"]
        )
        if bound_to is not None and bound_to != destination:
            raise DestinationMismatch(
                "the destination adapter is not bound to the operation's account and endpoint",
                operation_id=operation_id,
            )
        approved_digest = check_dispatchable(tx, row)
        now_us = self._now_us()
        tx.run(
            "attempt_insert",
            {
                **_key(row["tenant_id"], operation_id),
                "attempt_id": attempt_id,
                "executor_id": executor_id,
                "destination_account": destination.account_id,
                "destination_endpoint": destination.endpoint,
                "idempotency_key": row["idempotency_key"],
                "now_us": now_us,
                "recover_after_us": now_us + _micros(self.settings.recover_after),
            },
        )
        self._transition(
            tx,
            row,
            actor=executor_id,
            event_type="AttemptPrepared",
            now_us=now_us,
            attempt_id=attempt_id,
            state=OperationState.IN_PROGRESS.value,
            active_attempt_id=attempt_id,
        )
        return PreparedAttempt(
            tenant_id=row["tenant_id"],
            operation_id=operation_id,
            attempt_id=attempt_id,
            command=authorized_command(row, approved_digest),
            idempotency_key=row["idempotency_key"],
            destination=destination,
        )

    def release(
        self, context: Context, operation_id: str, *, reason: str, expected_version: int
    ) -> tuple[DispatchResult, bool]:
        """Release a READY operation that failed its dispatch-time recheck.

        One transaction: READY at ``expected_version`` → RELEASED with ``OperationReleased``; its
        capacity units are freed and the destination is never contacted. Returns the recorded
        state and whether this call released it: if the operation moved on meanwhile, nothing
        changes and its current state is returned with ``False``.
        """
        key = _key(context.tenant_id, operation_id)

        def body(tx: Transaction) -> tuple[DispatchResult, bool]:
            row = tx.one("operation_get", key)
            if row is None or row["requester_id"] != context.actor_id:
                raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
            stale = int(row["version"]) != expected_version
            if row["state"] != OperationState.READY.value or stale:
                return result_from_row(row), False
            updated = self._transition(
                tx,
                row,
                actor=context.actor_id,
                event_type="OperationReleased",
                now_us=self._now_us(),
                details={"reason": reason},
                state=OperationState.RELEASED.value,
            )
            return result_from_row(updated), True

        return self.store.write(body, label="release")

    def committed_claim(
        self, tenant_id: str, operation_id: str, attempt_id: str
    ) -> PreparedAttempt | None:
        """The claim made under ``attempt_id`` if it is stored and still awaits its submission.

        For a claim whose COMMIT was not acknowledged: first waits until no transaction that
        changed the operation is still open (the lost COMMIT has then either landed or not),
        then reads. ``None`` proves the claim is not there to act on; submit nothing then.
        """
        key = _key(tenant_id, operation_id)

        def body(tx: Transaction) -> PreparedAttempt | None:
            tx.one("operation_settle", key)
            attempt = tx.one("attempt_get", {**key, "attempt_id": attempt_id})
            row = tx.one("operation_get", key)
            if (
                attempt is None
                or row is None
                or row["active_attempt_id"] != attempt_id
                or row["state"] != OperationState.IN_PROGRESS.value
            ):
                return None
            proposal = None
            if row["proposal_id"] is not None:
                proposal = tx.one(
                    "proposal_get", {"tenant_id": tenant_id, "proposal_id": row["proposal_id"]}
                )
            return PreparedAttempt(
                tenant_id=tenant_id,
                operation_id=operation_id,
                attempt_id=attempt_id,
                command=authorized_command(row, None if proposal is None else proposal["digest"]),
                idempotency_key=attempt["idempotency_key"],
                destination=DestinationRef(
                    account_id=attempt["destination_account"],
                    endpoint=attempt["destination_endpoint"],
                ),
            )

        return self.store.write(body, label="committed_claim")

    # -- record --------------------------------------------------------------------------

    def record(
        self,
        prepared: PreparedAttempt | Attempt,
        observation: Observation,
        *,
        actor: str = DISPATCH_WORKER,
        reconciled: bool = False,
    ) -> DispatchResult:
        """Record what the destination said about one attempt, with its event, in one transaction.

        Only the active attempt of an unresolved operation changes the state; any other
        observation is kept as ``Late<Outcome>Observation`` and changes nothing. A concurrent
        change is not overwritten: the step is re-read and re-decided (at most three times).
        A reply the ledger cannot store as it stands (an Accepted without both references, a
        reference that is not 1-512 printable characters, not an :class:`Observation` at all)
        is recorded as Unknown with the reason in its event's details: the effect may have
        happened, so it is neither an input error nor a failure, and recovery looks it up.
        If the COMMIT's acknowledgement is lost, the event it carried is looked for once the
        operation settles: found, the result stands; absent, the record is made again.
        The whole record, waits for locks and re-reads included, runs within
        ``settings.record_budget``: past it :class:`~effectledger.errors.StorageBusy` is raised,
        nothing is written, and the attempt stays unresolved, so recovery looks it up once its
        ``recover_after`` is due.
        """
        evidence = getattr(observation, "evidence", None)  # not an Observation: unrecordable
        if evidence is not None:  # the answer itself: kept with the event, below
            observation = replace(observation, evidence_reference=evidence.reference)
        unrecordable = _unrecordable(observation)
        reported: object = None
        if unrecordable is not None:
            log.warning(
                "unrecordable reply for %s/%s recorded as Unknown: %s",
                prepared.tenant_id,
                prepared.operation_id,
                unrecordable,
            )
            reported = getattr(observation, "outcome", None)
            observation = Observation.unknown()
        key = _key(prepared.tenant_id, prepared.operation_id)
        attempt_key = {**key, "attempt_id": prepared.attempt_id}
        written: list[tuple[str, DispatchResult]] = []

        def body(tx: Transaction) -> DispatchResult:
            written.clear()
            row = tx.one("operation_with_attempt", attempt_key)
            if row is None or not row["attempt_present"]:
                raise NotFound("no such operation attempt", **attempt_key)
            if observation.observation_id is not None and tx.one(
                "event_by_observation", {**key, "observation_id": observation.observation_id}
            ):
                return result_from_row(row)  # this very observation is already recorded
            if observation.evidence is not None:
                store_evidence(tx, prepared.tenant_id, observation.evidence, now_us=self._now_us())
            owns_state = (
                row["active_attempt_id"] == prepared.attempt_id and row["state"] in _OWNING_STATES
            )
            changes: dict[str, Any] = {}
            if owns_state:
                new_state = _STATE_BY_OUTCOME[observation.outcome]
                if row["state"] == OperationState.MANUAL_REVIEW.value and (
                    observation.outcome is Outcome.UNKNOWN
                ):
                    new_state = OperationState.MANUAL_REVIEW
                changes["state"] = new_state.value
                if observation.outcome is Outcome.ACCEPTED:
                    changes["provider_reference"] = observation.provider_reference
                if reconciled and observation.outcome is Outcome.UNKNOWN:
                    changes["inconclusive_lookups"] = int(row["inconclusive_lookups"]) + 1
                tx.run(
                    "attempt_observe",
                    {
                        **attempt_key,
                        "observation": observation.outcome.value,
                        "provider_reference": observation.provider_reference,
                        "evidence_reference": observation.evidence_reference,
                    },
                )
            details = _observation_details(observation)
            if unrecordable is not None:
                details["unrecordable"] = unrecordable
                if isinstance(reported, Outcome):
                    details["reported_outcome"] = reported.value
            updated = self._transition(
                tx,
                row,
                actor=actor,
                event_type=_event_type(
                    observation.outcome, owns_state=owns_state, reconciled=reconciled
                ),
                now_us=self._now_us(),
                attempt_id=prepared.attempt_id,
                evidence_reference=observation.evidence_reference,
                details=details,
                observation_id=observation.observation_id,
                **changes,
            )
            crash_point("inside_record")
            result = result_from_row(updated)
            written.append((updated["last_event_hash"], result))
            return result

        budget = self.settings.record_budget
        deadline = None if budget is None else time.monotonic() + budget.total_seconds()
        for attempt_number in range(1, _RECORD_ATTEMPTS + 1):
            left = None if deadline is None else deadline - time.monotonic()
            last = attempt_number == _RECORD_ATTEMPTS or (
                deadline is not None and time.monotonic() >= deadline
            )
            try:
                return self.store.write(body, label="record", budget_s=left)
            except ConcurrentModification:
                if last:
                    raise
            except CommitUncertain as uncertain:
                if not written:  # pragma: no cover - the body ran to its end before COMMIT
                    raise
                event_hash, result = written[0]
                if self._landed(uncertain, key, [event_hash]):
                    return result
                if last:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _landed(
        self, uncertain: CommitUncertain, key: Mapping[str, str], event_hashes: list[str]
    ) -> set[str]:
        """Which of the events a write computed are stored, once its operation has settled.

        For a write whose COMMIT acknowledgement was lost: waits (as :meth:`committed_claim`
        does) until no transaction that changed the operation is open, then looks the events
        up. If even that fails, the original :class:`CommitUncertain` is raised.
        """
        log.warning("%s: COMMIT unacknowledged, reading back", uncertain.details.get("label"))

        def body(tx: Transaction) -> set[str]:
            tx.one("operation_settle", key)
            return {h for h in event_hashes if tx.one("event_present", {**key, "event_hash": h})}

        try:
            landed: set[str] = self.store.write(body, label="settle")
        except StorageError as exc:
            raise uncertain from exc
        return landed

    # -- recovery ------------------------------------------------------------------------

    def reserve_lookup(
        self, tenant_id: str, operation_id: str, attempt_id: str, *, actor: str = RECOVERY_WORKER
    ) -> Attempt | None:
        """Reserve one lookup of a due attempt, or return ``None`` if another worker has it.

        One transaction: the operation must still be unresolved with this attempt active and
        due; ``recover_after`` moves to now + ``lookup_interval`` and ``ReconciliationStarted``
        is written. Only a returned attempt may be looked up.
        """
        written: list[tuple[Attempt, str]] = []

        def body(tx: Transaction) -> Attempt | None:
            written.clear()
            reserved = self._reserve(tx, tenant_id, operation_id, attempt_id, actor=actor)
            if reserved is None:
                return None
            written.append(reserved)
            return reserved[0]

        try:
            attempt = self.store.write(body, label="reserve_lookup")
        except CommitUncertain as uncertain:
            if not written:  # pragma: no cover - the body ran to its end before COMMIT
                raise
            attempt, event_hash = written[0]
            if not self._landed(uncertain, _key(tenant_id, operation_id), [event_hash]):
                return None  # not reserved: still due, for this or another worker
        if attempt is not None:
            crash_point("after_reserve")
        return attempt

    def reserve_due(
        self, destination: DestinationRef, *, limit: int = 100, actor: str = RECOVERY_WORKER
    ) -> DueWork:
        """Reserve the lookups of up to ``limit`` due attempts bound to ``destination``.

        One transaction. Only attempts sent to ``destination`` (exactly its account and
        endpoint) are taken: a worker reserves only what its adapter can look up, and leaves
        the windows of every other destination's attempts alone. Attempts another worker is
        reserving are skipped, not waited for (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so
        any number of workers on any number of hosts split the due work and each attempt is
        looked up once per ``lookup_interval``. Each reservation is the one of
        :meth:`reserve_lookup`; an operation whose inconclusive lookups are used up is
        escalated to MANUAL_REVIEW instead, as :meth:`escalate` does. If the COMMIT's
        acknowledgement is lost, the reservations are read back once the operations settle and
        only those found stored are returned; the others are still due for the next pass.
        """
        limit = validate_limit(limit)
        written: list[tuple[str, str, str, Attempt | None]] = []

        def body(tx: Transaction) -> DueWork:
            written.clear()
            lookups: list[Attempt] = []
            escalated: list[tuple[str, str]] = []
            due = tx.all(
                "attempts_due_lock",
                {
                    "now_us": self._now_us(),
                    "limit": limit,
                    "destination_account": destination.account_id,
                    "destination_endpoint": destination.endpoint,
                },
            )
            for item in due:
                tenant_id, operation_id = item["tenant_id"], item["operation_id"]
                row = tx.one("operation_get", _key(tenant_id, operation_id))
                if row is not None and self._spent(row):
                    updated = self._escalate_row(
                        tx, row, reason="inconclusive_lookups", actor=actor
                    )
                    escalated.append((tenant_id, operation_id))
                    written.append((tenant_id, operation_id, updated["last_event_hash"], None))
                    continue
                reserved = self._reserve(
                    tx, tenant_id, operation_id, item["attempt_id"], actor=actor
                )
                if reserved is not None:
                    attempt, event_hash = reserved
                    lookups.append(attempt)
                    written.append((tenant_id, operation_id, event_hash, attempt))
            return DueWork(lookups=tuple(lookups), escalated=tuple(escalated))

        try:
            work = self.store.write(body, label="reserve_due")
        except CommitUncertain as uncertain:
            work = self._reserved_after_all(uncertain, written)
        if work.lookups:
            crash_point("after_reserve")
        return work

    def _reserved_after_all(
        self, uncertain: CommitUncertain, written: list[tuple[str, str, str, Attempt | None]]
    ) -> DueWork:
        """What an unacknowledged :meth:`reserve_due` stored, read back operation by operation."""
        lookups: list[Attempt] = []
        escalated: list[tuple[str, str]] = []
        for tenant_id, operation_id, event_hash, attempt in written:
            if not self._landed(uncertain, _key(tenant_id, operation_id), [event_hash]):
                continue
            if attempt is None:
                escalated.append((tenant_id, operation_id))
            else:
                lookups.append(attempt)
        return DueWork(lookups=tuple(lookups), escalated=tuple(escalated))

    def _reserve(
        self, tx: Transaction, tenant_id: str, operation_id: str, attempt_id: str, *, actor: str
    ) -> tuple[Attempt, str] | None:
        """The reservation step of one due attempt and its event's hash, or ``None`` if the
        attempt is not due or not active."""
        key = _key(tenant_id, operation_id)
        attempt_key = {**key, "attempt_id": attempt_id}
        row = tx.one("operation_get", key)
        attempt = tx.one("attempt_get", attempt_key)
        now_us = self._now_us()
        if (
            row is None
            or attempt is None
            or row["state"] not in _RECOVERABLE_STATES
            or row["active_attempt_id"] != attempt_id
            or int(attempt["recover_after_us"]) > now_us
        ):
            return None
        next_us = now_us + _micros(self.settings.lookup_interval)
        tx.run("attempt_reschedule", {**attempt_key, "recover_after_us": next_us})
        updated = self._transition(
            tx,
            row,
            actor=actor,
            event_type="ReconciliationStarted",
            now_us=now_us,
            attempt_id=attempt_id,
            details={"next_check_us": next_us},
        )
        reserved = attempt_from_row({**dict(attempt), "recover_after_us": next_us})
        return reserved, updated["last_event_hash"]

    def _spent(self, row: Row) -> bool:
        return (
            row["state"] in _RECOVERABLE_STATES
            and int(row["inconclusive_lookups"]) >= self.settings.max_inconclusive_lookups
        )

    def needs_review(self, tenant_id: str, operation_id: str) -> bool:
        """Whether inconclusive lookups have used up the budget for this operation."""
        row = self.store.one("operation_get", _key(tenant_id, operation_id))
        return row is not None and self._spent(row)

    def escalate(
        self,
        tenant_id: str,
        operation_id: str,
        *,
        reason: str,
        owner: str | None = None,
        actor: str = RECOVERY_WORKER,
    ) -> DispatchResult:
        """Move an unresolved operation to MANUAL_REVIEW with an owner and a deadline."""
        owner = validate_identifier(owner or self.settings.review_owner, "owner")
        key = _key(tenant_id, operation_id)

        written: list[tuple[str, DispatchResult]] = []

        def body(tx: Transaction) -> DispatchResult:
            written.clear()
            row = tx.one("operation_get", key)
            if row is None:
                raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
            if row["state"] not in _RECOVERABLE_STATES:
                return result_from_row(row)
            updated = self._escalate_row(tx, row, reason=reason, owner=owner, actor=actor)
            written.append((updated["last_event_hash"], result_from_row(updated)))
            return written[0][1]

        try:
            return self.store.write(body, label="escalate")
        except CommitUncertain as uncertain:
            if not written:  # pragma: no cover - the body ran to its end before COMMIT
                raise
            event_hash, result = written[0]
            if self._landed(uncertain, key, [event_hash]):
                return result
            # Not stored: escalate again; a state settled meanwhile is returned as it is.
            return self.store.write(body, label="escalate")

    def _escalate_row(
        self, tx: Transaction, row: Row, *, reason: str, actor: str, owner: str | None = None
    ) -> dict[str, Any]:
        """The escalation step on an unresolved row read in this transaction."""
        owner = validate_identifier(owner or self.settings.review_owner, "owner")
        now = self.clock.now()
        deadline_us = to_micros(now + self.settings.review_deadline)
        return self._transition(
            tx,
            row,
            actor=actor,
            event_type="ManualReviewAssigned",
            now_us=to_micros(now),
            attempt_id=row["active_attempt_id"],
            details={"owner": owner, "deadline_us": deadline_us, "reason": reason},
            state=OperationState.MANUAL_REVIEW.value,
            review_owner=owner,
            review_deadline_us=deadline_us,
        )

    def authorize_retry(
        self, context: Context, operation_id: str, *, max_retries: int
    ) -> DispatchResult:
        """Move a RETRY_PENDING operation back to READY, within a budget of ``max_retries``.

        This is the explicit retry policy's step: the model-facing tool never calls it. The same
        operation, command, destination and idempotency key are kept.
        """
        key = _key(context.tenant_id, operation_id)

        def body(tx: Transaction) -> DispatchResult:
            row = tx.one("operation_get", key)
            if row is None:
                raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
            if row["state"] != OperationState.RETRY_PENDING.value:
                raise InvalidTransition(
                    f"only a RETRY_PENDING operation can be retried; {operation_id} is "
                    f"{row['state']}",
                    operation_id=operation_id,
                    state=row["state"],
                )
            used = int(row["retries_authorized"])
            if used >= max_retries:
                raise InvalidTransition(
                    f"operation {operation_id} has used its {max_retries} retries",
                    operation_id=operation_id,
                    code_reason="retry_budget_exhausted",
                )
            updated = self._transition(
                tx,
                row,
                actor=context.actor_id,
                event_type="RetryAuthorized",
                now_us=self._now_us(),
                attempt_id=row["active_attempt_id"],
                details={"retry": used + 1, "max_retries": max_retries},
                state=OperationState.READY.value,
                retries_authorized=used + 1,
            )
            return result_from_row(updated)

        return self.store.write(body, label="authorize_retry")

    # -- corrections ---------------------------------------------------------------------

    def correct_event(
        self, context: Context, operation_id: str, *, event_id: str, reason: str
    ) -> AuditEvent:
        """Append an ``AuditCorrection`` event correcting ``event_id``; nothing is rewritten.

        The audit trail is append-only, so a correction is a new event of the same operation
        with details ``{"corrects": event_id, "reason": reason}``; the operation's state does not
        change. Only a context with the :data:`AUDITOR_ROLE` role may correct
        (:class:`NotPermitted` otherwise), and only an event of the same tenant and operation.
        """
        if AUDITOR_ROLE not in context.roles:
            raise NotPermitted(f"correcting the audit trail needs the {AUDITOR_ROLE!r} role")
        validate_identifier(operation_id, "operation_id")
        validate_identifier(event_id, "event_id")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInput("a correction needs a reason", field="reason")
        _reference(reason, "reason")
        key = _key(context.tenant_id, operation_id)

        def body(tx: Transaction) -> Row:
            row = tx.one("operation_get", key)
            if row is None:
                raise NotFound(f"no operation {operation_id}", operation_id=operation_id)
            if tx.one("event_get", {**key, "event_id": event_id}) is None:
                raise NotFound(
                    f"operation {operation_id} has no event {event_id}", event_id=event_id
                )
            updated = self._transition(
                tx,
                row,
                actor=context.actor_id,
                event_type="AuditCorrection",
                now_us=self._now_us(),
                details={"corrects": event_id, "reason": reason},
            )
            written = tx.one("event_at_sequence", {**key, "sequence": updated["event_sequence"]})
            if written is None:  # pragma: no cover - written in this transaction
                raise NotFound("the correction vanished")
            return written

        return event_from_row(self.store.write(body, label="correct_event"))


_MAX_UNITS = 2**63 - 1  # what both databases store in a BIGINT


def _context(context: object) -> Context:
    """``context`` if it is a :class:`Context`, else ``invalid_input`` (never an AttributeError)."""
    if not isinstance(context, Context):
        raise InvalidInput("context must be a Context from the trusted host", field="context")
    return context


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _observation_details(observation: Observation) -> dict[str, Any]:
    details: dict[str, Any] = {"outcome": observation.outcome.value}
    if observation.provider_reference is not None:
        details["provider_reference"] = observation.provider_reference
    return details
