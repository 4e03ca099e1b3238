"""Authority: immutable proposals, digest-bound single-use approvals, admission that spends them.

The model proposes; trusted code decides. A :class:`Proposal` is the canonical record of one
concrete intended effect, stored immutably with its digest (recomputed on every read). An
:class:`Approval` binds one approver's decision to that digest. :meth:`Authority.admit` is the
one transaction that turns authority into an operation: it rechecks the actor, expiry, resource
version, policy, approval binding and capacity, then inserts the operation, consumes the approval
and holds the units together. A denial writes an ``AdmissionDenied`` event and nothing else.

The proposal digest is ``digest("proposal", ...)`` (see :mod:`effectledger.canonical`) over::

    {"action", "arguments", "contract_version", "destination": {"account_id", "endpoint"},
     "expires_us", "operation_id", "policy_version", "pool", "proposer_id", "resource_version",
     "target", "tenant_id", "units"}
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from effectledger._failpoints import crash_point
from effectledger.actions import ActionRegistry
from effectledger.admission import Admission, Denial, admit_proposal
from effectledger.canonical import canonical_bytes, digest
from effectledger.errors import (
    AdmissionDenied,
    ApprovalRefused,
    CommitUncertain,
    ConcurrentModification,
    ConstraintViolation,
    InvalidInput,
    NotFound,
    OperationIdTaken,
    StorageError,
    TamperedProposal,
)
from effectledger.ledger import (
    DISPATCH_WORKER,
    Ledger,
    append_event,
    claim_in,
    lock_scope,
    lock_trail,
    new_id,
    validate_operation_id,
)
from effectledger.model import Context, DestinationRef, Operation, to_micros, validate_identifier
from effectledger.proposals import (
    Approval,
    CapacityUsage,
    Correlation,
    Proposal,
    approval_from_row,
    proposal_digest_body,
    proposal_from_row,
)
from effectledger.store import Store, Transaction

__all__ = ["Admission", "Approval", "Authority", "CapacityUsage", "Correlation", "Proposal"]

T = TypeVar("T")
_WRITE_ATTEMPTS = 3
_SETTLE_PASSES = 2  # admissions whose COMMIT was lost before reaching the server
MAX_APPROVAL_LIFETIME = timedelta(days=366)
MAX_REASON_LENGTH = 500
MAX_UNITS = 2**53 - 1  # what every JSON reader holds exactly
CAPACITY_ACTOR = "capacity-admin"


def _text(value: object, field: str, limit: int) -> str:
    """``value`` if it is printable text of 1-``limit`` characters that every store can hold."""
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.strip():
        raise InvalidInput(f"{field} must be text of 1-{limit} characters", field=field)
    if "\x00" in value or any(0xD800 <= ord(char) <= 0xDFFF for char in value):
        raise InvalidInput(f"{field} holds a NUL or a lone surrogate", field=field)
    return value


class Authority:
    """Proposals, approvals and admission for the actions of one registry."""

    def __init__(self, ledger: Ledger, registry: ActionRegistry) -> None:
        self.ledger = ledger
        self.registry = registry

    @property
    def _store(self) -> Store:
        return self.ledger.store

    def _now(self) -> datetime:
        return self.ledger.clock.now()

    def _write(self, body: Callable[[Transaction], T], label: str) -> T:
        # Every body takes its locks first, so contention waits instead of failing; a racing
        # writer that still wins (a serialization failure the store did not absorb, a moved
        # version) is answered by re-running the body on fresh rows, never by leaking its text.
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                return self._store.write(body, label=label)
            except (ConstraintViolation, ConcurrentModification):
                if attempt == _WRITE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- proposals -----------------------------------------------------------------------

    def propose(
        self,
        context: Context,
        action_name: str,
        arguments: Mapping[str, Any],
        *,
        operation_id: str | None = None,
        correlation: Correlation | Mapping[str, str] | None = None,
    ) -> Proposal:
        """Record an immutable proposal of ``action_name`` with validated, normalized arguments.

        The proposer is the context's actor; the target, resource version, units, pool,
        destination, policy version and expiry come from the registered action, never from the
        arguments. ``operation_id`` (generated when omitted) must not name any other proposal,
        operation or trail (:class:`OperationIdTaken`). Writes the proposal and
        ``ProposalRecorded`` in one transaction.
        """
        action = self.registry.get(action_name)
        model = action.validate(arguments)
        normalized = model.model_dump(mode="json")
        arguments_bytes = canonical_bytes(normalized)  # refuses floats, oversize, surrogates
        if operation_id is None:
            operation_id = f"op-{new_id()}"
        validate_operation_id(operation_id)
        correlation_record = Correlation.coerce(correlation)
        target = action.target(model)
        units = action.units(model)
        if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= MAX_UNITS:
            raise InvalidInput(
                f"{action.name} computed an invalid number of units (0-{MAX_UNITS})",
                field="units",
            )
        resource_version = action.resource_version(context, target)
        now = self._now()
        expires_us = to_micros(now + action.proposal_ttl)
        body = proposal_digest_body(
            tenant_id=context.tenant_id,
            operation_id=operation_id,
            proposer_id=context.actor_id,
            action=action.name,
            contract_version=action.contract_version,
            target=target,
            resource_version=resource_version,
            arguments=normalized,
            units=units,
            pool=action.pool,
            destination=action.destination,
            policy_version=action.policy.version,
            expires_us=expires_us,
        )
        proposal_digest = digest("proposal", body)
        proposal_id = f"prop-{new_id()}"
        row = {
            **{k: v for k, v in body.items() if k not in {"arguments", "destination"}},
            "proposal_id": proposal_id,
            "arguments_json": arguments_bytes.decode(),
            "destination_account": action.destination.account_id,
            "destination_endpoint": action.destination.endpoint,
            "correlation_json": canonical_bytes(correlation_record.to_dict()).decode(),
            "digest": proposal_digest,
            "created_us": to_micros(now),
        }
        key = {"tenant_id": context.tenant_id, "operation_id": operation_id}

        def write(tx: Transaction) -> None:
            lock_trail(tx, context.tenant_id, operation_id)
            if tx.one("proposal_for_operation", key) or tx.one("event_head", key):
                raise OperationIdTaken(
                    f"operation id {operation_id} is already taken", operation_id=operation_id
                )
            tx.run("proposal_insert", row)
            append_event(
                tx,
                self.ledger,
                tenant_id=context.tenant_id,
                operation_id=operation_id,
                actor=context.actor_id,
                event_type="ProposalRecorded",
                evidence_reference=f"proposal/{proposal_id}",
                details={"proposal_id": proposal_id, "digest": proposal_digest, "units": units},
            )

        self._write(write, "propose")
        return proposal_from_row(row)

    def get_proposal(self, context: Context, proposal_id: str) -> Proposal:
        """The tenant's proposal, its digest recomputed (:class:`TamperedProposal` if edited)."""
        validate_identifier(proposal_id, "proposal_id")
        row = self._store.one(
            "proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
        )
        if row is None:
            raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
        return proposal_from_row(row)

    def approval_consumed_by(self, context: Context, approval_id: str) -> str | None:
        """The operation that consumed the approval, or ``None`` while it is unspent."""
        validate_identifier(approval_id, "approval_id")
        row = self._store.one(
            "consumption_get", {"tenant_id": context.tenant_id, "approval_id": approval_id}
        )
        return None if row is None else str(row["operation_id"])

    # -- approvals -----------------------------------------------------------------------

    def approve(
        self,
        approver: Context,
        proposal_id: str,
        *,
        digest: str,
        expires_in: timedelta = timedelta(hours=1),
    ) -> Approval:
        """Record ``approver``'s approval of exactly the proposal with ``digest``.

        ``digest`` is the one the approver was shown: if the stored proposal has another, the
        approval is refused (``digest_mismatch``). The approver comes from the trusted context;
        policy decides whether they may approve (``self_approval``, ``not_an_approver``). A
        proposal that was denied is closed (``proposal_denied``). ``expires_in`` is a positive
        duration of at most a year.
        """
        if (
            not isinstance(expires_in, timedelta)
            or expires_in <= timedelta(0)
            or expires_in > MAX_APPROVAL_LIFETIME
        ):
            raise InvalidInput(
                "expires_in must be a positive timedelta of at most 366 days", field="expires_in"
            )
        return self._decide(approver, proposal_id, digest, expires_in, granted=True, reason=None)

    def deny(self, approver: Context, proposal_id: str, *, digest: str, reason: str) -> Approval:
        """Record ``approver``'s denial: it closes the proposal for good (a decision is final).

        After a denial no approval, earlier or later, can admit the proposal. A proposal already
        admitted can no longer be denied (``already_admitted``): its effect may be under way.
        """
        _text(reason, "reason", MAX_REASON_LENGTH)
        return self._decide(
            approver, proposal_id, digest, timedelta(0), granted=False, reason=reason
        )

    def _decide(
        self,
        approver: Context,
        proposal_id: str,
        shown_digest: str,
        expires_in: timedelta,
        *,
        granted: bool,
        reason: str | None,
    ) -> Approval:
        if not isinstance(shown_digest, str):
            raise InvalidInput("digest must be the proposal digest the approver was shown")
        proposal = self.get_proposal(approver, proposal_id)
        action = self.registry.get(proposal.action)
        now = self._now()
        if shown_digest != proposal.digest:
            raise ApprovalRefused(
                "the approver was shown another proposal than the one stored",
                reason="digest_mismatch",
                proposal_id=proposal_id,
            )
        refusal = action.policy.may_approve(approver, proposal)
        if refusal is not None:
            raise ApprovalRefused(f"{approver.actor_id} may not decide this", reason=refusal)
        if granted and now >= proposal.expires_at:
            raise ApprovalRefused("the proposal has expired", reason="expired")
        approval_id = f"appr-{new_id()}"
        row = {
            "tenant_id": approver.tenant_id,
            "approval_id": approval_id,
            "proposal_id": proposal_id,
            "digest": proposal.digest,
            "decision": "granted" if granted else "denied",
            "kind": "approval",
            "approver_id": approver.actor_id,
            "policy_version": action.policy.version,
            "reason": reason,
            "decided_us": to_micros(now),
            "expires_us": to_micros(now + expires_in),
        }
        key = {"tenant_id": approver.tenant_id, "operation_id": proposal.operation_id}

        def write(tx: Transaction) -> None:
            lock_trail(tx, approver.tenant_id, proposal.operation_id)
            if tx.one(
                "proposal_denial", {"tenant_id": approver.tenant_id, "proposal_id": proposal_id}
            ):
                raise ApprovalRefused(
                    "this proposal was denied: a denial is final",
                    reason="proposal_denied",
                    proposal_id=proposal_id,
                )
            if not granted and tx.one("operation_get", key):
                raise ApprovalRefused(
                    "this proposal was already admitted; its effect may be under way",
                    reason="already_admitted",
                    proposal_id=proposal_id,
                )
            # The event first: the database refuses a decision without the event recording it.
            append_event(
                tx,
                self.ledger,
                tenant_id=approver.tenant_id,
                operation_id=proposal.operation_id,
                actor=approver.actor_id,
                event_type="ApprovalGranted" if granted else "ApprovalDenied",
                evidence_reference=f"approval/{approval_id}",
                details={"approval_id": approval_id, "digest": proposal.digest},
            )
            tx.run("approval_insert", row)

        self._write(write, "approve" if granted else "deny")
        return approval_from_row(row)

    # -- admission -----------------------------------------------------------------------

    def admit(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None = None,
        tenant_id: str | None = None,
    ) -> Operation:
        """Admit the proposal as an operation, spending its authority, in one transaction.

        See :meth:`admit_or_replay`; this returns the operation alone.
        """
        return self.admit_or_replay(
            context, proposal_id, approval_id=approval_id, tenant_id=tenant_id
        ).operation

    def admit_or_replay(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None = None,
        tenant_id: str | None = None,
        claim_for: Collection[DestinationRef] = (),
        executor_id: str = DISPATCH_WORKER,
    ) -> Admission:
        """Admit the proposal, or find the operation an earlier identical call admitted.

        ``tenant_id`` is the tenant the request was addressed to (a URL, a tool binding); it
        must be the authenticated context's. The exact replay of an admission returns the
        existing operation with ``replayed=True`` without spending anything; every denial raises
        :class:`AdmissionDenied` with a stable reason, leaves no operation and no consumption,
        and is recorded as an ``AdmissionDenied`` event on the proposal's trail in the same
        transaction. Concurrent calls for one proposal serialize on its trail.

        With ``claim_for``, an operation admitted now whose destination is one of those is also
        claimed in the admission's transaction (its expiry, resource version and permission were
        just checked there): ``Admission.claim`` is then the committed claim to submit, saving
        the executor a transaction of its own. A replay claims nothing.
        """
        if tenant_id is not None and tenant_id != context.tenant_id:
            raise AdmissionDenied(
                "the request names another tenant than the caller's", reason="tenant_mismatch"
            )
        validate_identifier(proposal_id, "proposal_id")
        if approval_id is not None:
            validate_identifier(approval_id, "approval_id")
        row = self._store.one(
            "proposal_get", {"tenant_id": context.tenant_id, "proposal_id": proposal_id}
        )
        if row is None:
            raise NotFound(f"no proposal {proposal_id}", proposal_id=proposal_id)
        try:
            proposal = proposal_from_row(row)
        except TamperedProposal as exc:
            self._write(
                lambda tx: append_event(
                    tx,
                    self.ledger,
                    tenant_id=context.tenant_id,
                    operation_id=row["operation_id"],
                    actor=context.actor_id,
                    event_type="AdmissionDenied",
                    details={"reason": "digest_mismatch"},
                ),
                "admission_denied",
            )
            raise AdmissionDenied(
                "the stored proposal no longer matches its digest",
                reason="digest_mismatch",
                tampered=True,
            ) from exc
        action = self.registry.get(proposal.action)
        # Application callback: read before the transaction, compared inside it.
        current_version = action.resource_version(context, proposal.target)
        claim = proposal.destination in claim_for

        def body(tx: Transaction, attempt_id: str) -> Admission | Denial:
            admitted = admit_proposal(
                tx,
                self.ledger,
                context,
                proposal,
                action,
                approval_id,
                current_version,
                self._now(),
            )
            if not claim or isinstance(admitted, Denial) or admitted.replayed:
                return admitted
            prepared = claim_in(
                tx,
                self.ledger,
                context,
                proposal.operation_id,
                attempt_id=attempt_id,
                executor_id=executor_id,
                bound_to=proposal.destination,
            )
            return Admission(operation=admitted.operation, replayed=False, claim=prepared)

        outcome: Admission | Denial | None = None
        for _ in range(_SETTLE_PASSES):
            attempt_id = new_id()
            try:
                outcome = self._write(lambda tx, a=attempt_id: body(tx, a), "admit")  # type: ignore[misc]
            except CommitUncertain as exc:
                if not claim:
                    raise
                outcome = self._settle(context, proposal, attempt_id, exc)
            if outcome is not None:
                break
        if outcome is None:  # pragma: no cover - two admissions proven absent in a row
            raise CommitUncertain("the admission could not be confirmed; try again")
        if isinstance(outcome, Denial):
            raise AdmissionDenied(outcome.message, reason=outcome.reason, **outcome.details)
        if outcome.claim is not None:
            crash_point("after_claim")
        return outcome

    def _settle(
        self, context: Context, proposal: Proposal, attempt_id: str, uncertain: CommitUncertain
    ) -> Admission | None:
        """An admission-and-claim whose COMMIT went unacknowledged, as a fresh read settles it.

        The committed claim if it landed; the operation (claimed by nobody yet, or by another
        call) if only someone's admission did; ``None`` if nothing was admitted, so the
        admission can simply run again. Raises ``uncertain`` when even that cannot be read.
        """
        try:
            prepared = self.ledger.committed_claim(
                context.tenant_id, proposal.operation_id, attempt_id
            )
            operation = self.ledger.get(context, proposal.operation_id)
        except NotFound:
            return None
        except StorageError as exc:
            raise uncertain from exc
        return Admission(operation=operation, replayed=prepared is None, claim=prepared)

    # -- dispatch-time recheck and capacity ----------------------------------------------

    def dispatch_guard(self, worker: Context, operation: Operation) -> str | None:
        """The dispatch-time recheck: a reason to release the operation, or ``None``.

        ``worker`` is the dispatching executor's trusted identity in the operation's tenant
        (see :data:`effectledger.executor.DispatchGuard`), never a stand-in for the requester.
        Permission is what admission stored: the approval or pre-authorization it consumed,
        or the policy tier it recorded, decided under the requester's own roles; it is not
        re-evaluated here. What can go stale after admission is rechecked: the proposal's
        digest, its expiry and the target's resource version (read under ``worker``).
        Operations admitted without a proposal are not checked here.
        """
        if operation.proposal_id is None:
            return None
        row = self._store.one(
            "proposal_get",
            {"tenant_id": operation.tenant_id, "proposal_id": operation.proposal_id},
        )
        if row is None:
            return "digest_mismatch"
        try:
            proposal = proposal_from_row(row)
        except TamperedProposal:
            return "digest_mismatch"
        if proposal.operation_id != operation.operation_id:
            return "digest_mismatch"
        action = self.registry.get(proposal.action)
        if self._now() >= proposal.expires_at:
            return "expired"
        if action.resource_version(worker, proposal.target) != proposal.resource_version:
            return "stale_resource_version"
        return None

    def set_capacity_limit(
        self, tenant_id: str, pool: str, units: int, *, actor: str = CAPACITY_ACTOR
    ) -> None:
        """Set the most units a tenant's pool may hold and commit together (trusted admin).

        The change is recorded as a ``CapacityLimitSet`` event on the pool's own trail
        (operation id ``pool:<pool>``), in the same transaction, naming ``actor``.
        """
        validate_identifier(tenant_id, "tenant_id")
        validate_identifier(pool, "pool")
        validate_identifier(actor, "actor")
        if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= MAX_UNITS:
            raise InvalidInput(
                f"a capacity limit is an integer from 0 to {MAX_UNITS}", field="units"
            )
        now_us = to_micros(self._now())

        def write(tx: Transaction) -> None:
            lock_scope(tx, tenant_id, f"pool:{pool}")
            previous = tx.one("capacity_limit_get", {"tenant_id": tenant_id, "pool": pool})
            tx.run(
                "capacity_limit_set",
                {"tenant_id": tenant_id, "pool": pool, "limit_units": units, "now_us": now_us},
            )
            append_event(
                tx,
                self.ledger,
                tenant_id=tenant_id,
                operation_id=capacity_trail(pool),
                actor=actor,
                event_type="CapacityLimitSet",
                details={
                    "pool": pool,
                    "limit_units": units,
                    "previous_units": None if previous is None else int(previous["limit_units"]),
                },
            )

        self._write(write, "capacity_limit")

    def capacity(self, context: Context, pool: str) -> CapacityUsage:
        """Held, committed and freed units of the tenant's pool, and its limit."""
        validate_identifier(pool, "pool")
        key = {"tenant_id": context.tenant_id, "pool": pool}

        def read(tx: Transaction) -> CapacityUsage:
            usage = tx.one("capacity_usage", key)
            limit = tx.one("capacity_limit_get", key)
            return CapacityUsage(
                pool=pool,
                held=0 if usage is None else int(usage["held"]),
                committed=0 if usage is None else int(usage["committed"]),
                freed=0 if usage is None else int(usage["freed"]),
                limit=None if limit is None else int(limit["limit_units"]),
            )

        return self._store.read(read)


def capacity_trail(pool: str) -> str:
    """The id under which a pool's limit changes are chained (never an operation's id)."""
    return f"pool:{pool}"
