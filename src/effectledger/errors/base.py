"""The root of the error tree, errors that carry a reason code, and errors about a request.

The tree itself is drawn in :mod:`effectledger.errors`, which every name is imported from.
"""

from __future__ import annotations

from typing import Any, ClassVar


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


class ReasonedError(EffectLedgerError):
    """An error whose stable ``reason`` code (also ``details["reason"]``) says which case it is.

    A subclass that lists its ``reasons`` takes only those; one that lists none takes any code.
    """

    reasons: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str, *, reason: str, **details: Any) -> None:
        if self.reasons and reason not in self.reasons:  # pragma: no cover - a programming error
            raise ValueError(f"unknown {self.code} reason {reason!r}")
        super().__init__(message, reason=reason, **details)
        self.reason = reason


class InvalidInput(EffectLedgerError):
    """A caller passed a malformed, oversized or out-of-range value; nothing was written."""

    code = "invalid_input"
    status = 422


class ToolArgumentsRejected(InvalidInput):
    """A model-facing tool was called with arguments it does not take; they were not used."""

    code = "tool_arguments_rejected"


class MalformedRequest(InvalidInput):
    """A request body is not the JSON document its endpoint takes (unparseable, wrong type)."""

    code = "malformed_request"
    status = 400


class RequestTooLarge(InvalidInput):
    """A request body is over the size limit; it was refused before it was parsed."""

    code = "request_too_large"
    status = 413


class EvidenceRequired(EffectLedgerError):
    """An observation claims acceptance without a provider reference and an evidence reference."""

    code = "evidence_required"
    status = 422


class NotFound(EffectLedgerError):
    """No such record for this tenant (another tenant's records are reported the same way)."""

    code = "not_found"
    status = 404


class Conflict(EffectLedgerError):
    """The request contradicts what the ledger already holds."""

    code = "conflict"
    status = 409


class LedgerNotEmpty(Conflict):
    """A whole ledger may be moved only into an empty one; the target holds rows, none written."""

    code = "ledger_not_empty"


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


class MissingExtra(EffectLedgerError):
    """A feature needs an optional extra that is not installed (details: ``extra``, ``missing``).

    The message names the install command; nothing was attempted.
    """

    code = "missing_extra"
    status = 501
