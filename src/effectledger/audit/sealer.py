"""The sealer: gives committed events their log positions in batches and signs a checkpoint.

The hot path never touches the Merkle log. Each committed event leaves one row in ``log_pending``
(an insert trigger; no per-tenant lock). A sealer, in one write transaction per batch and per
tenant:

1. holds the tenant's ``log_heads`` row (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL:
   ``SELECT … FOR UPDATE``), so two sealers never assign the same position — the primary key
   ``(tenant_id, position)`` and the unique ``event_id`` of ``log_entries`` back this up;
2. opens the latest stored checkpoint with its own key and checks that the stored frontier
   reproduces it;
3. takes pending events in commit order, recomputes each event's hash and its link to the
   previous event of its operation (refusing to seal an edited or orphaned event), appends their
   leaves, and **proves** the new tree consistent with the latest checkpoint before signing;
4. stores the entries, the signed checkpoint (with its consistency proof) and the new head.

So two inconsistent checkpoints are never signed, and every checkpoint is kept. The delay
between an event's commit and its sealing is reported (:class:`SealReport`) and bounded by how
often :meth:`LogSealer.seal` runs (``effectledger audit seal --loop --max-delay S``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from effectledger.audit.checkpoints import refusal_reason
from effectledger.audit.frontier import Frontier, consistency_proof
from effectledger.audit.keys import origin_for, parse_rotation, rotation_line
from effectledger.audit.merkle import EMPTY_ROOT, verify_consistency
from effectledger.audit.note import Checkpoint, Signer, open_checkpoint, sign_checkpoint
from effectledger.clock import Clock, SystemClock
from effectledger.errors import (
    AuditVerificationFailed,
    ConcurrentModification,
    InvalidInput,
    LogKeyInvalid,
    NoteError,
    ProofError,
)
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import canonical_entry, leaf_of_entry
from effectledger.model import from_micros, to_micros, validate_identifier
from effectledger.store import Row, Store, Transaction

__all__ = ["DEFAULT_BATCH_SIZE", "LogSealer", "SealReport", "StoredCheckpoint"]

DEFAULT_BATCH_SIZE = 5000
_SQLITE_MIN_YIELD_S = 0.001
_SQLITE_MAX_YIELD_S = 0.1  # SQLite's busy handler polls a waiting writer at most every 100 ms


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCheckpoint:
    """A signed checkpoint as the store keeps it."""

    tenant_id: str
    seq: int
    size: int
    root_hash: str
    previous_size: int
    consistency_proof: tuple[bytes, ...]
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SealReport:
    """What one :meth:`LogSealer.seal` call did for one tenant.

    ``sealed``: events given a position; ``size``/``checkpoint_seq``: the log after it;
    ``max_delay``: the longest an event sealed now had waited since it was recorded;
    ``pending``/``oldest_pending_age``: what is still waiting (``None`` when nothing is).
    """

    tenant_id: str
    sealed: int
    checkpoints: int
    size: int
    checkpoint_seq: int
    max_delay: timedelta | None
    pending: int
    oldest_pending_age: timedelta | None


def _stored(row: Row) -> StoredCheckpoint:
    return StoredCheckpoint(
        tenant_id=row["tenant_id"],
        seq=int(row["seq"]),
        size=int(row["size"]),
        root_hash=row["root_hash"],
        previous_size=int(row["previous_size"]),
        consistency_proof=tuple(
            bytes.fromhex(node) for node in json.loads(row["consistency_proof"])
        ),
        note=row["note"],
    )


def _refuse(message: str, reason: str, **details: Any) -> AuditVerificationFailed:
    return AuditVerificationFailed(message, reason=reason, **details)


class LogSealer:
    """Seals the audit events of a store into per-tenant Merkle logs signed with ``signer``."""

    def __init__(
        self,
        store: Store,
        signer: Signer,
        *,
        clock: Clock | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput("batch_size must be a positive integer")
        self.store = store
        self.signer = signer
        self.clock: Clock = clock or SystemClock()
        self.batch_size = batch_size

    # -- reads ---------------------------------------------------------------------------

    def tenants(self) -> list[str]:
        """Tenants that have a log or events waiting to be sealed."""
        rows = self.store.read(
            lambda tx: [*tx.all("log_tenants", {}), *tx.all("log_pending_tenants", {})]
        )
        return sorted({row["tenant_id"] for row in rows})

    def pending(self, tenant_id: str) -> tuple[int, timedelta | None]:
        """How many of the tenant's events wait for a position, and the oldest one's age."""
        row = self.store.one("log_pending_oldest", {"tenant_id": tenant_id})
        if row is None or not row["pending"]:
            return 0, None
        age = self.clock.now() - from_micros(int(row["oldest_us"]))
        return int(row["pending"]), max(age, timedelta(0))

    def latest_checkpoint(self, tenant_id: str) -> StoredCheckpoint | None:
        """The tenant's latest signed checkpoint, or ``None`` before the first seal."""
        row = self.store.one("log_checkpoint_latest", {"tenant_id": tenant_id})
        return None if row is None else _stored(row)

    # -- sealing -------------------------------------------------------------------------

    def seal(self, tenant_id: str, *, max_batches: int | None = None) -> SealReport:
        """Seal the tenant's pending events, one batch and one checkpoint per transaction.

        Stops when nothing is pending or after ``max_batches``. Raises
        :class:`~effectledger.errors.AuditVerificationFailed` (and seals nothing of that batch)
        if a pending event was edited or its predecessor is missing, or if the stored log does
        not match its latest checkpoint; :class:`~effectledger.errors.LogKeyInvalid` if the
        latest checkpoint is not signed by this sealer's key.
        """
        validate_identifier(tenant_id, "tenant_id")
        sealed = checkpoints = 0
        max_delay: timedelta | None = None
        head: Row | None = None
        held = 0.0
        while max_batches is None or checkpoints < max_batches:
            if checkpoints and self.store.dialect == "sqlite":
                # One SQLite file has one writer at a time, and a writer waiting for it polls
                # the lock (every 100 ms at most). Pausing as long as the last batch held it
                # leaves the lock free at least half the time, so the effect path (a claim, a
                # result write within its budget) gets in between batches.
                time.sleep(min(max(held, _SQLITE_MIN_YIELD_S), _SQLITE_MAX_YIELD_S))
            if not self.pending(tenant_id)[0]:
                # Nothing to seal: check the head against its checkpoint without taking the
                # write lock, so sealers looping over an idle log never hold up a writer.
                head = self.store.read(lambda tx: self._checked_head(tx, tenant_id))
                break
            started = time.monotonic()
            result = self.store.write(lambda tx: self._seal_batch(tx, tenant_id), label="seal")
            held = time.monotonic() - started
            head = result[0]
            if result[1] == 0:
                break
            sealed += result[1]
            checkpoints += 1
            if result[2] is not None and (max_delay is None or result[2] > max_delay):
                max_delay = result[2]
        if head is None:  # pragma: no cover - the loop runs at least once
            raise AssertionError("unreachable")
        waiting, age = self.pending(tenant_id)
        return SealReport(
            tenant_id=tenant_id,
            sealed=sealed,
            checkpoints=checkpoints,
            size=int(head["size"]),
            checkpoint_seq=int(head["checkpoint_seq"]),
            max_delay=max_delay,
            pending=waiting,
            oldest_pending_age=age,
        )

    def seal_all(self) -> list[SealReport]:
        """:meth:`seal` every tenant that has a log or pending events."""
        return [self.seal(tenant_id) for tenant_id in self.tenants()]

    def _checked_head(self, tx: Transaction, tenant_id: str) -> Row:
        """The tenant's head row, read without a lock and checked against its checkpoint."""
        head = tx.one("log_head_get", {"tenant_id": tenant_id})
        if head is None:
            if tx.one("log_checkpoint_latest", {"tenant_id": tenant_id}) is not None:
                raise _refuse(
                    f"{tenant_id}'s log has a signed checkpoint but no head",
                    "checkpoint_inconsistent",
                )
            return {"tenant_id": tenant_id, "size": 0, "checkpoint_seq": 0}
        self._check(tx, tenant_id, head)
        return head

    def _head(self, tx: Transaction, tenant_id: str, now_us: int) -> tuple[Row, Frontier]:
        """Hold the tenant's head row and check it against the latest signed checkpoint."""
        tx.run(
            "log_head_ensure",
            {"tenant_id": tenant_id, "root_hash": EMPTY_ROOT.hex(), "now_us": now_us},
        )
        head = tx.one("log_head_lock", {"tenant_id": tenant_id})
        if head is None:  # pragma: no cover - ensured just above
            raise AssertionError("the log head vanished")
        return head, self._check(tx, tenant_id, head)

    def _check(self, tx: Transaction, tenant_id: str, head: Row) -> Frontier:
        """The head's frontier, if it reproduces the latest signed checkpoint."""
        try:
            frontier = Frontier.from_hex(int(head["size"]), head["frontier"])
        except ValueError as exc:
            raise _refuse(
                f"the stored frontier of {tenant_id}'s log is malformed",
                "checkpoint_inconsistent",
            ) from exc
        latest = tx.one("log_checkpoint_latest", {"tenant_id": tenant_id})
        if latest is None:
            if frontier.size or int(head["checkpoint_seq"]):
                raise _refuse(
                    f"{tenant_id}'s log has entries but no signed checkpoint",
                    "checkpoint_inconsistent",
                )
            return frontier
        checkpoint = self._open(latest["note"], tenant_id)
        if (
            int(latest["seq"]) != int(head["checkpoint_seq"])
            or checkpoint.size != frontier.size
            or checkpoint.root_hash != frontier.root()
        ):
            raise _refuse(
                f"{tenant_id}'s stored log head does not match its latest signed checkpoint "
                f"#{latest['seq']} (size {checkpoint.size})",
                "checkpoint_inconsistent",
                checkpoint_seq=int(latest["seq"]),
            )
        return frontier

    def _open(self, note: str, tenant_id: str) -> Checkpoint:
        try:
            checkpoint, _ = open_checkpoint(
                note, [self.signer.verifier()], origin=origin_for(tenant_id)
            )
        except NoteError as exc:
            reason = refusal_reason(exc)
            if reason == "unknown_key":  # to a sealer, the unknown key is its own
                raise LogKeyInvalid(
                    f"the latest checkpoint of {tenant_id}'s log is not signed by key "
                    f"{self.signer.name}+{self.signer.key_id:08x}; use that key, or rotate "
                    "to this one (effectledger audit rotate-key)"
                ) from exc
            raise _refuse(
                f"the latest checkpoint of {tenant_id}'s log does not verify: {exc}", reason
            ) from exc
        rotation = parse_rotation(checkpoint)
        if rotation is not None and rotation[1] != self.signer.verifier():
            raise LogKeyInvalid(
                f"{tenant_id}'s log was rotated to key {rotation[1].name}+"
                f"{rotation[1].key_id:08x}; this sealer's key is retired"
            )
        return checkpoint

    def _seal_batch(self, tx: Transaction, tenant_id: str) -> tuple[Row, int, timedelta | None]:
        now_us = to_micros(self.clock.now())
        head, frontier = self._head(tx, tenant_id, now_us)
        rows = tx.all("log_pending_batch", {"tenant_id": tenant_id, "limit": self.batch_size})
        if not rows:
            return head, 0, None
        old = frontier.copy()
        leaves: list[bytes] = []
        last_hash: dict[str, tuple[int, str]] = {}
        oldest_us = now_us
        for row in rows:
            leaf = self._leaf(tx, row, last_hash)
            tx.run(
                "log_entry_insert",
                {
                    "tenant_id": tenant_id,
                    "position": old.size + len(leaves),
                    "event_id": row["event_id"],
                    "leaf_hash": leaf.hex(),
                    "now_us": now_us,
                },
            )
            tx.run("log_pending_delete", {"pending_id": row["pending_id"]})
            leaves.append(leaf)
            oldest_us = min(oldest_us, int(row["recorded_us"]))
        frontier.extend(leaves)
        root = frontier.root()
        proof = consistency_proof(old, leaves)
        try:
            verify_consistency(old.size, frontier.size, old.root(), root, proof)
        except ProofError as exc:  # pragma: no cover - guards the frontier arithmetic itself
            raise _refuse(
                f"the new tree of {tenant_id}'s log is not consistent with its last checkpoint",
                "checkpoint_inconsistent",
            ) from exc
        seq = int(head["checkpoint_seq"]) + 1
        note = sign_checkpoint(
            Checkpoint(origin_for(tenant_id), frontier.size, root), [self.signer]
        )
        self._store_checkpoint(tx, tenant_id, seq, old.size, frontier, proof, note, now_us, head)
        delay = timedelta(microseconds=max(now_us - oldest_us, 0))
        return {**dict(head), "size": frontier.size, "checkpoint_seq": seq}, len(rows), delay

    def _leaf(self, tx: Transaction, row: Row, last_hash: dict[str, tuple[int, str]]) -> bytes:
        """Recompute one pending event's hash and chain link; return its leaf hash."""
        if row["event_id"] is None:
            raise _refuse(
                f"event {row['pending_event_id']} was committed but its row is gone",
                "event_deleted",
                event_id=row["pending_event_id"],
            )
        where = {"event_id": row["event_id"], "operation_id": row["operation_id"]}
        entry = canonical_entry(row)
        computed = row["event_hash"]
        if entry is None:
            raise _refuse(
                f"event {row['event_id']} no longer matches the hash it was written with "
                "(or its details are not canonical JSON)",
                "event_edited",
                **where,
            )
        sequence = int(row["sequence"])
        previous = last_hash.get(row["operation_id"])
        if sequence == 1:
            expected = GENESIS_HASH
        elif previous is not None and previous[0] == sequence - 1:
            expected = previous[1]
        else:
            before = tx.one(
                "event_at_sequence",
                {
                    "tenant_id": row["tenant_id"],
                    "operation_id": row["operation_id"],
                    "sequence": sequence - 1,
                },
            )
            if before is None:
                raise _refuse(
                    f"event {row['event_id']} follows sequence {sequence - 1} of operation "
                    f"{row['operation_id']}, which is missing",
                    "event_deleted",
                    **where,
                )
            expected = before["event_hash"]
        if row["prev_hash"] != expected:
            raise _refuse(
                f"event {row['event_id']} does not link to the event before it in operation "
                f"{row['operation_id']}",
                "event_edited",
                **where,
            )
        last_hash[row["operation_id"]] = (sequence, computed)
        return leaf_of_entry(entry)

    def _store_checkpoint(
        self,
        tx: Transaction,
        tenant_id: str,
        seq: int,
        previous_size: int,
        frontier: Frontier,
        proof: list[bytes],
        note: str,
        now_us: int,
        head: Row,
    ) -> None:
        tx.run(
            "log_checkpoint_insert",
            {
                "tenant_id": tenant_id,
                "seq": seq,
                "size": frontier.size,
                "root_hash": frontier.root().hex(),
                "previous_size": previous_size,
                "consistency_proof": json.dumps([node.hex() for node in proof]),
                "note": note,
                "now_us": now_us,
            },
        )
        changed = tx.run(
            "log_head_advance",
            {
                "tenant_id": tenant_id,
                "size": frontier.size,
                "root_hash": frontier.root().hex(),
                "frontier": frontier.to_hex(),
                "checkpoint_seq": seq,
                "now_us": now_us,
                "old_size": int(head["size"]),
                "old_checkpoint_seq": int(head["checkpoint_seq"]),
            },
        )
        if changed != 1:  # pragma: no cover - the head row is held by this transaction
            raise ConcurrentModification(f"{tenant_id}'s log head moved during sealing")

    # -- key rotation --------------------------------------------------------------------

    def rotate_key(self, tenant_id: str, new_signer: Signer) -> StoredCheckpoint | None:
        """Sign the current tree head with this sealer's key and ``new_signer`` together.

        The rotation checkpoint names both verifier keys in an extension line; afterwards only
        a sealer holding ``new_signer`` may seal this log. Returns ``None`` (and writes nothing)
        for a tenant that has no checkpoint yet: its first seal can simply use the new key.
        """
        validate_identifier(tenant_id, "tenant_id")
        if new_signer.verifier() == self.signer.verifier():
            raise LogKeyInvalid("the new log key is the current one")

        def body(tx: Transaction) -> StoredCheckpoint | None:
            now_us = to_micros(self.clock.now())
            head, frontier = self._head(tx, tenant_id, now_us)
            if int(head["checkpoint_seq"]) == 0:
                return None
            checkpoint = Checkpoint(
                origin_for(tenant_id),
                frontier.size,
                frontier.root(),
                (rotation_line(self.signer.verifier(), new_signer.verifier()),),
            )
            note = sign_checkpoint(checkpoint, [self.signer, new_signer])
            if parse_rotation(Checkpoint.parse(checkpoint.to_text())) is None:  # pragma: no cover
                raise AssertionError("a rotation checkpoint must announce its rotation")
            seq = int(head["checkpoint_seq"]) + 1
            self._store_checkpoint(
                tx, tenant_id, seq, frontier.size, frontier, [], note, now_us, head
            )
            row = tx.one("log_checkpoint_latest", {"tenant_id": tenant_id})
            return None if row is None else _stored(row)

        return self.store.write(body, label="rotate_key")
