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
    │   ├── TrailKeyInvalid               trail_key_invalid (422)
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
    │   ├── LedgerNotEmpty                ledger_not_empty (409)
    │   └── LogNotSealed                  log_not_sealed (409)
    ├── IntegrityError                    integrity (500)
    │   ├── TamperedCommand               tampered_command (500)
    │   ├── TamperedProposal              tampered_proposal (500)
    │   ├── TamperedOperation             tampered_operation (500)
    │   ├── MissingAdmission              missing_admission (500)
    │   ├── ChainBreak                    audit_chain_broken (500)
    │   ├── EvidenceMissing               evidence_missing (500)
    │   └── AuditVerificationFailed       audit_verification_failed (500)
    │         reason: bundle_malformed, checkpoint_missing, checkpoint_malformed,
    │                 checkpoint_origin_mismatch, checkpoint_signature_invalid, unknown_key,
    │                 checkpoint_inconsistent, checkpoint_deleted, checkpoint_reordered,
    │                 inclusion_proof_invalid, event_edited, event_not_authentic,
    │                 event_deleted, event_reordered, event_inserted, operation_deleted,
    │                 log_root_mismatch, log_emptied, log_rolled_back, log_forked,
    │                 log_superseded, log_restored, witness_refused,
    │                 cosignature_missing, cosignature_invalid, cosignature_stale,
    │                 evidence_missing, evidence_edited
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
        ├── CommitUncertain               commit_uncertain (503)
        ├── StorageFull                   storage_full (503)
        └── StorageReadOnly               storage_read_only (503)
"""

from __future__ import annotations

from effectledger.errors.authority import (
    AdmissionDenied,
    ApprovalRefused,
    NotAuthenticated,
    NotPermitted,
)
from effectledger.errors.base import (
    AdmissionConflict,
    ConcurrentModification,
    Conflict,
    EffectLedgerError,
    EvidenceRequired,
    InvalidInput,
    InvalidTransition,
    LedgerNotEmpty,
    MalformedRequest,
    MissingExtra,
    NotFound,
    OperationIdTaken,
    RequestTooLarge,
    ToolArgumentsRejected,
)
from effectledger.errors.destinations import (
    DeliveryUncertain,
    DestinationError,
    DestinationMismatch,
    DestinationUnavailable,
    SecretUnavailable,
)
from effectledger.errors.evidence import (
    AuditVerificationFailed,
    ChainBreak,
    EvidenceMissing,
    ExportCursorMismatch,
    ExportFailed,
    IntegrityError,
    LogKeyInvalid,
    LogNotSealed,
    MissingAdmission,
    NoteError,
    ProofError,
    TamperedCommand,
    TamperedOperation,
    TamperedProposal,
    TrailKeyInvalid,
)
from effectledger.errors.storage import (
    CommitUncertain,
    ConstraintViolation,
    StorageBusy,
    StorageError,
    StorageFull,
    StorageReadOnly,
)

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
    "EvidenceMissing",
    "EvidenceRequired",
    "ExportCursorMismatch",
    "ExportFailed",
    "IntegrityError",
    "InvalidInput",
    "InvalidTransition",
    "LedgerNotEmpty",
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
    "StorageFull",
    "StorageReadOnly",
    "TamperedCommand",
    "TamperedOperation",
    "TamperedProposal",
    "ToolArgumentsRejected",
    "TrailKeyInvalid",
]

# The classes live in modules of one theme each; they are public here, and say so when printed,
# pickled or compared by name.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
