"""Receipts: chosen events of a tenant's log with their inclusion proofs, verifiable offline.

:func:`prove_events` writes a ``receipt`` bundle (:mod:`effectledger.audit.bundles.format`): the
latest signed checkpoint, preceded by every key-rotation and restore checkpoint (linked by
consistency proofs), and
for each chosen event its line and its RFC 9162 inclusion proof. It never overwrites a file
unless asked to.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from effectledger.audit.bundles.blobs import cited_hash, stored_blobs
from effectledger.audit.bundles.format import (
    KIND_RECEIPT,
    blob_line,
    checkpoint_line,
    consistency_line,
    event_line,
    header_line,
    inclusion_line,
)
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.log.origins import parse_restore, parse_rotation
from effectledger.audit.log.tlog import Checkpoint
from effectledger.audit.witnessing.submit import cosigned_note
from effectledger.errors import (
    AuditVerificationFailed,
    ExportFailed,
    InvalidInput,
    LogNotSealed,
    NoteError,
    NotFound,
)
from effectledger.events.record import stored_entry
from effectledger.model.operations import Row, validate_identifier
from effectledger.store import Store, Transaction

__all__ = ["ProofReport", "prove_events", "stored_event_line"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProofReport:
    """What :func:`prove_events` wrote: events proven in the tree of ``size`` leaves."""

    tenant_id: str
    path: Path
    events: int
    size: int
    checkpoint_seq: int


def stored_event_line(row: Row) -> bytes:
    """The bundle line of a stored log entry joined with its event row."""
    entry = stored_entry(row)
    return event_line(entry, row["event_hash"], bytes.fromhex(row["leaf_hash"]), row["position"])


def _tree(store: Store, tenant_id: str, size: int) -> MerkleTree:
    """The tenant's tree of ``size`` leaves, read from the stored leaf hashes."""
    tree = MerkleTree()
    while tree.size < size:
        params = {"tenant_id": tenant_id, "position": tree.size, "size": size, "limit": 100_000}
        leaves = store.read(partial(_all, "log_leaves_from", params))
        if not leaves or int(leaves[-1]["position"]) != tree.size + len(leaves) - 1:
            raise AuditVerificationFailed(
                f"{tenant_id}'s log misses position {tree.size} below its signed size {size}; "
                "run verify",
                reason="checkpoint_inconsistent",
                position=tree.size,
            )
        tree.extend(bytes.fromhex(leaf["leaf_hash"]) for leaf in leaves)
    return tree


def _handovers(store: Store, tenant_id: str, before: int) -> list[Row]:
    """The tenant's key-rotation and restore checkpoints before checkpoint ``before``, in order.

    A receipt carries them so that a reviewer who trusts an earlier key can follow each
    co-signed hand-over to the key that signed the latest checkpoint, and each restore from a
    backup to the log segment (the origin) the latest checkpoint is in.
    """
    found: list[Row] = []
    seq = 0
    while seq < before:
        params = {"tenant_id": tenant_id, "seq": seq, "limit": 1000}
        page = store.read(partial(_all, "log_checkpoints_after", params))
        if not page:
            break
        for row in page:
            if int(row["seq"]) >= before:
                return found
            text = row["note"][: row["note"].rfind("\n\n") + 1]
            try:
                checkpoint = Checkpoint.parse(text)
                if parse_rotation(checkpoint) is not None or parse_restore(checkpoint) is not None:
                    found.append(row)
            except NoteError:
                continue
        seq = int(page[-1]["seq"])
    return found


def _all(name: str, params: dict[str, object], tx: Transaction) -> list[Row]:
    return tx.all(name, params)


def prove_events(
    store: Store,
    tenant_id: str,
    event_ids: Sequence[str],
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
) -> ProofReport:
    """Write a receipt bundle proving each event's inclusion in the latest checkpoint's tree.

    The receipt holds the latest signed checkpoint, each event's line and its inclusion proof,
    and before them every key-rotation checkpoint, linked by consistency proofs, so a reviewer
    who trusts any earlier key follows the hand-overs to the latest one.
    :func:`effectledger.audit.bundles.verify.verify_bundle` checks it offline. Raises ``NotFound``
    for an event of no log position, :class:`~effectledger.errors.LogNotSealed` for one no
    checkpoint covers yet, :class:`~effectledger.errors.EvidenceMissing` for an event citing an
    evidence blob the store no longer holds (each cited blob travels in the receipt), and
    :class:`~effectledger.errors.AuditVerificationFailed` if the stored log misses a position its
    latest checkpoint covers.
    An existing file is kept unless ``overwrite``: :class:`ExportFailed` with reason
    ``file_exists``, before anything is read.
    """
    target = Path(path)
    if not overwrite and target.exists():
        raise ExportFailed(
            f"{target} exists; refusing to overwrite it (use --force)",
            reason="file_exists",
            path=str(target),
        )
    validate_identifier(tenant_id, "tenant_id")
    if not event_ids:
        raise InvalidInput("name at least one event to prove")
    latest = store.one("log_checkpoint_latest", {"tenant_id": tenant_id})
    if latest is None:
        raise LogNotSealed(f"{tenant_id}'s log has no checkpoint yet; seal it first")
    size = int(latest["size"])
    rows: list[Row] = []
    for event_id in event_ids:
        row = store.one("log_entry_for_event", {"tenant_id": tenant_id, "event_id": event_id})
        if row is None:
            raise NotFound(
                f"event {event_id} has no position in {tenant_id}'s log", event_id=event_id
            )
        if int(row["position"]) >= size:
            raise LogNotSealed(
                f"event {event_id} is not covered by a checkpoint yet; seal again first",
                event_id=event_id,
            )
        rows.append(row)
    blobs = store.read(partial(stored_blobs, tenant_id=tenant_id, rows=rows))
    tree = _tree(store, tenant_id, size)
    lines = [header_line(tenant_id, KIND_RECEIPT)]
    previous: int | None = None
    for checkpoint in [*_handovers(store, tenant_id, int(latest["seq"])), latest]:
        if previous is not None and previous != int(checkpoint["size"]):
            proof = tree.consistency_proof(previous, int(checkpoint["size"]))
            lines.append(consistency_line(previous, int(checkpoint["size"]), proof))
        note = store.read(partial(cosigned_note, row=checkpoint))
        lines.append(checkpoint_line(int(checkpoint["seq"]), note))
        previous = int(checkpoint["size"])
    for row in rows:
        digest = cited_hash(row["evidence_reference"])
        if digest is not None:
            lines.append(blob_line(digest, blobs[digest]))
        lines.append(stored_event_line(row))
        proof = tree.inclusion_proof(int(row["position"]), size)
        lines.append(inclusion_line(row["event_id"], int(row["position"]), size, proof))
    try:
        # Exclusive creation: a file that appeared since the check above is not overwritten.
        with open(target, "wb" if overwrite else "xb") as handle:
            handle.write(b"".join(lines))
    except FileExistsError as exc:
        raise ExportFailed(
            f"{target} exists; refusing to overwrite it (use --force)",
            reason="file_exists",
            path=str(target),
        ) from exc
    except OSError as exc:
        raise ExportFailed(f"cannot write {target}: {exc.strerror}") from exc
    return ProofReport(
        tenant_id=tenant_id,
        path=target,
        events=len(rows),
        size=size,
        checkpoint_seq=int(latest["seq"]),
    )
