"""What verification reports: a finding, with a stable code, a message and where it was found.

The one record of a failed check, shared by every room that checks evidence: the log's
checkpoints, the witnesses' cosignatures, and the bundle verifier with its second pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Finding"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One verification failure: a stable ``code``, a message and where it was found."""

    code: str
    message: str
    position: int | None = None
    event_id: str | None = None
    operation_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, without the empty fields."""
        view = {
            "code": self.code,
            "message": self.message,
            "position": self.position,
            "event_id": self.event_id,
            "operation_id": self.operation_id,
        }
        return {key: value for key, value in view.items() if value is not None}
