"""Log key files: where the signing key comes from, and the verifier keys reviewers hold.

The private key that signs checkpoints never enters the database. A sealer reads it from a key
file (one line, the ``PRIVATE+KEY+<name>+<id>+<base64>`` string of
:mod:`effectledger.audit.keys.signers`, readable by its owner only) or from the environment
variable :data:`KEY_ENV`. Reviewers hold the matching verifier key string
``<name>+<id>+<base64>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from effectledger.audit.keys.signers import Signer, Verifier, generate_signer
from effectledger.errors import LogKeyInvalid, NoteError
from effectledger.keyfiles import read_private_file

__all__ = ["KEY_ENV", "load_signer", "new_key_pair", "parse_verifiers", "write_signer_key"]

KEY_ENV: Final = "EFFECTLEDGER_LOG_KEY"
"""The environment variable that may hold the signer key string."""


def new_key_pair(name: str = "effectledger") -> tuple[str, str]:
    """A fresh ``(signer key string, verifier key string)`` pair named ``name``."""
    try:
        signer = generate_signer(name)
    except NoteError as exc:
        raise LogKeyInvalid(f"invalid key name {name!r}: {exc}") from exc
    return signer.key_string(), signer.verifier().key_string()


def write_signer_key(path: str | os.PathLike[str], signer_key: str) -> None:
    """Write ``signer_key`` to a new file at ``path`` readable by its owner only (mode 600).

    Never overwrites: an existing path raises :class:`~effectledger.errors.LogKeyInvalid`.
    """
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise LogKeyInvalid(f"cannot create {path}: {exc.strerror}") from exc
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(signer_key + "\n")


def load_signer(
    key_file: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Signer:
    """The log signer from ``key_file`` or, without one, from ``$EFFECTLEDGER_LOG_KEY``.

    A key file must not be readable by group or others (like an SSH key). Raises
    :class:`~effectledger.errors.LogKeyInvalid` when there is no key or it is malformed; the
    message never contains the key.
    """
    if key_file is not None:
        path = Path(key_file)
        text = read_private_file(path, "log key", LogKeyInvalid)
        source = f"key file {path}"
    else:
        text = (os.environ if environ is None else environ).get(KEY_ENV, "")
        if not text.strip():
            raise LogKeyInvalid(f"no log key: pass a key file or set {KEY_ENV}")
        source = f"${KEY_ENV}"
    try:
        return Signer.from_key_string(text.strip())
    except NoteError as exc:
        raise LogKeyInvalid(f"the log key in {source} is not a signer key string") from exc


def parse_verifiers(keys: Sequence[str]) -> list[Verifier]:
    """Parse verifier key strings; raise ``LogKeyInvalid`` naming the first bad one."""
    verifiers: list[Verifier] = []
    for key in keys:
        try:
            verifiers.append(Verifier.from_key_string(key.strip()))
        except NoteError as exc:
            shown = key if len(key) <= 80 else key[:77] + "..."
            raise LogKeyInvalid(f"not a verifier key string: {shown!r}") from exc
    return verifiers
