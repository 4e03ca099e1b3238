"""A tenant's log head and signed checkpoints as the store keeps them, checked before each write.

The ``log_heads`` row holds the log's size, root and frontier (the roots of its perfect subtrees,
:mod:`effectledger.audit.log.frontier`) and the number of its latest checkpoint; ``log_checkpoints``
keeps every signed checkpoint with its consistency proof from the one before. Sealing and key
rotation both start from :func:`held_head`, which holds the row for the transaction and refuses
to go on unless the stored frontier reproduces the latest checkpoint signed by the sealer's key,
and both end with :func:`store_checkpoint`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.checkpoints import refusal_reason
from effectledger.audit.log.frontier import Frontier
from effectledger.audit.log.merkle import EMPTY_ROOT
from effectledger.audit.log.origins import origin_for, parse_rotation, segment_of
from effectledger.audit.log.tlog import Checkpoint, open_checkpoint
from effectledger.errors import (
    AuditVerificationFailed,
    ConcurrentModification,
    LogKeyInvalid,
    NoteError,
)
from effectledger.model.operations import Row
from effectledger.store import Transaction

__all__ = [
    "StoredCheckpoint",
    "checked_head",
    "held_head",
    "refuse",
    "store_checkpoint",
    "stored_checkpoint",
]


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


def stored_checkpoint(row: Row) -> StoredCheckpoint:
    """The :class:`StoredCheckpoint` of a ``log_checkpoints`` row."""
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


def refuse(message: str, reason: str, **details: Any) -> AuditVerificationFailed:
    """The error that stops a write to a log whose stored evidence does not verify."""
    return AuditVerificationFailed(message, reason=reason, **details)


def checked_head(tx: Transaction, tenant_id: str, signer: Signer) -> tuple[Row, str]:
    """The tenant's head row, read without a lock and checked against its checkpoint, and the
    origin its next checkpoint signs (the latest checkpoint's: a restore starts a segment)."""
    head = tx.one("log_head_get", {"tenant_id": tenant_id})
    if head is None:
        if tx.one("log_checkpoint_latest", {"tenant_id": tenant_id}) is not None:
            raise refuse(
                f"{tenant_id}'s log has a signed checkpoint but no head",
                "checkpoint_inconsistent",
            )
        return {"tenant_id": tenant_id, "size": 0, "checkpoint_seq": 0}, origin_for(tenant_id)
    return head, _check(tx, tenant_id, head, signer)[1]


def held_head(
    tx: Transaction, tenant_id: str, signer: Signer, now_us: int
) -> tuple[Row, Frontier, str]:
    """Hold the tenant's head row and check it against the latest signed checkpoint; the row,
    its frontier and the origin the log's next checkpoint signs."""
    tx.run(
        "log_head_ensure",
        {"tenant_id": tenant_id, "root_hash": EMPTY_ROOT.hex(), "now_us": now_us},
    )
    head = tx.one("log_head_lock", {"tenant_id": tenant_id})
    if head is None:  # pragma: no cover - ensured just above
        raise AssertionError("the log head vanished")
    frontier, origin = _check(tx, tenant_id, head, signer)
    return head, frontier, origin


def _check(tx: Transaction, tenant_id: str, head: Row, signer: Signer) -> tuple[Frontier, str]:
    """The head's frontier and origin, if it reproduces the latest signed checkpoint."""
    try:
        frontier = Frontier.from_hex(int(head["size"]), head["frontier"])
    except ValueError as exc:
        raise refuse(
            f"the stored frontier of {tenant_id}'s log is malformed",
            "checkpoint_inconsistent",
        ) from exc
    latest = tx.one("log_checkpoint_latest", {"tenant_id": tenant_id})
    if latest is None:
        if frontier.size or int(head["checkpoint_seq"]):
            raise refuse(
                f"{tenant_id}'s log has entries but no signed checkpoint",
                "checkpoint_inconsistent",
            )
        return frontier, origin_for(tenant_id)
    checkpoint = _open(latest["note"], tenant_id, signer)
    if (
        int(latest["seq"]) != int(head["checkpoint_seq"])
        or checkpoint.size != frontier.size
        or checkpoint.root_hash != frontier.root()
    ):
        raise refuse(
            f"{tenant_id}'s stored log head does not match its latest signed checkpoint "
            f"#{latest['seq']} (size {checkpoint.size})",
            "checkpoint_inconsistent",
            checkpoint_seq=int(latest["seq"]),
        )
    return frontier, checkpoint.origin


def _open(note: str, tenant_id: str, signer: Signer) -> Checkpoint:
    """The latest checkpoint, if ``signer``'s key signed it and the log was not rotated away.

    Its origin is the tenant's, or one of its later segments' if a restore checkpoint started
    that segment (the signature covers the origin, so only the key's holder starts one).
    """
    try:
        checkpoint, _ = open_checkpoint(note, [signer.verifier()])
        segment = segment_of(checkpoint.origin, tenant_id)
        if segment is None:
            raise NoteError(
                f"checkpoint origin {checkpoint.origin!r} is not {tenant_id}'s log",
                reason="checkpoint_origin_mismatch",
            )
    except NoteError as exc:
        reason = refusal_reason(exc)
        if reason == "unknown_key":  # to a sealer, the unknown key is its own
            raise LogKeyInvalid(
                f"the latest checkpoint of {tenant_id}'s log is not signed by key "
                f"{signer.name}+{signer.key_id:08x}; use that key, or rotate "
                "to this one (effectledger audit rotate-key)"
            ) from exc
        raise refuse(
            f"the latest checkpoint of {tenant_id}'s log does not verify: {exc}", reason
        ) from exc
    rotation = parse_rotation(checkpoint)
    if rotation is not None and rotation[1] != signer.verifier():
        raise LogKeyInvalid(
            f"{tenant_id}'s log was rotated to key {rotation[1].name}+"
            f"{rotation[1].key_id:08x}; this sealer's key is retired"
        )
    return checkpoint


def store_checkpoint(
    tx: Transaction,
    head: Row,
    frontier: Frontier,
    *,
    previous_size: int,
    proof: list[bytes],
    note: str,
    now_us: int,
) -> int:
    """Store a signed checkpoint of ``frontier`` and advance the held ``head``; its number."""
    tenant_id = head["tenant_id"]
    seq = int(head["checkpoint_seq"]) + 1
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
    return seq
