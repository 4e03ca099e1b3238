"""Ed25519 signed notes (C2SP signed-note) and transparency-log checkpoints (C2SP tlog-checkpoint).

These are the interoperable text formats an outside reviewer uses to check the audit log offline.
They follow https://c2sp.org/signed-note and https://c2sp.org/tlog-checkpoint, which formalise
the notes of Go's ``golang.org/x/mod/sumdb/note`` package; keys and notes produced here are
byte-for-byte compatible with that package.

Signed note (c2sp.org/signed-note)::

    <text: one or more lines, each ending in U+000A; empty lines allowed>
    <one empty line>
    — <key name> <base64(4-byte big-endian key ID || signature)>
    — <key name> <base64(...)>                      (one line per signature)

The signature prefix is EM DASH (U+2014) and a space. The signed message is the UTF-8 text
including its final newline, without the separating empty line. The whole note must be valid
UTF-8 with no ASCII control characters other than newline; the text ends at the LAST empty line.
Key names are non-empty and contain neither Unicode spaces nor ``+``. For Ed25519 (signature type
``0x01``) the key ID is ``SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4]``. A
signature whose (name, key ID) is not among the trusted verifiers is ignored (but reported); one
that is must verify, or the whole note is rejected; at least one must verify.

Key strings (as in sumdb/note): a verifier key is ``<name>+<hex key ID>+<base64(0x01 || public
key)>`` and a signer key is ``PRIVATE+KEY+<name>+<hex key ID>+<base64(0x01 || 32-byte seed)>``.

Checkpoint (c2sp.org/tlog-checkpoint): a signed note whose text is::

    <origin>
    <tree size, decimal, no leading zeros>
    <base64 of the 32-byte RFC 9162 root hash>
    [<extension line>...]

Errors are :class:`~effectledger.errors.NoteError` with a stable ``reason``: ``note_malformed``,
``note_unverified``, ``note_bad_signature``, ``key_invalid``, ``checkpoint_malformed`` and
``checkpoint_origin_mismatch``.

Deliberate strictness beyond the Go package: base64 must be canonical, hex key IDs lowercase,
every signature by a trusted key is verified (not only its first occurrence), and a checkpoint's
tree size must fit in 64 bits.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from effectledger.errors import NoteError

__all__ = [
    "ALG_ED25519",
    "MAX_SIGNATURES",
    "Checkpoint",
    "Note",
    "Signature",
    "Signer",
    "Verifier",
    "generate_signer",
    "key_id",
    "open_checkpoint",
    "open_note",
    "sign_checkpoint",
    "sign_note",
]

ALG_ED25519: Final = 0x01
"""The C2SP signed-note signature type byte for Ed25519."""

MAX_SIGNATURES: Final = 100
"""Notes with more signature lines than this are rejected as malformed (as sumdb/note does)."""

_SIG_PREFIX: Final = "\u2014 "  # EM DASH, SPACE
# ASCII controls other than newline, and lone surrogates (str values that are not UTF-8).
_FORBIDDEN: Final = re.compile(r"[\x00-\x09\x0b-\x1f\ud800-\udfff]")
_HEX_ID: Final = re.compile(r"[0-9a-f]{8}")
_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*")
_MAX_TREE_SIZE: Final = 2**64 - 1


def key_id(name: str, public_key: bytes) -> int:
    """Return the Ed25519 key ID: SHA-256(name || 0x0A || 0x01 || public_key)[:4], big-endian."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


class Verifier:
    """A trusted Ed25519 public key under a key name; checks signatures in notes."""

    __slots__ = ("_key", "_key_id", "_name", "_public")

    def __init__(self, name: str, public_key: bytes) -> None:
        """Create a verifier for ``name`` and a 32-byte Ed25519 public key."""
        _require_name(name)
        if type(public_key) is not bytes or len(public_key) != 32:
            raise NoteError("an Ed25519 public key is 32 bytes", reason="key_invalid")
        try:
            self._key = Ed25519PublicKey.from_public_bytes(public_key)
        except ValueError as exc:
            raise NoteError("not a valid Ed25519 public key", reason="key_invalid") from exc
        self._name = name
        self._public = public_key
        self._key_id = key_id(name, public_key)

    @classmethod
    def from_key_string(cls, key: str) -> Verifier:
        """Parse ``<name>+<hex8 key ID>+<base64(0x01 || public key)>``; the ID must match."""
        name, expected_id, public_key = _split_key_string(key, "verifier")
        verifier = cls(name, public_key)
        if verifier.key_id != expected_id:
            raise NoteError("verifier key ID does not match the key", reason="key_invalid")
        return verifier

    def key_string(self) -> str:
        """Return the verifier key string ``<name>+<hex8>+<base64(0x01 || public key)>``."""
        key64 = base64.b64encode(bytes([ALG_ED25519]) + self._public).decode()
        return f"{self._name}+{self._key_id:08x}+{key64}"

    @property
    def name(self) -> str:
        """The key name."""
        return self._name

    @property
    def key_id(self) -> int:
        """The 32-bit key ID."""
        return self._key_id

    @property
    def public_key(self) -> bytes:
        """The raw 32-byte Ed25519 public key."""
        return self._public

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Return whether ``signature`` is this key's 64-byte Ed25519 signature of ``message``."""
        if len(signature) != 64:
            return False
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def __eq__(self, other: object) -> bool:
        """Verifiers are equal when name and public key are (hashing agrees)."""
        if not isinstance(other, Verifier):
            return NotImplemented
        return (self._name, self._public) == (other._name, other._public)

    def __hash__(self) -> int:
        return hash((self._name, self._public))

    def __repr__(self) -> str:
        """Show the public verifier key string."""
        return f"Verifier({self.key_string()!r})"


