"""The one error tree of effectledger.

Every error the library raises on purpose derives from :class:`EffectLedgerError` and carries a
stable ``code`` (a short snake_case string that never changes meaning) and the HTTP status a
service would answer with. Driver errors (``sqlite3.Error``, ``psycopg.Error``) are translated in
exactly one place per backend and chained with ``raise ... from exc``; callers never need to catch
them.

::

    EffectLedgerError                     effectledger_error (500)
    ├── InvalidInput                      invalid_input (422)
    │   ├── ToolArgumentsRejected         tool_arguments_rejected (422)
    │   ├── LogKeyInvalid                 log_key_invalid (422)
    │   ├── NoteError                     note_invalid (422), also a ValueError
    │   │     reason: note_malformed, note_unverified, note_bad_signature, key_invalid,
    │   │             checkpoint_malformed, checkpoint_origin_mismatch
    │   ├── ProofError                    proof_invalid (422), also a ValueError
    │   ├── MalformedRequest              malformed_request (400)
    │   └── RequestTooLarge               request_too_large (413)
    ├── NotAuthenticated                  not_authenticated (401)
    ├── NotFound                          not_found (404)
    ├── AdmissionDenied                   admission_denied (403)
    ├── ApprovalRefused                   approval_refused (403)
    ├── NotPermitted                      not_permitted (403)
    ├── Conflict                          conflict (409)
    │   ├── AdmissionConflict             admission_conflict (409)
    │   ├── ConcurrentModification        concurrent_modification (409)
    │   ├── OperationIdTaken              operation_id_taken (409)
    │   ├── InvalidTransition             invalid_transition (409)
    │   └── LogNotSealed                  log_not_sealed (409)
    ├── IntegrityError                    integrity (500)
    │   ├── TamperedCommand               tampered_command (500)
    │   ├── TamperedProposal              tampered_proposal (500)
    │   ├── TamperedOperation             tampered_operation (500)
    │   ├── MissingAdmission              missing_admission (500)
    │   ├── ChainBreak                    audit_chain_broken (500)
    │   └── AuditVerificationFailed       audit_verification_failed (500)
    │         reason: bundle_malformed, checkpoint_missing, checkpoint_malformed,
    │                 checkpoint_origin_mismatch, checkpoint_signature_invalid, unknown_key,
    │                 checkpoint_inconsistent, checkpoint_deleted, checkpoint_reordered,
    │                 inclusion_proof_invalid, event_edited, event_deleted, event_reordered,
    │                 event_inserted, operation_deleted, log_root_mismatch
    ├── DestinationMismatch               destination_mismatch (409)
    ├── DestinationError                  destination_error (502)
    │   ├── DeliveryUncertain             delivery_uncertain (502)
    │   ├── DestinationUnavailable        destination_unavailable (503)
    │   │   └── LookupNotSent             lookup_not_sent (503), in destinations.http
    │   └── SecretUnavailable             secret_unavailable (502)
    ├── EvidenceRequired                  evidence_required (422)
    ├── ExportFailed                      export_failed (500)
    │   └── ExportCursorMismatch          export_cursor_mismatch (409)
    ├── MissingExtra                      missing_extra (501)
    └── StorageError                      storage (503)
        ├── StorageBusy                   storage_busy (503)
        ├── ConstraintViolation           constraint_violation (409)
        └── CommitUncertain               commit_uncertain (503)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AdmissionConflict",
    "AdmissionDenied",
    "ApprovalRefused",
    "AuditVerificationFailed",
    "ChainBreak",
    "CommitUncertain",
    "ConcurrentModification",
    "Conflict",
    "ConstraintViolation",
    "DeliveryUncertain",
    "DestinationError",
    "DestinationMismatch",
    "DestinationUnavailable",
    "EffectLedgerError",
    "EvidenceRequired",
    "ExportCursorMismatch",
    "ExportFailed",
    "IntegrityError",
    "InvalidInput",
    "InvalidTransition",
    "LogKeyInvalid",
    "LogNotSealed",
    "MalformedRequest",
    "MissingAdmission",
    "MissingExtra",
    "NotAuthenticated",
    "NotFound",
    "NotPermitted",
    "NoteError",
    "OperationIdTaken",
    "ProofError",
    "RequestTooLarge",
    "SecretUnavailable",
    "StorageBusy",
    "StorageError",
    "TamperedCommand",
    "TamperedOperation",
    "TamperedProposal",
    "ToolArgumentsRejected",
]


class EffectLedgerError(Exception):
    """Root of every error effectledger raises on purpose.

    ``code`` is stable and machine-readable; ``status`` is the HTTP status a service answers with;
    ``details`` holds extra, non-secret facts (ids, reason codes) for logs and API bodies.
    """

    code: ClassVar[str] = "effectledger_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready body: ``{"code", "message", "details"}``."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by message and details, which rebuild every error (errors cross processes)."""
        return (_rebuild, (type(self), self.message, dict(self.details)), dict(self.__dict__))


