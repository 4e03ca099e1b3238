"""What a PostgreSQL primary says of its standbys, and whether a failover may lose a commit.

With asynchronous replication the primary acknowledges a COMMIT before any standby has it; a
failover to a standby then loses what the old primary acknowledged: an operation's claim can
vanish (the operation is READY again and is re-sent under the same idempotency key, which the
destination must deduplicate), and a sealed checkpoint can vanish (the sealer's memory refuses
the log that went backwards). Only a synchronous standby, with ``synchronous_commit`` at ``on``
or above, makes an acknowledged COMMIT survive the failover (docs/operating.md, "High
availability").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Replication"]

_WAITING = frozenset({"on", "remote_write", "remote_apply"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Replication:
    """The standbys of the server a store writes to, as its ``pg_stat_replication`` shows."""

    standbys: int
    synchronous: int
    unknown: int
    synchronous_commit: str

    @classmethod
    def from_row(cls, row: Any) -> Replication:
        """The record of the ``replication`` statement's one row."""
        return cls(
            standbys=int(row["standbys"]),
            synchronous=int(row["synchronous"]),
            unknown=int(row["unknown"]),
            synchronous_commit=str(row["synchronous_commit"]),
        )

    @property
    def may_lose_commits(self) -> bool:
        """Whether a failover to one of the standbys may lose a COMMIT already acknowledged:
        there are standbys, and COMMIT waits for none of them (as far as the server tells)."""
        if self.standbys == 0 or self.unknown:
            return False
        return self.synchronous == 0 or self.synchronous_commit not in _WAITING

    def warning(self) -> str | None:
        """The operator's warning when :attr:`may_lose_commits`, else ``None``."""
        if not self.may_lose_commits:
            return None
        waits = (
            f"synchronous_commit is {self.synchronous_commit}"
            if self.synchronous
            else "no standby is synchronous"
        )
        return (
            f"the database replicates to {self.standbys} standby(s) asynchronously ({waits}): a "
            "failover can lose writes the ledger acknowledged; operations whose claim is lost are "
            "sent again under the same idempotency key, and the sealer refuses a log that went "
            "backwards (docs/operating.md, High availability)"
        )
