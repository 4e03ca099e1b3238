"""Origins and what a checkpoint's extension lines state: key rotations and restores.

A tenant's log has the origin ``effectledger/<tenant_id>`` (:func:`origin_for`), the first line of
each of its checkpoints. Keys are rotated with a **rotation checkpoint**: the current tree head,
signed by both the old and the new key, carrying the extension line::

    effectledger-key-rotation <old verifier key> <new verifier key>

Checkpoints before it are signed by the old key, later ones by the new key only; a verifier that
trusts either key follows the rotation to the other (:func:`key_epochs`).

A log restored from a backup goes on in a new **segment**: the same tree under the origin
``effectledger/<tenant_id>#<n>`` (``#`` never occurs in a tenant id), whose first checkpoint, the
**restore checkpoint**, signs the restored tree head and states what it continues and why::

    effectledger-restore <previous origin> <previous size> <previous root, base64>
    effectledger-restore-reason <the operator's reason>

The previous origin, size and root are the last tree the log is known to have signed (the
sealer's memory, which also knows a segment that an earlier restore started and a second restore
of the same backup lost; without one, the restored head itself). The new segment's number is
above both. A witness cosigns the new origin from the start; a reviewer sees each restore, and
the entries it lost (:func:`parse_restore`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from effectledger.audit.keys.signers import Verifier
from effectledger.audit.log.note import open_note
from effectledger.audit.log.tlog import Checkpoint
from effectledger.errors import InvalidInput, LogKeyInvalid, NoteError
from effectledger.model.operations import validate_identifier

__all__ = [
    "ORIGIN_PREFIX",
    "RESTORE_EXTENSION",
    "ROTATION_EXTENSION",
    "KeyEpoch",
    "Restore",
    "key_epochs",
    "next_origin",
    "origin_for",
    "parse_restore",
    "parse_rotation",
    "restore_lines",
    "rotation_line",
    "segment_in",
    "segment_of",
]

ORIGIN_PREFIX: Final = "effectledger/"
ROTATION_EXTENSION: Final = "effectledger-key-rotation"
RESTORE_EXTENSION: Final = "effectledger-restore"
RESTORE_REASON_EXTENSION: Final = "effectledger-restore-reason"
SEGMENT_SEPARATOR: Final = "#"
MAX_REASON_CHARS: Final = 500


def origin_for(tenant_id: str, segment: int = 1) -> str:
    """The checkpoint origin of ``tenant_id``'s log: ``effectledger/<tenant_id>``, and
    ``effectledger/<tenant_id>#<segment>`` for the segments after a restore (2, 3, …)."""
    base = ORIGIN_PREFIX + validate_identifier(tenant_id, "tenant_id")
    return base if segment == 1 else f"{base}{SEGMENT_SEPARATOR}{segment}"


def segment_of(origin: str, tenant_id: str) -> int | None:
    """The segment number of ``origin`` in ``tenant_id``'s log, or ``None`` if it is not one."""
    return segment_in(origin, origin_for(tenant_id))


def segment_in(origin: str, base: str) -> int | None:
    """The segment number of ``origin`` in the log whose first origin is ``base``, or ``None``."""
    if origin == base:
        return 1
    number = origin[len(base) + 1 :]
    if (
        origin.startswith(base + SEGMENT_SEPARATOR)
        and number.isdigit()
        and number.isascii()
        and not number.startswith("0")
        and int(number) >= 2
    ):
        return int(number)
    return None