def _rebuild(cls: type[EffectLedgerError], message: str, details: dict[str, Any]) -> Any:
    return cls(message, **details)


class InvalidInput(EffectLedgerError):
    """A caller passed a malformed, oversized or out-of-range value; nothing was written."""

    code = "invalid_input"
    status = 422


class ToolArgumentsRejected(InvalidInput):
    """A model-facing tool was called with arguments it does not take; they were not used."""

    code = "tool_arguments_rejected"


class LogKeyInvalid(InvalidInput):
    """A log signing or verifier key is missing, malformed or not the key the log expects."""

    code = "log_key_invalid"


class NoteError(InvalidInput, ValueError):
    """A signed note, key string or checkpoint is malformed, unverified or badly signed.

    Raised by the C2SP formats of :mod:`effectledger.audit` (signers, notes, checkpoints), which
    take their input from a caller or a file. ``reason`` (also ``details["reason"]``) is one of
    ``note_malformed`` (syntax), ``note_unverified`` (no trusted key signed; ``note`` is the
    parsed, untrusted :class:`~effectledger.audit.note.Note` and ``details["signed_by"]`` lists
    the ``name+keyid`` of the keys that did sign),
    ``note_bad_signature`` (a trusted key's signature fails), ``key_invalid`` (bad key string or
    name, or ambiguous verifiers), ``checkpoint_malformed`` and ``checkpoint_origin_mismatch``.
    Checking stored or exported evidence turns these into :class:`AuditVerificationFailed`
    reasons in one place (:func:`effectledger.audit.checkpoints.refusal_reason`).
    """

    code = "note_invalid"
    reasons: ClassVar[tuple[str, ...]] = (
        "note_malformed",
        "note_unverified",
        "note_bad_signature",
        "key_invalid",
        "checkpoint_malformed",
        "checkpoint_origin_mismatch",
    )

    def __init__(self, message: str, *, reason: str, note: Any = None, **details: Any) -> None:
        if reason not in self.reasons:  # pragma: no cover - a programming error
            raise ValueError(f"unknown note error reason {reason!r}")
        super().__init__(message, reason=reason, **details)
        self.reason = reason
        self.note = note


class ProofError(InvalidInput, ValueError):
    """A Merkle inclusion or consistency proof does not verify (RFC 9162 §2.1.3.2, §2.1.4.2).

    Raised for every kind of failure (malformed arguments, wrong hash sizes, a path too short or
    too long, a recomputed root that differs), so that "not proven" is one case; the message
    says what exactly was wrong.
    """

    code = "proof_invalid"


class MalformedRequest(InvalidInput):
    """A request body is not the JSON document its endpoint takes (unparseable, wrong type)."""

    code = "malformed_request"
    status = 400


class RequestTooLarge(InvalidInput):
    """A request body is over the size limit; it was refused before it was parsed."""

    code = "request_too_large"
    status = 413


class NotAuthenticated(EffectLedgerError):
    """No valid credential: missing, unknown, wrong or revoked. Nothing was read or written.

    ``details["reason"]``: ``missing_credentials``, ``invalid_credentials`` or
    ``revoked_credentials`` (only a caller holding the exact secret of a revoked key learns that).
    """

    code = "not_authenticated"
    status = 401


class NotFound(EffectLedgerError):
    """No such record for this tenant (another tenant's records are reported the same way)."""

    code = "not_found"
    status = 404


class AdmissionDenied(EffectLedgerError):
    """Authority did not cover this admission; no operation exists and no approval was spent.

    ``reason`` is one of the stable reason codes: ``actor_mismatch``, ``tenant_mismatch``,
    ``expired``, ``stale_resource_version``, ``digest_mismatch``, ``approval_missing``,
    ``approval_denied``, ``approval_consumed``, ``capacity_exceeded``, ``policy_denied``.
    """

    code = "admission_denied"
    status = 403

    def __init__(self, message: str, *, reason: str, **details: Any) -> None:
        super().__init__(message, reason=reason, **details)
        self.reason = reason


class ApprovalRefused(EffectLedgerError):
    """An approval or denial could not be recorded; ``reason`` says why (stable code).

    Reasons: ``digest_mismatch`` (the approver was shown another proposal), ``self_approval``,
    ``not_an_approver``, ``expired``.
    """

    code = "approval_refused"
    status = 403

    def __init__(self, message: str, *, reason: str, **details: Any) -> None:
        super().__init__(message, reason=reason, **details)
        self.reason = reason


class NotPermitted(EffectLedgerError):
    """The trusted context lacks the role this step needs; nothing was written."""

    code = "not_permitted"
    status = 403


class Conflict(EffectLedgerError):
    """The request contradicts what the ledger already holds."""

    code = "conflict"
    status = 409


class AdmissionConflict(Conflict):
    """An operation id was admitted before with another requester, revision or command."""

    code = "admission_conflict"


class ConcurrentModification(Conflict):
    """Another writer changed the record first; reload it instead of overwriting it."""

    code = "concurrent_modification"


class OperationIdTaken(Conflict):
    """The operation id already names another proposal, operation or trail; nothing was written."""

    code = "operation_id_taken"


