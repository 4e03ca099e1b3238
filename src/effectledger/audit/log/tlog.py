"""Transparency-log checkpoints (C2SP tlog-checkpoint): a log's size and root, signed.

A checkpoint (https://c2sp.org/tlog-checkpoint) is a signed note
(:mod:`effectledger.audit.log.note`) whose text is::

    <origin>
    <tree size, decimal, no leading zeros>
    <base64 of the 32-byte RFC 9162 root hash>
    [<extension line>...]

Errors are :class:`~effectledger.errors.NoteError`: those of
:func:`~effectledger.audit.log.note.open_note`, and ``checkpoint_malformed`` or
``checkpoint_origin_mismatch``. Deliberate strictness
beyond the Go package: a checkpoint's tree size must fit in 64 bits and its root hash be
canonical base64.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from effectledger.audit.keys.signers import FORBIDDEN_CHARACTERS, Signer, Verifier, decode_base64
from effectledger.audit.log.note import Signature, open_note, sign_note
from effectledger.errors import NoteError

__all__ = ["Checkpoint", "open_checkpoint", "sign_checkpoint"]

_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*")
_MAX_TREE_SIZE: Final = 2**64 - 1


@dataclass(frozen=True)
class Checkpoint:
    """A transparency-log checkpoint body (c2sp.org/tlog-checkpoint): origin, size, root hash.

    Construction validates every field (``checkpoint_malformed`` otherwise): the origin and each
    extension line are non-empty single lines without control characters, ``size`` is an int in
    0..2**64-1 and ``root_hash`` is 32 bytes. ``extensions`` may be given as any sequence.
    """

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate the fields and freeze ``extensions`` into a tuple."""
        if isinstance(self.extensions, str):
            raise NoteError("extensions must be a sequence of lines", reason="checkpoint_malformed")
        object.__setattr__(self, "extensions", tuple(self.extensions))
        for what, line in (("origin", self.origin), *(("extension", e) for e in self.extensions)):
            if (
                not isinstance(line, str)
                or not line
                or "\n" in line
                or FORBIDDEN_CHARACTERS.search(line)
            ):
                raise NoteError(f"invalid checkpoint {what} line", reason="checkpoint_malformed")
        if not isinstance(self.size, int) or isinstance(self.size, bool):
            raise NoteError("tree size must be an int", reason="checkpoint_malformed")
        if not 0 <= self.size <= _MAX_TREE_SIZE:
            raise NoteError("tree size out of range", reason="checkpoint_malformed")
        if type(self.root_hash) is not bytes or len(self.root_hash) != 32:
            raise NoteError("root hash must be 32 bytes", reason="checkpoint_malformed")

    def to_text(self) -> str:
        """Return the note text: origin, size, base64 root hash and extensions, one per line."""
        root64 = base64.b64encode(self.root_hash).decode()
        return "".join(
            f"{line}\n" for line in (self.origin, str(self.size), root64, *self.extensions)
        )

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Parse a checkpoint note text strictly (``checkpoint_malformed`` on any deviation).

        The text must be at least three non-empty newline-terminated lines; the size is decimal
        ASCII without leading zeros (except ``0``) and the root hash canonical base64 of 32 bytes.
        """
        if not isinstance(text, str) or not text.endswith("\n"):
            raise NoteError(
                "checkpoint text must end with a newline", reason="checkpoint_malformed"
            )
        lines = text[:-1].split("\n")
        if len(lines) < 3 or not all(lines):
            raise NoteError(
                "checkpoint needs three or more non-empty lines", reason="checkpoint_malformed"
            )
        origin, size_text, root64, *extensions = lines
        if len(size_text) > 20 or not _DECIMAL.fullmatch(size_text):
            raise NoteError("tree size is not a canonical decimal", reason="checkpoint_malformed")
        root = decode_base64(root64)
        if root is None or len(root) != 32:
            raise NoteError("root hash is not base64 of 32 bytes", reason="checkpoint_malformed")
        return cls(origin, int(size_text), root, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, signers: Sequence[Signer]) -> str:
    """Return ``checkpoint`` as a signed note, signed by every signer (e.g. old and new key)."""
    return sign_note(checkpoint.to_text(), signers)


def open_checkpoint(
    note: str | bytes, verifiers: Iterable[Verifier], *, origin: str | None = None
) -> tuple[Checkpoint, list[Signature]]:
    """Verify a signed checkpoint and return it with its verified signatures.

    Any trusted verifier suffices, which is what lets a log rotate keys by co-signing with old
    and new key for a while. Raises :class:`NoteError` as :func:`open_note` does, with
    ``checkpoint_malformed`` for a bad body, and ``checkpoint_origin_mismatch`` when ``origin``
    is given and differs from the checkpoint's.
    """
    opened = open_note(note, verifiers)
    checkpoint = Checkpoint.parse(opened.text)
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(
            f"checkpoint origin {checkpoint.origin!r} is not the expected {origin!r}",
            reason="checkpoint_origin_mismatch",
        )
    return checkpoint, list(opened.signatures)
