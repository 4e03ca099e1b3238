"""A restore from a backup: the restored tree head goes on as a new segment of the log.

A database restored from an older copy shows a log smaller than (or forked from) the one the
sealer last signed and the witnesses cosigned; both rightly refuse to sign on from it. The way
forward is a statement, not a silent re-sign: the **restore checkpoint** signs the restored tree
head under the next segment's origin (``effectledger/<tenant>#2``, …) with extension lines naming
the segment it continues, the last tree that segment is known to have signed and the operator's
reason (:func:`~effectledger.audit.log.origins.restore_lines`). Only the log key's holder can write
it; a witness cosigns the new origin from the start; a reviewer sees the restore and how many
entries it lost (:class:`~effectledger.audit.log.origins.Restore`).
"""

from __future__ import annotations

from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.log_head import held_head, store_checkpoint
from effectledger.audit.log.origins import Restore, next_origin, parse_restore, restore_lines
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.sealing.memory import SealerMemory
from effectledger.errors import InvalidInput
from effectledger.store import Transaction

__all__ = ["restore"]


def restore(
    tx: Transaction,
    tenant_id: str,
    signer: Signer,
    reason: str,
    memory: SealerMemory | None,
    now_us: int,
) -> Restore:
    """Write the restore checkpoint of ``tenant_id``'s log; what it states.

    The previous segment is the last one ``memory`` knows the log went on as (the database's
    own, unless an earlier restore of the same backup started a later one), and its last tree
    what the memory remembers signing for it (the larger of the signed and the pending tree);
    without a memory, the database's segment and the restored head itself (nothing known lost).
    With ``memory``, the old origins are closed there before the signature and the new one
    remembered from the restored head.
    """
    head, frontier, origin = held_head(tx, tenant_id, signer, now_us)
    if int(head["checkpoint_seq"]) == 0:
        raise InvalidInput(
            f"{tenant_id}'s log has no checkpoint yet: there is nothing to continue; seal it",
            field="tenant_id",
        )
    size, root = frontier.size, frontier.root()
    last, previous_size, previous_root = origin, size, root
    if memory is not None:
        # After a second restore of the same backup, the database shows the first segment
        # again, but the memory knows the segment the first restore started and what it signed.
        last = memory.latest_segment(origin)
        signed, pending = memory.recall(last)
        known = signed
        if pending is not None and (signed is None or pending.size > signed.size):
            known = pending
        if known is not None:
            previous_size, previous_root = known.size, bytes.fromhex(known.root)
    new_origin = next_origin(last, tenant_id)
    lines = restore_lines(last, previous_size, previous_root, reason)  # a bad reason: nothing
    if memory is not None:
        memory.supersede(sorted({origin, last}), new_origin, size, root.hex())
    checkpoint = Checkpoint(new_origin, size, root, lines)
    note = sign_checkpoint(checkpoint, [signer])
    store_checkpoint(tx, head, frontier, previous_size=size, proof=[], note=note, now_us=now_us)
    stated = parse_restore(Checkpoint.parse(checkpoint.to_text()))
    if stated is None:  # pragma: no cover - restore_lines writes what parse_restore reads
        raise AssertionError("a restore checkpoint must state its restore")
    return stated