class InvalidTransition(Conflict):
    """The operation is not in a state that allows this step."""

    code = "invalid_transition"


class LogNotSealed(Conflict):
    """The tenant's signed log does not cover this yet: seal it, then ask again."""

    code = "log_not_sealed"


class IntegrityError(EffectLedgerError):
    """Stored data fails a check the ledger relies on; nothing further is done with it."""

    code = "integrity"
    status = 500


class TamperedCommand(IntegrityError):
    """A stored command no longer matches the fingerprint computed at admission."""

    code = "tampered_command"


class TamperedProposal(IntegrityError):
    """A stored proposal no longer matches its digest: it was edited outside the ledger."""

    code = "tampered_proposal"


class TamperedOperation(IntegrityError):
    """An operation's row disagrees with its hash-chained trail or its authority: not dispatched.

    ``details["reason"]``: ``chain_broken``, ``state_not_in_trail``, ``command_not_admitted``,
    ``command_not_proposed``, ``approval_not_in_trail`` or ``proposal_denied``.
    """

    code = "tampered_operation"


class ChainBreak(IntegrityError):
    """An operation's audit events do not form an unbroken hash chain."""

    code = "audit_chain_broken"


class MissingAdmission(IntegrityError):
    """A stored operation lacks the admission reference that authorized it (a caller that
    leaves it out is told ``invalid_input``)."""

    code = "missing_admission"


class AuditVerificationFailed(IntegrityError):
    """The audit evidence does not verify: an event, the log or a checkpoint was changed.

    ``details["reason"]`` is the stable code of the first finding (one of :attr:`reasons`);
    ``details["findings"]`` lists every finding as ``{"code", "message", ...}``.
    """

    code = "audit_verification_failed"
    reasons: ClassVar[tuple[str, ...]] = (
        "bundle_malformed",
        "checkpoint_missing",
        "checkpoint_malformed",
        "checkpoint_origin_mismatch",
        "checkpoint_signature_invalid",
        "unknown_key",
        "checkpoint_inconsistent",
        "inclusion_proof_invalid",
        "event_edited",
        "event_deleted",
        "event_reordered",
        "event_inserted",
        "operation_deleted",
        "log_root_mismatch",
        "checkpoint_deleted",
        "checkpoint_reordered",
    )

    def __init__(self, message: str, *, reason: str, **details: Any) -> None:
        if reason not in self.reasons:  # pragma: no cover - a programming error
            raise ValueError(f"unknown audit verification reason {reason!r}")
        super().__init__(message, reason=reason, **details)

    @property
    def reason(self) -> str:
        """The stable code of the first finding."""
        return str(self.details["reason"])


class DestinationMismatch(EffectLedgerError):
    """The destination adapter is not bound to the persisted account and endpoint."""

    code = "destination_mismatch"
    status = 409


class DestinationError(EffectLedgerError):
    """A destination adapter could not give an answer; raised by adapters, caught by the executor.

    The executor and the recovery worker never let these reach a caller: they record what they
    mean (an uncertain outcome, a lookup to try again) and return a result.
    """

    code = "destination_error"
    status = 502


class DeliveryUncertain(DestinationError):
    """A submission may have reached the destination: the executor records its outcome Unknown.

    Raise it from a destination's ``submit`` when the request left the process and no answer
    came back (a timeout, a dropped connection); recovery then asks the destination by key.
    """

    code = "delivery_uncertain"


class DestinationUnavailable(DestinationError):
    """The destination could not be reached to answer a lookup; recovery asks again later."""

    code = "destination_unavailable"
    status = 503


class SecretUnavailable(DestinationError):
    """A credential a destination needs could not be read; the request was not sent."""

    code = "secret_unavailable"


class EvidenceRequired(EffectLedgerError):
    """An observation claims acceptance without a provider reference and an evidence reference."""

    code = "evidence_required"
    status = 422


class ExportFailed(EffectLedgerError):
    """An export could not be written; the cursor still names the last durable batch."""

    code = "export_failed"
    status = 500


class ExportCursorMismatch(ExportFailed):
    """The export file and its durable cursor disagree; nothing was written to either."""

    code = "export_cursor_mismatch"
    status = 409


class MissingExtra(EffectLedgerError):
    """A feature needs an optional extra that is not installed (details: ``extra``, ``missing``).

    The message names the install command; nothing was attempted.
    """

    code = "missing_extra"
    status = 501


class StorageError(EffectLedgerError):
    """The store failed; the transaction that was running rolled back."""

    code = "storage"
    status = 503


class StorageBusy(StorageError):
    """The store stayed locked through every bounded retry; nothing was written."""

    code = "storage_busy"


class ConstraintViolation(StorageError):
    """The database refused a write (a key, foreign key, check or append-only trigger)."""

    code = "constraint_violation"
    status = 409


class CommitUncertain(StorageError):
    """A COMMIT was sent but its acknowledgement was lost; the outcome must be checked."""

    code = "commit_uncertain"
