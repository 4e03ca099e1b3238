"""Private key files, and the key directory where a ledger keeps the keys the database never sees.

A key file is UTF-8 text that only its owner may read (like an SSH key). A ledger's **key
directory** holds its trail key and its log signing key, made by ``effectledger migrate`` on a
new ledger (:func:`key_directory_for` says where; ``docs/operating.md``, "Keys"):

- ``trail.keys``: the trail key strings, the current one first (mode 600);
- ``log.key``: the log's signer key string (mode 600);
- ``log.pub``: its verifier key string, the one thing in the directory that may be shown;
- ``sealer-memory.json``: the last tree each sealer using this directory signed per log
  (:mod:`effectledger.audit.sealing.memory`), written by the first seal (mode 600).

The directory itself is mode 700. It is never inside the database: an administrator of the
database alone cannot read it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from effectledger.errors import EffectLedgerError, InvalidInput

__all__ = [
    "KEY_DIR_ENV",
    "LOG_KEY_FILE",
    "SEALER_MEMORY_FILE",
    "SQLITE_SUFFIX",
    "TRAIL_KEYS_FILE",
    "VERIFIER_KEY_FILE",
    "key_directory_for",
    "make_private_directory",
    "read_private_file",
    "replace_private_file",
    "write_private_file",
]

KEY_DIR_ENV: Final = "EFFECTLEDGER_KEY_DIR"
"""The environment variable that names a ledger's key directory (the ``key_dir`` setting)."""

TRAIL_KEYS_FILE: Final = "trail.keys"
LOG_KEY_FILE: Final = "log.key"
VERIFIER_KEY_FILE: Final = "log.pub"
SEALER_MEMORY_FILE: Final = "sealer-memory.json"
SQLITE_SUFFIX: Final = ".keys"
"""An SQLite ledger's key directory is its file's path with this added (``ledger.db.keys``)."""


def key_directory_for(url: str, configured: str | os.PathLike[str] | None = None) -> Path:
    """Where the ledger at ``url`` keeps its keys: ``configured`` if given, else, for SQLite,
    the database file's path with ``.keys`` added (``ledger.db`` -> ``ledger.db.keys``).

    A PostgreSQL ledger has no file to sit beside: without ``configured`` (the ``key_dir``
    setting, ``$EFFECTLEDGER_KEY_DIR``, ``--key-dir``) this raises
    :class:`~effectledger.errors.InvalidInput` (field ``key_dir``) saying how to set one.
    """
    if configured is not None and str(configured):
        return Path(configured)
    parts = urlsplit(url)
    if parts.scheme == "sqlite" and parts.path.startswith("/") and len(parts.path) > 1:
        return Path(parts.path[1:] + SQLITE_SUFFIX)
    raise InvalidInput(
        f"a {parts.scheme or 'store'} ledger has no file to keep its keys beside: set the "
        f"key_dir setting or ${KEY_DIR_ENV} (--key-dir on the command line) to a directory "
        "outside the database, or open it without keys explicitly (keys=None, --no-keys)",
        field="key_dir",
    )


def read_private_file(path: Path, what: str, error: type[EffectLedgerError]) -> str:
    """The text of the ``what`` file at ``path``; ``error`` if it cannot be read, is not UTF-8,
    or is accessible to group or others. The message names the file, never its content."""
    try:
        mode = path.stat().st_mode
        text = path.read_text("utf-8")
    except OSError as exc:
        raise error(f"cannot read the {what} file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"the {what} file {path} is not UTF-8 text") from exc
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise error(f"the {what} file {path} is accessible to group or others; chmod 600 it")
    return text


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to a new file at ``path`` that only its owner may read (mode 600).

    Never overwrites (``FileExistsError``); the file is flushed to disk before this returns.
    """
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def replace_private_file(path: Path, text: str) -> None:
    """Replace the file at ``path`` with ``text``, atomically: a new private file (mode 600)
    beside it, flushed to disk, then renamed over it; a reader sees the old text or the new."""
    staging = path.with_name(f".{path.name}.{os.urandom(8).hex()}")
    write_private_file(staging, text)
    try:
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    if os.name == "posix":
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def make_private_directory(path: Path) -> None:
    """Create the directory ``path`` (its parents as needed) that only its owner may enter
    (mode 700, whatever the umask); ``FileExistsError`` if it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700)
    path.chmod(0o700)
