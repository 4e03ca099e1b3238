"""Errors of authority: who the caller is, what admission and approval refused."""

from __future__ import annotations

from effectledger.errors.base import EffectLedgerError, ReasonedError


class NotAuthenticated(EffectLedgerError):
    """No valid credential: missing, unknown, wrong or revoked. Nothing was read or written.

    ``details["reason"]``: ``missing_credentials``, ``invalid_credentials`` or
    ``revoked_credentials`` (only a caller holding the exact secret of a revoked key learns that).
    """

    code = "not_authenticated"
    status = 401


class AdmissionDenied(ReasonedError):
    """Authority did not cover this admission; no operation exists and no approval was spent.

    ``reason`` is one of the stable reason codes: ``actor_mismatch``, ``tenant_mismatch``,
    ``expired``, ``stale_resource_version``, ``digest_mismatch``, ``approval_missing``,
    ``approval_denied``, ``approval_consumed``, ``capacity_exceeded``, ``policy_denied``.
    """

    code = "admission_denied"
    status = 403


class ApprovalRefused(ReasonedError):
    """An approval or denial could not be recorded; ``reason`` says why (stable code).

    Reasons: ``digest_mismatch`` (the approver was shown another proposal), ``self_approval``,
    ``not_an_approver``, ``expired``, ``already_admitted`` (the proposal's operation exists: it
    is decided, and its effect may be under way).
    """

    code = "approval_refused"
    status = 403


class NotPermitted(EffectLedgerError):
    """The trusted context lacks the role this step needs; nothing was written."""

    code = "not_permitted"
    status = 403
