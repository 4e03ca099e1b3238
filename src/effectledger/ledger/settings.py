"""The ledger's timing and escalation rules, its worker names, and what a recovery pass took on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from effectledger.clock import Clock
from effectledger.events.authentication import TrailKeys
from effectledger.model.operations import Attempt
from effectledger.store import Store

__all__ = [
    "AUDITOR_ROLE",
    "DISPATCH_WORKER",
    "RECOVERY_WORKER",
    "DueWork",
    "LedgerParts",
    "LedgerSettings",
    "micros",
]

AUDITOR_ROLE = "auditor"
DISPATCH_WORKER = "dispatch-worker"
RECOVERY_WORKER = "recovery-worker"


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
    ``proposal_ttl``: how long a proposal waits for its decision and admission when the action
    declares no ``ttl`` of its own; past it no approval is taken and admission is denied
    ``expired``.
    ``record_budget``: how long :meth:`Ledger.record` may take to write a result, waits for
    locks and re-reads included, whatever the caller does meanwhile. Past it the record fails
    with :class:`~effectledger.errors.StorageBusy`, nothing is written, and the attempt stays
    unresolved for recovery to look up. ``None`` leaves only the store's own timeouts.
    ``trail_keys``: the key the database does not hold that authenticates every event this
    ledger writes (:mod:`effectledger.events.authentication`); a claim then refuses a trail
    any of whose events it does not authenticate. ``None``: events carry no tag and claims
    check the hash chain only, which an administrator can recompute.
    """

    recover_after: timedelta = timedelta(seconds=30)
    lookup_interval: timedelta = timedelta(seconds=30)
    max_inconclusive_lookups: int = 5
    review_owner: str = "operations"
    review_deadline: timedelta = timedelta(hours=24)
    proposal_ttl: timedelta = timedelta(minutes=15)
    record_budget: timedelta | None = timedelta(seconds=2)
    trail_keys: TrailKeys | None = None


class LedgerParts(Protocol):
    """What a step of the ledger uses of the :class:`Ledger` it runs for."""

    @property
    def store(self) -> Store:
        """The ledger's database."""
        ...

    @property
    def clock(self) -> Clock:
        """The time events are recorded at."""
        ...

    @property
    def settings(self) -> LedgerSettings:
        """Timing and escalation rules."""
        ...


def micros(delta: timedelta) -> int:
    """``delta`` in whole microseconds."""
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
