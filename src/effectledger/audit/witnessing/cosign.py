"""C2SP tlog-cosignature/v1: Ed25519 cosignatures of checkpoints, made and checked.

A witness's key is an Ed25519 key under a name, with signature type ``0x04``: its key ID is
``SHA-256(name ‖ 0x0A ‖ 0x04 ‖ public key)[:4]``. Its key strings follow the signed-note
forms with that type byte: the verifier ``<name>+<hex key ID>+<base64(0x04 ‖ public key)>``,
the signer ``PRIVATE+KEY+<name>+<hex key ID>+<base64(0x04 ‖ seed)>``.

A cosignature is the note signature line ``— <name> base64(key ID ‖ u64 timestamp ‖ Ed25519
signature)`` whose signature covers::

    cosignature/v1
    time <timestamp, decimal>
    <the checkpoint's whole note body, extension lines included, up to its last newline>

The timestamp (POSIX seconds, big-endian) is when the witness signed; the statement is that, as
of that time, this is the largest consistent tree head the witness has seen for the origin.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from effectledger.audit.keys.signers import decode_base64, require_key_name
from effectledger.errors import LogKeyInvalid, NoteError

__all__ = [
    "ALG_COSIGNATURE",
    "CosignatureVerifier",
    "Cosigner",
    "cosigned_message",
]

ALG_COSIGNATURE: Final = 0x04
_SIG_PREFIX: Final = "\u2014 "
_MAX_TIMESTAMP: Final = 2**63 - 1


def _key_id(name: str, public_key: bytes) -> int:
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ALG_COSIGNATURE]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def cosigned_message(note_body: str, timestamp: int) -> bytes:
    """The bytes a cosignature signs: header, time line, then the checkpoint's note body."""
    if not note_body.endswith("\n"):
        raise NoteError("a checkpoint's note body ends with a newline", reason="note_malformed")
    return f"cosignature/v1\ntime {timestamp}\n{note_body}".encode()


def _split(key: str, private: bool) -> tuple[str, int, bytes]:
    # Key names hold no "+", base64 may: the key material is the last field.
    parts = key.strip().split("+", 4 if private else 2)
    if private:
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise LogKeyInvalid("not a witness signer key string")
        parts = parts[2:]
    if len(parts) != 3:
        raise LogKeyInvalid("not a witness key string (<name>+<key id>+<base64>)")
    name, hex_id, encoded = parts
    raw = decode_base64(encoded)
    if raw is None or len(raw) != 33 or raw[0] != ALG_COSIGNATURE or len(hex_id) != 8:
        raise LogKeyInvalid("not a witness key string of signature type 0x04")
    try:
        require_key_name(name)
        return name, int(hex_id, 16), raw[1:]
    except (NoteError, ValueError) as exc:
        raise LogKeyInvalid("a witness key string has a malformed name or key id") from exc


class CosignatureVerifier:
    """A witness's public key under its name: checks its cosignatures of checkpoints."""

    __slots__ = ("_key", "key_id", "name", "public_key")

    def __init__(self, name: str, public_key: bytes) -> None:
        require_key_name(name)
        self.name = name
        self.public_key = public_key
        self.key_id = _key_id(name, public_key)
        self._key = Ed25519PublicKey.from_public_bytes(public_key)

    @classmethod
    def from_key_string(cls, key: str) -> CosignatureVerifier:
        """Parse ``<name>+<hex key ID>+<base64(0x04 ‖ public key)>``."""
        name, key_id, public = _split(key, private=False)
        verifier = cls(name, public)
        if verifier.key_id != key_id:
            raise LogKeyInvalid("the witness key string's key id does not match its key")
        return verifier

    def key_string(self) -> str:
        """The verifier key string."""
        encoded = base64.b64encode(bytes([ALG_COSIGNATURE]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def timestamp(self, note_body: str, line: str) -> int | None:
        """The timestamp of ``line`` if it is this witness's valid cosignature of the body."""
        if not line.startswith(_SIG_PREFIX):
            return None
        name, _, encoded = line[len(_SIG_PREFIX) :].partition(" ")
        raw = decode_base64(encoded)
        if name != self.name or raw is None or len(raw) != 4 + 8 + 64:
            return None
        if int.from_bytes(raw[:4], "big") != self.key_id:
            return None
        (timestamp,) = struct.unpack(">Q", raw[4:12])
        if timestamp > _MAX_TIMESTAMP:
            return None
        try:
            self._key.verify(raw[12:], cosigned_message(note_body, timestamp))
        except (InvalidSignature, NoteError):
            return None
        return int(timestamp)

    def cosigned(self, note: str) -> int | None:
        """The timestamp of this witness's cosignature among ``note``'s signature lines."""
        split = note.rfind("\n\n")
        if split < 0:
            return None
        body = note[: split + 1]
        for line in note[split + 2 :].splitlines():
            found = self.timestamp(body, line)
            if found is not None:
                return found
        return None


class Cosigner:
    """A witness's private key under its name: cosigns checkpoints (C2SP tlog-cosignature/v1)."""

    __slots__ = ("_key", "_seed", "name")

    def __init__(self, name: str, seed: bytes) -> None:
        require_key_name(name)
        if len(seed) != 32:
            raise LogKeyInvalid("a witness key seed is 32 bytes")
        self.name = name
        self._seed = seed
        self._key = Ed25519PrivateKey.from_private_bytes(seed)

    def __repr__(self) -> str:
        return f"Cosigner({self.name!r})"

    @classmethod
    def generate(cls, name: str) -> Cosigner:
        """A new witness key named ``name``."""
        return cls(name, os.urandom(32))

    @classmethod
    def from_key_string(cls, key: str) -> Cosigner:
        """Parse ``PRIVATE+KEY+<name>+<hex key ID>+<base64(0x04 ‖ seed)>``."""
        name, key_id, seed = _split(key, private=True)
        cosigner = cls(name, seed)
        if cosigner.verifier().key_id != key_id:
            raise LogKeyInvalid("the witness key string's key id does not match its key")
        return cosigner

    def key_string(self) -> str:
        """The signer key string (secret)."""
        encoded = base64.b64encode(bytes([ALG_COSIGNATURE]) + self._seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier().key_id:08x}+{encoded}"

    def verifier(self) -> CosignatureVerifier:
        """The matching public key."""
        public = self._key.public_key().public_bytes_raw()
        return CosignatureVerifier(self.name, public)

    def cosign(self, note_body: str, timestamp: int) -> str:
        """The cosignature line (with its newline) of a checkpoint's note body at ``timestamp``."""
        if not 0 <= timestamp <= _MAX_TIMESTAMP:
            raise NoteError("a cosignature timestamp is 0 to 2^63 - 1", reason="note_malformed")
        signature = self._key.sign(cosigned_message(note_body, timestamp))
        raw = self.verifier().key_id.to_bytes(4, "big") + struct.pack(">Q", timestamp) + signature
        return f"{_SIG_PREFIX}{self.name} {base64.b64encode(raw).decode()}\n"