class Signer:
    """An Ed25519 private key under a key name; signs notes. Keep its key string secret."""

    __slots__ = ("_key", "_seed", "_verifier")

    def __init__(self, name: str, seed: bytes) -> None:
        """Create a signer for ``name`` from a 32-byte Ed25519 private key seed."""
        if type(seed) is not bytes or len(seed) != 32:
            raise NoteError("an Ed25519 private key seed is 32 bytes", reason="key_invalid")
        self._seed = seed
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self._verifier = Verifier(name, self._key.public_key().public_bytes_raw())

    @classmethod
    def from_key_string(cls, key: str) -> Signer:
        """Parse ``PRIVATE+KEY+<name>+<hex8>+<base64(0x01 || seed)>``; the ID must match."""
        if not isinstance(key, str) or not key.startswith("PRIVATE+KEY+"):
            raise NoteError("malformed signer key", reason="key_invalid")
        name, expected_id, seed = _split_key_string(key.removeprefix("PRIVATE+KEY+"), "signer")
        signer = cls(name, seed)
        if signer.key_id != expected_id:
            raise NoteError("signer key ID does not match the key", reason="key_invalid")
        return signer

    def key_string(self) -> str:
        """Return the SECRET signer key string ``PRIVATE+KEY+<name>+<hex8>+<base64>``."""
        key64 = base64.b64encode(bytes([ALG_ED25519]) + self._seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{key64}"

    @property
    def name(self) -> str:
        """The key name."""
        return self._verifier.name

    @property
    def key_id(self) -> int:
        """The 32-bit key ID (the same as the matching verifier's)."""
        return self._verifier.key_id

    def verifier(self) -> Verifier:
        """Return the public verifier matching this signer."""
        return self._verifier

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032)."""
        return self._key.sign(message)

    def __repr__(self) -> str:
        """Show only public facts, never the seed."""
        return f"Signer(name={self.name!r}, key_id={self.key_id:08x})"


def generate_signer(name: str) -> Signer:
    """Create a signer for ``name`` with a fresh random Ed25519 key."""
    return Signer(name, Ed25519PrivateKey.generate().private_bytes_raw())


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
        if not verifier.verify(message, sig.signature):
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
            if not isinstance(line, str) or not line or "\n" in line or _FORBIDDEN.search(line):
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
        root = _b64decode(root64)
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


# -- helpers -------------------------------------------------------------------------------


def _require_name(name: object) -> None:
    """Raise ``key_invalid`` unless ``name`` is a valid key name (non-empty, no spaces, no +)."""
    if (
        not isinstance(name, str)
        or not name
        or "+" in name
        or any(ch.isspace() for ch in name)
        or _FORBIDDEN.search(name)
    ):
        raise NoteError(f"invalid key name {name!r}", reason="key_invalid")


def _split_key_string(key: object, kind: str) -> tuple[str, int, bytes]:
    """Split ``<name>+<hex8>+<base64(0x01 || 32 bytes)>`` into name, key ID and the 32 bytes."""
    if not isinstance(key, str):
        raise NoteError(f"a {kind} key is a string", reason="key_invalid")
    name, sep1, rest = key.partition("+")
    hex_id, sep2, key64 = rest.partition("+")
    raw = _b64decode(key64) if sep1 and sep2 else None
    if raw is None or not _HEX_ID.fullmatch(hex_id) or len(raw) != 33:
        raise NoteError(f"malformed {kind} key", reason="key_invalid")
    if raw[0] != ALG_ED25519:
        raise NoteError(f"unknown {kind} key algorithm", reason="key_invalid")
    return name, int(hex_id, 16), raw[1:]


def _check_note_characters(value: str) -> None:
    if _FORBIDDEN.search(value):
        raise NoteError("note contains control characters or is not UTF-8", reason="note_malformed")


def _b64decode(value: str) -> bytes | None:
    """Decode canonical standard base64 (RFC 4648 §4, padded) or return None."""
    if not value or not value.isascii():
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode() == value else None


def _parse_signature_line(line: str) -> Signature:
    if not line.startswith(_SIG_PREFIX):
        raise NoteError("signature line does not start with an em dash", reason="note_malformed")
    name, _, sig64 = line[len(_SIG_PREFIX) :].partition(" ")
    raw = _b64decode(sig64)
    if raw is None or len(raw) < 5:
        raise NoteError(
            "signature is not base64 of a key ID and signature", reason="note_malformed"
        )
    try:
        _require_name(name)
    except NoteError as exc:
        raise NoteError(
            f"invalid key name in signature line: {name!r}", reason="note_malformed"
        ) from exc
    return Signature(name, int.from_bytes(raw[:4], "big"), raw[4:])
