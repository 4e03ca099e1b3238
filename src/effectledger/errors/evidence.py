"""Errors of stored data and audit evidence: tampering, verification, proofs, the log, export."""

from __future__ import annotations

from typing import Any, ClassVar

from effectledger.errors.base import Conflict, EffectLedgerError, InvalidInput, ReasonedError


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

    ``details["reason"]``: ``chain_broken``, ``sealed_event_edited``, ``sealed_event_deleted``,
    ``trail_not_authentic``, ``state_not_in_trail``, ``command_not_admitted``,
    ``key_not_admitted``, ``destination_not_admitted``, ``command_not_proposed``,
    ``approval_not_in_trail`` or ``proposal_denied``.
    """

    code = "tampered_operation"


class ChainBreak(IntegrityError):
    """An operation's audit events do not form an unbroken hash chain."""

    code = "audit_chain_broken"


class MissingAdmission(IntegrityError):
    """A stored operation lacks the admission reference that authorized it (a caller that
    leaves it out is told ``invalid_input``)."""

    code = "missing_admission"


class EvidenceMissing(IntegrityError):
    """An event cites an evidence blob (``evidence_blobs/sha256:…``) the store no longer holds.

    Raised wherever the evidence is read or handed on: loading it, exporting or proving the
    event, explaining its operation. ``details``: ``reference`` and, where known, ``event_id``.
    """

    code = "evidence_missing"


class AuditVerificationFailed(IntegrityError, ReasonedError):
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
        "event_not_authentic",
        "event_deleted",
        "event_reordered",
        "event_inserted",
        "operation_deleted",
        "log_root_mismatch",
        "checkpoint_deleted",
        "checkpoint_reordered",
        "log_emptied",
        "log_rolled_back",
        "log_forked",
        "log_superseded",
        "log_restored",
        "witness_refused",
        "cosignature_missing",
        "cosignature_invalid",
        "cosignature_stale",
        "evidence_missing",
        "evidence_edited",
    )


class NoteError(InvalidInput, ReasonedError, ValueError):
    """A signed note, key string or checkpoint is malformed, unverified or badly signed.

    Raised by the C2SP formats of :mod:`effectledger.audit` (signers, notes, checkpoints), which
    take their input from a caller or a file. ``reason`` (also ``details["reason"]``) is one of
    ``note_malformed`` (syntax), ``note_unverified`` (no trusted key signed; ``note`` is the
    parsed, untrusted :class:`~effectledger.audit.log.note.Note` and ``details["signed_by"]`` lists
    the ``name+keyid`` of the keys that did sign),
    ``note_bad_signature`` (a trusted key's signature fails), ``key_invalid`` (bad key string or
    name, or ambiguous verifiers), ``checkpoint_malformed`` and ``checkpoint_origin_mismatch``.
    Checking stored or exported evidence turns these into :class:`AuditVerificationFailed`
    reasons in one place (:func:`effectledger.audit.log.checkpoints.refusal_reason`).
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
        super().__init__(message, reason=reason, **details)
        self.note = note


class ProofError(InvalidInput, ValueError):
    """A Merkle inclusion or consistency proof does not verify (RFC 9162 §2.1.3.2, §2.1.4.2).

    Raised for every kind of failure (malformed arguments, wrong hash sizes, a path too short or
    too long, a recomputed root that differs), so that "not proven" is one case; the message
    says what exactly was wrong.
    """

    code = "proof_invalid"


class LogKeyInvalid(InvalidInput):
    """A log signing or verifier key is missing, malformed or not the key the log expects."""

    code = "log_key_invalid"


class TrailKeyInvalid(InvalidInput):
    """A trail key is missing or malformed (the message never contains its secret)."""

    code = "trail_key_invalid"


class LogNotSealed(Conflict):
    """The tenant's signed log does not cover this yet: seal it, then ask again."""

    code = "log_not_sealed"


class ExportFailed(EffectLedgerError):
    """An export could not be written; the cursor still names the last durable batch."""

    code = "export_failed"
    status = 500


class ExportCursorMismatch(ExportFailed):
    """The export file and its durable cursor disagree; nothing was written to either."""

    code = "export_cursor_mismatch"
    status = 409
