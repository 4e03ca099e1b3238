"""Ed25519 signed notes (C2SP signed-note): the text format a reviewer checks offline.

They follow https://c2sp.org/signed-note, which formalises the notes of Go's
``golang.org/x/mod/sumdb/note`` package; keys (:mod:`effectledger.audit.keys.signers`) and notes
produced here are byte-for-byte compatible with that package::

    <text: one or more lines, each ending in U+000A; empty lines allowed>
    <one empty line>
    — <key name> <base64(4-byte big-endian key ID || signature)>
    — <key name> <base64(...)>                      (one line per signature)

The signature prefix is EM DASH (U+2014) and a space. The signed message is the UTF-8 text
including its final newline, without the separating empty line. The whole note must be valid
UTF-8 with no ASCII control characters other than newline; the text ends at the LAST empty line.
A signature whose (name, key ID) is not among the trusted verifiers is ignored (but reported); one
that is must verify, or the whole note is rejected; at least one must verify.

Errors are :class:`~effectledger.errors.NoteError` with a stable ``reason``: ``note_malformed``,
``note_unverified``, ``note_bad_signature`` or ``key_invalid``. Deliberate strictness beyond the
Go package: base64 must be canonical and every signature by a trusted key is verified (not only
its first occurrence).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from effectledger.audit.keys.signers import (
    FORBIDDEN_CHARACTERS,
    Signer,
    Verifier,
    decode_base64,
    require_key_name,
)
from effectledger.errors import NoteError

__all__ = ["MAX_SIGNATURES", "Note", "Signature", "open_note", "sign_note"]

MAX_SIGNATURES: Final = 100
"""Notes with more signature lines than this are rejected as malformed (as sumdb/note does)."""

_SIG_PREFIX: Final = "\u2014 "  # EM DASH, SPACE


@dataclass(frozen=True)
class Signature:
    """One signature line of a note: key name, key ID and the raw signature bytes."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        """Return the signature line ``— <name> <base64(key ID || signature)>\\n``."""
        blob = self.key_id.to_bytes(4, "big") + self.signature
        return f"{_SIG_PREFIX}{self.name} {base64.b64encode(blob).decode()}\n"


@dataclass(frozen=True)
class Note:
    """An opened note: its text and the signatures that verified or came from unknown keys."""

    text: str
    signatures: tuple[Signature, ...]
    unverified_signatures: tuple[Signature, ...] = ()


def sign_note(text: str, signers: Sequence[Signer]) -> str:
    """Sign ``text`` with every signer and return the encoded signed note.

    ``text`` must be non-empty, end in a newline and contain no control characters other than
    newline (``note_malformed`` otherwise); at least one signer is required. Signature lines
    appear in signer order; a repeated (name, key ID) is emitted once.
    """
    if not isinstance(text, str) or not text.endswith("\n"):
        raise NoteError("note text must end with a newline", reason="note_malformed")
    _check_note_characters(text)
    if not signers:
        raise NoteError("a signed note needs at least one signer", reason="note_malformed")
    message = text.encode()
    lines: list[str] = []
    seen: set[tuple[str, int]] = set()
    for signer in signers:
        if not isinstance(signer, Signer):
            raise TypeError(f"not a Signer: {type(signer).__name__}")
        if (signer.name, signer.key_id) in seen:
            continue
        seen.add((signer.name, signer.key_id))
        lines.append(Signature(signer.name, signer.key_id, signer.sign(message)).line())
    return text + "\n" + "".join(lines)


def open_note(note: str | bytes, verifiers: Iterable[Verifier]) -> Note:
    """Parse a signed note and verify it against the trusted ``verifiers``.

    Returns the :class:`Note` with its text, the verified signatures (each trusted key once, in
    note order) and the signatures by unknown keys (ignored for trust, reported for audit). Raises
    :class:`NoteError`: ``note_malformed`` for bad syntax or more than :data:`MAX_SIGNATURES`
    lines, ``note_bad_signature`` if a signature whose name and key ID match a trusted verifier
    fails, ``note_unverified`` if no trusted key signed (the parsed note is in ``error.note``),
    ``key_invalid`` if two different trusted keys share the signature's name and key ID.
    """
    if isinstance(note, bytes):
        try:
            msg = note.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError("note is not valid UTF-8", reason="note_malformed") from exc
    elif isinstance(note, str):
        msg = note
    else:
        raise TypeError(f"a note is str or bytes, not {type(note).__name__}")
    _check_note_characters(msg)
    split = msg.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no empty line before its signatures", reason="note_malformed")
    text, block = msg[: split + 1], msg[split + 2 :]
    if not block.endswith("\n"):
        raise NoteError(
            "note must end with a newline-terminated signature", reason="note_malformed"
        )
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"note has more than {MAX_SIGNATURES} signatures", reason="note_malformed")
    parsed = [_parse_signature_line(line) for line in lines]

    trusted: dict[tuple[str, int], set[Verifier]] = {}
    for verifier in verifiers:
        if not isinstance(verifier, Verifier):
            raise TypeError(f"not a Verifier: {type(verifier).__name__}")
        trusted.setdefault((verifier.name, verifier.key_id), set()).add(verifier)

    message = text.encode()
    verified: list[Signature] = []
    unverified: list[Signature] = []
    for sig in parsed:
        candidates = trusted.get((sig.name, sig.key_id))
        if not candidates:
            if sig not in unverified:
                unverified.append(sig)
            continue
        if len(candidates) > 1:
            raise NoteError(
                f"ambiguous trusted keys for {sig.name}+{sig.key_id:08x}", reason="key_invalid"
            )
        (verifier,) = candidates
        if not _verified(verifier, message, sig.signature):
            raise NoteError(
                f"invalid signature for key {sig.name}+{sig.key_id:08x}",
                reason="note_bad_signature",
            )
        if all((v.name, v.key_id) != (sig.name, sig.key_id) for v in verified):
            verified.append(sig)
    if not verified:
        raise NoteError(
            "note has no signature by a trusted key",
            reason="note_unverified",
            note=Note(text, (), tuple(unverified)),
            signed_by=[f"{sig.name}+{sig.key_id:08x}" for sig in unverified],
        )
    return Note(text, tuple(verified), tuple(unverified))


@functools.lru_cache(maxsize=4096)
def _verified(verifier: Verifier, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``verifier``'s of ``message``, checked once per key and note.

    A rotation checkpoint is opened under its old key, under its new key, then again in bundle
    order, and a note may repeat a signature line: each Ed25519 verification is done once.
    """
    return verifier.verify(message, signature)


def _check_note_characters(value: str) -> None:
    if FORBIDDEN_CHARACTERS.search(value):
        raise NoteError("note contains control characters or is not UTF-8", reason="note_malformed")


def _parse_signature_line(line: str) -> Signature:
    if not line.startswith(_SIG_PREFIX):
        raise NoteError("signature line does not start with an em dash", reason="note_malformed")
    name, _, sig64 = line[len(_SIG_PREFIX) :].partition(" ")
    raw = decode_base64(sig64)
    if raw is None or len(raw) < 5:
        raise NoteError(
            "signature is not base64 of a key ID and signature", reason="note_malformed"
        )
    try:
        require_key_name(name)
    except NoteError as exc:
        raise NoteError(
            f"invalid key name in signature line: {name!r}", reason="note_malformed"
        ) from exc
    return Signature(name, int.from_bytes(raw[:4], "big"), raw[4:])