def next_origin(origin: str, tenant_id: str) -> str:
    """The origin of the segment after ``origin`` (one of ``tenant_id``'s)."""
    segment = segment_of(origin, tenant_id)
    if segment is None:
        raise LogKeyInvalid(f"{origin!r} is not an origin of {tenant_id}'s log")
    return origin_for(tenant_id, segment + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Restore:
    """What a restore checkpoint states: the segment it starts and what that continues.

    ``size``/``root_hash``: the restored tree head the new segment starts from;
    ``previous_size``/``previous_root``: the last tree the previous segment is known to have
    signed. ``lost`` entries were signed before the restore and are not in the restored log.
    """

    origin: str
    previous_origin: str
    previous_size: int
    previous_root: bytes
    size: int
    root_hash: bytes
    reason: str

    @property
    def lost(self) -> int:
        """Entries the previous segment signed beyond the restored tree (0 when none)."""
        return max(self.previous_size - self.size, 0)

    @property
    def forked(self) -> bool:
        """Whether the previous segment signed another tree at the restored size itself."""
        return self.previous_size == self.size and self.previous_root != self.root_hash

    def to_dict(self) -> dict[str, object]:
        """The statement as JSON-ready values (roots in hex)."""
        return {
            "origin": self.origin,
            "previous_origin": self.previous_origin,
            "previous_size": self.previous_size,
            "previous_root": self.previous_root.hex(),
            "size": self.size,
            "root_hash": self.root_hash.hex(),
            "lost": self.lost,
            "reason": self.reason,
        }


def restore_lines(
    previous_origin: str, previous_size: int, previous_root: bytes, reason: str
) -> tuple[str, str]:
    """The two extension lines of a restore checkpoint (see the module docstring)."""
    text = " ".join(reason.split()) if isinstance(reason, str) else ""
    if not text or len(text) > MAX_REASON_CHARS or not text.isprintable():
        raise InvalidInput(
            f"a restore needs a reason: 1-{MAX_REASON_CHARS} printable characters on one line",
            field="reason",
        )
    root64 = base64.b64encode(previous_root).decode("ascii")
    return (
        f"{RESTORE_EXTENSION} {previous_origin} {previous_size} {root64}",
        f"{RESTORE_REASON_EXTENSION} {text}",
    )


def parse_restore(checkpoint: Checkpoint) -> Restore | None:
    """What ``checkpoint`` states if it is a well-formed restore checkpoint, else ``None``.

    Like a rotation, a malformed statement is no statement (it then grants nothing): a
    checkpoint under a segment's origin without one does not verify as a segment's start.
    """
    statement = reason = None
    for line in checkpoint.extensions:
        word, _, rest = line.partition(" ")
        if word == RESTORE_EXTENSION and statement is None:
            statement = rest.split(" ")
        elif word == RESTORE_REASON_EXTENSION and reason is None:
            reason = rest
    if statement is None or reason is None or len(statement) != 3:
        return None
    origin, size_text, root64 = statement
    if not size_text.isdigit() or not size_text.isascii():
        return None
    try:
        root = base64.b64decode(root64, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(root) != 32 or not reason:
        return None
    return Restore(
        origin=checkpoint.origin,
        previous_origin=origin,
        previous_size=int(size_text),
        previous_root=root,
        size=checkpoint.size,
        root_hash=checkpoint.root_hash,
        reason=reason,
    )


def rotation_line(old: Verifier, new: Verifier) -> str:
    """The checkpoint extension line announcing a rotation from ``old`` to ``new``."""
    return f"{ROTATION_EXTENSION} {old.key_string()} {new.key_string()}"


def parse_rotation(checkpoint: Checkpoint) -> tuple[Verifier, Verifier] | None:
    """``(old, new)`` if ``checkpoint`` announces a key rotation, else ``None``.

    A malformed rotation line is treated as no rotation (it then grants nothing).
    """
    for line in checkpoint.extensions:
        words = line.split(" ")
        if len(words) == 3 and words[0] == ROTATION_EXTENSION:
            try:
                return Verifier.from_key_string(words[1]), Verifier.from_key_string(words[2])
            except NoteError:
                return None
    return None


@dataclass(frozen=True, slots=True)
class KeyEpoch:
    """The key that signs checkpoints ``first`` to ``last`` (indexes into the checkpoint list)."""

    key: Verifier
    first: int
    last: int | None


def _text_of(note: str) -> str | None:
    split = note.rfind("\n\n")
    return None if split < 0 else note[: split + 1]


def key_epochs(notes: Sequence[str]) -> list[KeyEpoch] | None:
    """The key epochs of a log's checkpoints (in order), or ``None`` if it never rotated.

    Only genuine rotations count: the rotation checkpoint must verify under both the old and the
    new key, and its old key must be the previous epoch's key. The rotation checkpoint belongs to
    both epochs.
    """
    epochs: list[KeyEpoch] = []
    for index, note in enumerate(notes):
        text = _text_of(note)
        if text is None:
            continue
        try:
            rotation = parse_rotation(Checkpoint.parse(text))
        except NoteError:
            continue
        if rotation is None:
            continue
        old, new = rotation
        if epochs and epochs[-1].key != old:
            continue
        try:
            open_note(note, [old])
            open_note(note, [new])
        except NoteError:
            continue
        if epochs:
            epochs[-1] = KeyEpoch(epochs[-1].key, epochs[-1].first, index)
        else:
            epochs.append(KeyEpoch(old, 0, index))
        epochs.append(KeyEpoch(new, index, None))
    return epochs or None
