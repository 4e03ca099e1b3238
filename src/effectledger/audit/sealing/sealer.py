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
   previous event of its operation (refusing to seal an edited or orphaned event, or one that
   follows a sealed event changed since it was sealed), checks each event's trail tag with the
   ledger's trail key (refusing an event the key never tagged: ``event_not_authentic``), appends
   their leaves, and **proves** the new tree consistent with the latest checkpoint before
   signing;
4. stores the entries, the signed checkpoint (with its consistency proof) and the new head.

So two inconsistent checkpoints are never signed, and every checkpoint is kept. The delay
between an event's commit and its sealing is reported (:class:`SealReport`) and bounded by how
often :meth:`LogSealer.seal` runs (``effectledger audit seal --loop --max-delay S``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.frontier import consistency_proof
from effectledger.audit.log.log_head import (
    StoredCheckpoint,
    checked_head,
    held_head,
    refuse,
    store_checkpoint,
    stored_checkpoint,
)
from effectledger.audit.log.merkle import EMPTY_ROOT
from effectledger.audit.log.origins import Restore
from effectledger.audit.log.proofs import verify_consistency
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.sealing.memory import Remembered, SealerMemory
from effectledger.audit.sealing.restore import restore
from effectledger.audit.sealing.rotation import rotate
from effectledger.audit.witnessing.submit import WitnessEndpoint, cosign_latest, parse_witnesses
from effectledger.clock import Clock, SystemClock
from effectledger.errors import InvalidInput, LogKeyInvalid, ProofError
from effectledger.events.authentication import TrailKeys
from effectledger.events.authenticity import unauthentic
from effectledger.events.chain import GENESIS_HASH, sealed_edit
from effectledger.events.record import canonical_entry, leaf_of_entry
from effectledger.model.operations import (
    Row,
    from_micros,
    to_micros,
    validate_identifier,
)
from effectledger.store import Store, Transaction

__all__ = ["DEFAULT_BATCH_SIZE", "LogSealer", "SealReport"]

DEFAULT_BATCH_SIZE = 5000
_SQLITE_MIN_YIELD_S = 0.001
_SQLITE_MAX_YIELD_S = 0.1  # SQLite's busy handler polls a waiting writer at most every 100 ms


@dataclass(frozen=True, slots=True, kw_only=True)
class SealReport:
    """What one :meth:`LogSealer.seal` call did for one tenant.

    ``sealed``: events given a position; ``size``/``checkpoint_seq``: the log after it;
    ``max_delay``: the longest an event sealed now had waited since it was recorded;
    ``pending``/``oldest_pending_age``: what is still waiting (``None`` when nothing is);
    ``cosigned``: witness cosignatures stored; ``witnesses_unreachable``: the URLs of witnesses
    that did not answer (their submission is retried on the next pass).
    """

    tenant_id: str
    sealed: int
    checkpoints: int
    size: int
    checkpoint_seq: int
    max_delay: timedelta | None
    pending: int
    oldest_pending_age: timedelta | None
    cosigned: int = 0
    witnesses_unreachable: tuple[str, ...] = ()


class LogSealer:
    """Seals the audit events of a store into per-tenant Merkle logs signed with ``signer``.

    ``min_batch`` / ``max_wait``: the cadence. A checkpoint is written for at least
    ``min_batch`` waiting events, or for fewer once the oldest has waited ``max_wait``; under a
    steady load the log then carries one checkpoint per ``min_batch`` events instead of one per
    pass, which is what a verifier pays a signature for. The defaults (1, none) seal whatever
    waits.

    ``memory``: where the sealer keeps the last tree it signed per log, outside the database
    (:mod:`effectledger.audit.sealing.memory`); with it, a log that is not a consistent extension of
    that tree (emptied, rolled back, forked) stops the sealer before any signature. Without it
    the sealer trusts the database's own latest checkpoint.

    ``trail_keys``: the ledger's trail keys (:mod:`effectledger.events.authentication`). With
    them, every event must carry a tag they verify before it is given a position: an untagged
    or badly tagged event (one written by someone without the key: a forged trail, a fabricated
    correction) stops the sealer with ``event_not_authentic`` naming it, and nothing of that
    batch is signed, so no checkpoint ever vouches for it. Without them the tags are not
    checked (a ledger that has no trail key).

    ``witnesses``: witnesses (:class:`~effectledger.audit.witnessing.submit.WitnessEndpoint`, or
    ``URL=KEY`` strings) that cosign each latest checkpoint, at the start of every pass and
    after every checkpoint stored (:mod:`effectledger.audit.witnessing.submit`); an unreachable one
    is retried on the next pass, a refusal stops the pass (``witness_refused``).
    """

    def __init__(
        self,
        store: Store,
        signer: Signer,
        *,
        clock: Clock | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        memory: SealerMemory | None = None,
        min_batch: int = 1,
        max_wait: timedelta | None = None,
        witnesses: Sequence[WitnessEndpoint | str] = (),
        trail_keys: TrailKeys | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput("batch_size must be a positive integer")
        if not isinstance(min_batch, int) or not 1 <= min_batch <= batch_size:
            raise InvalidInput("min_batch must be a positive integer, at most batch_size")
        if max_wait is not None and max_wait < timedelta(0):
            raise InvalidInput("max_wait must not be negative")
        self.memory = memory
        self.trail_keys = trail_keys
        self.witnesses = parse_witnesses(witnesses)
        self.min_batch = min_batch
        self.max_wait = max_wait
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
        return None if row is None else stored_checkpoint(row)

    # -- sealing -------------------------------------------------------------------------

    def seal(self, tenant_id: str, *, max_batches: int | None = None) -> SealReport:
        """Seal the tenant's pending events, one batch and one checkpoint per transaction.

        Stops when nothing is pending or after ``max_batches``. Raises
        :class:`~effectledger.errors.AuditVerificationFailed` (and seals nothing of that batch)
        if a pending event was edited, is not authenticated by the trail keys or its
        predecessor is missing, or if the stored log does not match its latest checkpoint (or
        the memory); :class:`~effectledger.errors.LogKeyInvalid` if the latest checkpoint is not
        signed by this sealer's key.
        """
        validate_identifier(tenant_id, "tenant_id")
        sealed = checkpoints = 0
        max_delay: timedelta | None = None
        head: Row | None = None
        held = 0.0
        cosigned, unreachable = self._witness(tenant_id)  # a refusal stops before any signature
        while max_batches is None or checkpoints < max_batches:
            if checkpoints and self.store.dialect == "sqlite":
                # One SQLite file has one writer at a time, and a writer waiting for it polls
                # the lock (every 100 ms at most). Pausing as long as the last batch held it
                # leaves the lock free at least half the time, so the effect path (a claim, a
                # result write within its budget) gets in between batches.
                time.sleep(min(max(held, _SQLITE_MIN_YIELD_S), _SQLITE_MAX_YIELD_S))
            waiting, age = self.pending(tenant_id)
            if not waiting or not self._due(waiting, age):
                # Nothing to seal (or too few events, too recently: the cadence): check the head
                # against its checkpoint without taking the write lock, so sealers looping over
                # an idle log never hold up a writer.
                head = self.store.read(partial(self._checked_head, tenant_id=tenant_id))
                break
            started = time.monotonic()
            result = self.store.write(lambda tx: self._seal_batch(tx, tenant_id), label="seal")
            held = time.monotonic() - started
            head = result[0]
            if self.memory is not None and result[1]:
                self.memory.commit(head["origin"], int(head["size"]), head["root_hash"])
            if result[1] == 0:
                break
            more, unreachable = self._witness(tenant_id, skip=unreachable)
            cosigned += more
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
            cosigned=cosigned,
            witnesses_unreachable=unreachable,
        )

    def _witness(self, tenant_id: str, skip: tuple[str, ...] = ()) -> tuple[int, tuple[str, ...]]:
        """Submit the latest checkpoint to each witness (again, if it cosigned it already)."""
        now_us = to_micros(self.clock.now())
        return cosign_latest(self.store, tenant_id, self.witnesses, now_us, skip=skip)

    def _due(self, waiting: int, age: timedelta | None) -> bool:
        """Whether ``waiting`` events, the oldest ``age`` old, make a checkpoint now.

        The cadence: at least ``min_batch`` events, or any number once the oldest has waited
        ``max_wait`` (without ``max_wait``, a smaller batch waits for more events).
        """
        if waiting >= self.min_batch:
            return True
        return self.max_wait is not None and age is not None and age >= self.max_wait

    def seal_all(self) -> list[SealReport]:
        """:meth:`seal` every tenant that has a log or pending events."""
        return [self.seal(tenant_id) for tenant_id in self.tenants()]

    def _checked_head(self, tx: Transaction, tenant_id: str) -> Row:
        head, origin = checked_head(tx, tenant_id, self.signer)
        size = int(head["size"])
        self._remembers(
            tx, tenant_id, origin, size, head["root_hash"] if size else EMPTY_ROOT.hex()
        )
        return head

    def _remembers(
        self, tx: Transaction, tenant_id: str, origin: str, size: int, root: str
    ) -> None:
        """Refuse unless the log ``(size, root)`` extends what this sealer last signed."""
        if self.memory is None:
            return

        def leaves(count: int) -> list[bytes]:
            rows = tx.all(
                "log_entries_from", {"tenant_id": tenant_id, "position": 0, "limit": count}
            )
            return [bytes.fromhex(row["leaf_hash"]) for row in rows]

        self.memory.check(origin, size, root, leaves)

    def _seal_batch(self, tx: Transaction, tenant_id: str) -> tuple[Row, int, timedelta | None]:
        now_us = to_micros(self.clock.now())
        head, frontier, origin = held_head(tx, tenant_id, self.signer, now_us)
        self._remembers(tx, tenant_id, origin, frontier.size, frontier.root().hex())
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
                    "operation_id": row["operation_id"],
                    "sequence": int(row["sequence"]),
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
            raise refuse(
                f"the new tree of {tenant_id}'s log is not consistent with its last checkpoint",
                "checkpoint_inconsistent",
            ) from exc
        if self.memory is not None:  # before the signature: a lost COMMIT stays explained
            self.memory.begin(
                origin,
                Remembered(old.size, old.root().hex()),
                Remembered(frontier.size, root.hex()),
            )
        note = sign_checkpoint(Checkpoint(origin, frontier.size, root), [self.signer])
        seq = store_checkpoint(
            tx, head, frontier, previous_size=old.size, proof=proof, note=note, now_us=now_us
        )
        delay = timedelta(microseconds=max(now_us - oldest_us, 0))
        return (
            {
                **dict(head),
                "size": frontier.size,
                "root_hash": root.hex(),
                "checkpoint_seq": seq,
                "origin": origin,
            },
            len(rows),
            delay,
        )

    def _leaf(self, tx: Transaction, row: Row, last_hash: dict[str, tuple[int, str]]) -> bytes:
        """Recompute one pending event's hash and chain link; return its leaf hash."""
        if row["event_id"] is None:
            raise refuse(
                f"event {row['pending_event_id']} was committed but its row is gone",
                "event_deleted",
                event_id=row["pending_event_id"],
            )
        where = {"event_id": row["event_id"], "operation_id": row["operation_id"]}
        entry = canonical_entry(row)
        computed = row["event_hash"]
        if entry is None:
            raise refuse(
                f"event {row['event_id']} no longer matches the hash it was written with "
                "(or its details are not canonical JSON)",
                "event_edited",
                **where,
            )
        sequence = int(row["sequence"])
        sealed = tx.one(
            "log_entry_at_position",
            {
                "tenant_id": row["tenant_id"],
                "operation_id": row["operation_id"],
                "sequence": sequence,
            },
        )
        if sealed is not None:
            raise refuse(
                f"sequence {sequence} of operation {row['operation_id']} was sealed before as "
                f"event {sealed['event_id']}, which is no longer in its trail: the trail was cut "
                "back and written again; nothing of this batch is sealed",
                "event_deleted",
                **where,
            )
        previous = last_hash.get(row["operation_id"])
        if sequence == 1:
            expected = GENESIS_HASH
        elif previous is not None and previous[0] == sequence - 1:
            expected = previous[1]
        else:
            before = tx.one(
                "event_sealed_at_sequence",
                {
                    "tenant_id": row["tenant_id"],
                    "operation_id": row["operation_id"],
                    "sequence": sequence - 1,
                },
            )
            if before is None:
                raise refuse(
                    f"event {row['event_id']} follows sequence {sequence - 1} of operation "
                    f"{row['operation_id']}, which is missing",
                    "event_deleted",
                    **where,
                )
            if sealed_edit([before]) is not None:
                raise refuse(
                    f"event {before['event_id']} of operation {row['operation_id']} was changed "
                    "after the log sealed it; nothing more of this log is sealed",
                    "event_edited",
                    event_id=before["event_id"],
                    operation_id=row["operation_id"],
                )
            expected = before["event_hash"]
        if row["prev_hash"] != expected:
            raise refuse(
                f"event {row['event_id']} does not link to the event before it in operation "
                f"{row['operation_id']}",
                "event_edited",
                **where,
            )
        if self.trail_keys is not None:
            problem = unauthentic(self.trail_keys, row)
            if problem is not None:
                raise refuse(
                    f"event {row['event_id']} ({row['event_type']}, sequence {sequence} of "
                    f"operation {row['operation_id']}) is not authenticated by the ledger's trail "
                    f"key ({problem}): it was not written by the ledger; nothing of this batch "
                    "is sealed",
                    "event_not_authentic",
                    problem=problem,
                    **where,
                )
        last_hash[row["operation_id"]] = (sequence, computed)
        return leaf_of_entry(entry)

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
        now_us = to_micros(self.clock.now())
        stored = self.store.write(
            partial(
                rotate,
                tenant_id=tenant_id,
                signer=self.signer,
                new_signer=new_signer,
                now_us=now_us,
            ),
            label="rotate_key",
        )
        if stored is not None:
            self._witness(tenant_id)
        return stored

    # -- restore from a backup -----------------------------------------------------------

    def restore(self, tenant_id: str, reason: str) -> Restore:
        """Go on from a log restored from a backup: sign a restore checkpoint (a new segment).

        The restored tree head is signed under the next segment's origin, stating the segment
        it continues, the last tree this sealer's memory says that segment signed (the entries
        it lost) and ``reason`` (:mod:`effectledger.audit.sealing.restore`); the witnesses are
        asked to cosign it at once. Later seals go on in the new segment; with the memory, the old
        segment is refused from now on (``log_superseded``). Raises
        :class:`~effectledger.errors.InvalidInput` for a log without a checkpoint or a
        missing reason, and what :meth:`seal` raises for a stored head that does not verify.
        """
        validate_identifier(tenant_id, "tenant_id")
        now_us = to_micros(self.clock.now())
        stated = self.store.write(
            partial(
                restore,
                tenant_id=tenant_id,
                signer=self.signer,
                reason=reason,
                memory=self.memory,
                now_us=now_us,
            ),
            label="restore",
        )
        self._witness(tenant_id)
        return stated
