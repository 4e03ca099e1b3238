"""Key rotation: the current tree head signed by the old and the new log key together.

The rotation checkpoint names both verifier keys in an extension line
(:func:`~effectledger.audit.log.origins.rotation_line`); afterwards only a sealer holding the new
key may seal the log, and a reviewer who trusts either key follows the hand-over
(:func:`~effectledger.audit.log.origins.key_epochs`).
"""

from __future__ import annotations

from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.log_head import (
    StoredCheckpoint,
    held_head,
    store_checkpoint,
    stored_checkpoint,
)
from effectledger.audit.log.origins import parse_rotation, rotation_line
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.store import Transaction

__all__ = ["rotate"]


def rotate(
    tx: Transaction, tenant_id: str, signer: Signer, new_signer: Signer, now_us: int
) -> StoredCheckpoint | None:
    """Write the rotation checkpoint of ``tenant_id``'s log from ``signer`` to ``new_signer``.

    Returns ``None`` (and writes nothing) for a log that has no checkpoint yet: its first seal
    can simply use the new key.
    """
    head, frontier, origin = held_head(tx, tenant_id, signer, now_us)
    if int(head["checkpoint_seq"]) == 0:
        return None
    checkpoint = Checkpoint(
        origin,
        frontier.size,
        frontier.root(),
        (rotation_line(signer.verifier(), new_signer.verifier()),),
    )
    note = sign_checkpoint(checkpoint, [signer, new_signer])
    if parse_rotation(Checkpoint.parse(checkpoint.to_text())) is None:  # pragma: no cover
        raise AssertionError("a rotation checkpoint must announce its rotation")
    store_checkpoint(
        tx, head, frontier, previous_size=frontier.size, proof=[], note=note, now_us=now_us
    )
    row = tx.one("log_checkpoint_latest", {"tenant_id": tenant_id})
    return None if row is None else stored_checkpoint(row)
