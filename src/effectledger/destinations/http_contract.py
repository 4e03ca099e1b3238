"""What an HTTP destination's answers mean: the classification table and the replay window.

The defaults rest on HTTP semantics (RFC 9110, RFC 6585) and on the IETF httpapi
``Idempotency-Key`` draft; docs/destinations.md explains each row. In short:

============================  =====================  ==============================================
answer                        outcome                why
============================  =====================  ==============================================
200, 201, 202                 Accepted               the destination took the request (202: took
                                                     it for processing — acceptance, not delivery)
400, 403, 404, 405, 410,      PermanentRejection     the request was refused as it stands; sending
411, 413, 414, 415, 422                              it again cannot succeed (422: the draft's
                                                     answer to a key reused with another body)
401, 429                      RetryableRejection     refused before any processing (no valid
                                                     credentials; rate limit, with Retry-After)
408, 409, 5xx, 3xx, anything  Unknown                the request may have been processed: 409 is
not listed                                           the draft's "key still in flight", a 5xx does
                                                     not promise non-acceptance
connect error, connect or     RetryableRejection     no byte of the request was sent
pool timeout, bad URL,
missing secret
read/write timeout, reset,    Unknown                the request may have been written and acted on
deadline passed after send,
incomplete response
============================  =====================  ==============================================

Every row is overridable: pass other status sets, or :class:`StatusRule` entries that also match
an error code in the JSON body (they are checked first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from effectledger.errors import InvalidInput
from effectledger.model.operations import Outcome

__all__ = ["HttpContract", "StatusRule"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusRule:
    """``status`` (and, if given, the body's error code) means ``outcome``; checked first."""

    status: int
    outcome: Outcome
    error_code: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpContract:
    """How a destination's answers are classified, and whether and when a resend is safe.

    ``deduplicates_by_key``: the destination promises that a request repeated with the same
    ``Idempotency-Key`` performs nothing new and answers as the first did. Only then may
    ``replay_window`` be non-zero: the time, measured from the first send of a submission, within
    which an identical resend (same key, bytes and URL) is made automatically after an Unknown
    answer. A resend starts only if its whole deadline ends inside the window; the window is never
    extended. After it, only lookup (recovery) or manual review can settle the outcome.
    Set the window no longer than the period the destination documents keeping its keys.
    """

    accepted: frozenset[int] = frozenset({200, 201, 202})
    permanent: frozenset[int] = frozenset({400, 403, 404, 405, 410, 411, 413, 414, 415, 422})
    retryable: frozenset[int] = frozenset({401, 429})
    rules: tuple[StatusRule, ...] = ()
    error_field: str = "error"
    deduplicates_by_key: bool = False
    replay_window: timedelta = timedelta(0)
    max_resends: int = 2

    def __post_init__(self) -> None:
        sets = {"accepted": self.accepted, "permanent": self.permanent, "retryable": self.retryable}
        for name, statuses in sets.items():
            if any(not 100 <= status <= 599 for status in statuses):
                raise InvalidInput(f"{name} holds a status outside 100-599", field=name)
        if (
            self.accepted & self.permanent
            or self.accepted & self.retryable
            or self.permanent & self.retryable
        ):
            raise InvalidInput("a status may belong to one class only", field="contract")
        if self.replay_window < timedelta(0):
            raise InvalidInput("replay_window cannot be negative", field="replay_window")
        if self.replay_window > timedelta(0) and not self.deduplicates_by_key:
            raise InvalidInput(
                "a replay window needs a destination that deduplicates by key",
                field="replay_window",
            )
        if not 0 <= self.max_resends <= 10:
            raise InvalidInput("max_resends must be between 0 and 10", field="max_resends")

    @property
    def replays(self) -> bool:
        """Whether this contract allows any automatic resend at all."""
        return self.deduplicates_by_key and self.replay_window > timedelta(0)

    def classify(self, status: int, body: Any) -> tuple[Outcome, str]:
        """The outcome of a complete response and the reason code kept with its evidence."""
        code = _error_code(body, self.error_field)
        for rule in self.rules:
            if rule.status == status and (rule.error_code is None or rule.error_code == code):
                return rule.outcome, f"rule:{status}" + (f":{code}" if rule.error_code else "")
        if status in self.accepted:
            return Outcome.ACCEPTED, f"accepted:{status}"
        if status in self.permanent:
            return Outcome.PERMANENT_REJECTION, f"permanent:{status}"
        if status in self.retryable:
            return Outcome.RETRYABLE_REJECTION, f"retryable:{status}"
        return Outcome.UNKNOWN, f"unknown:{status}"


def _error_code(body: Any, field: str) -> str | None:
    if isinstance(body, Mapping):
        value = body.get(field)
        if isinstance(value, str):
            return value
    return None
