"""Signers and verifiers: Ed25519 keys under a key name, as C2SP signed notes use them.

Key strings follow Go's ``golang.org/x/mod/sumdb/note``: a verifier key is ``<name>+<hex key
ID>+<base64(0x01 || public key)>`` and a signer key is ``PRIVATE+KEY+<name>+<hex key
ID>+<base64(0x01 || 32-byte seed)>``. Key names are non-empty and contain neither Unicode spaces
nor ``+``. For Ed25519 (signature type ``0x01``) the key ID is ``SHA-256(key name || 0x0A ||
0x01 || 32-byte public key)[:4]``.

Errors are :class:`~effectledger.errors.NoteError` with reason ``key_invalid``. Deliberate
strictness beyond the Go package: base64 must be canonical and hex key IDs lowercase.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from effectledger.errors import NoteError

__all__ = [
    "ALG_ED25519",
    "FORBIDDEN_CHARACTERS",
    "Signer",
    "Verifier",
    "decode_base64",
    "generate_signer",
    "key_id",
    "require_key_name",
]

ALG_ED25519: Final = 0x01
"""The C2SP signed-note signature type byte for Ed25519."""

FORBIDDEN_CHARACTERS: Final = re.compile(r"[\x00-\x09\x0b-\x1f\ud800-\udfff]")
"""ASCII controls other than newline, and lone surrogates (str values that are not UTF-8)."""

_HEX_ID: Final = re.compile(r"[0-9a-f]{8}")


def key_id(name: str, public_key: bytes) -> int:
    """Return the Ed25519 key ID: SHA-256(name || 0x0A || 0x01 || public_key)[:4], big-endian."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


class Verifier:
    """A trusted Ed25519 public key under a key name; checks signatures in notes."""

    __slots__ = ("_key", "_key_id", "_name", "_public")

    def __init__(self, name: str, public_key: bytes) -> None:
        """Create a verifier for ``name`` and a 32-byte Ed25519 public key."""
        require_key_name(name)
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


def require_key_name(name: object) -> None:
    """Raise ``key_invalid`` unless ``name`` is a valid key name (non-empty, no spaces, no +)."""
    if (
        not isinstance(name, str)
        or not name
        or "+" in name
        or any(ch.isspace() for ch in name)
        or FORBIDDEN_CHARACTERS.search(name)
    ):
        raise NoteError(f"invalid key name {name!r}", reason="key_invalid")


def _split_key_string(key: object, kind: str) -> tuple[str, int, bytes]:
    """Split ``<name>+<hex8>+<base64(0x01 || 32 bytes)>`` into name, key ID and the 32 bytes."""
    if not isinstance(key, str):
        raise NoteError(f"a {kind} key is a string", reason="key_invalid")
    name, sep1, rest = key.partition("+")
    hex_id, sep2, key64 = rest.partition("+")
    raw = decode_base64(key64) if sep1 and sep2 else None
    if raw is None or not _HEX_ID.fullmatch(hex_id) or len(raw) != 33:
        raise NoteError(f"malformed {kind} key", reason="key_invalid")
    if raw[0] != ALG_ED25519:
        raise NoteError(f"unknown {kind} key algorithm", reason="key_invalid")
    return name, int(hex_id, 16), raw[1:]


def decode_base64(value: str) -> bytes | None:
    """Decode canonical standard base64 (RFC 4648 §4, padded) or return None."""
    if not value or not value.isascii():
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode() == value else None
