"""The keys that protect a ledger: found in its key directory, made there for a new ledger.

A ledger is protected by two keys the database never holds (``docs/evidence.md``): the **trail
key** tags every event, so a claim refuses a trail an administrator re-hashed
(:mod:`effectledger.events.authentication`), and the **log key** signs the checkpoints of the
sealed logs that reviewers verify (:mod:`effectledger.audit.keys.files`). :func:`find_keys` takes
each from, in order: what the caller passed, the environment (``$EFFECTLEDGER_TRAIL_KEY``,
``$EFFECTLEDGER_LOG_KEY``), then the key directory (:func:`~effectledger.keyfiles.
key_directory_for`). A ledger that has never written an event and has no key directory gets
one, with a new key of each kind (:func:`create_keys`); an older ledger keeps opening without,
and :func:`warn_unprotected` says once, on the ``effectledger`` logger, what is then exposed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from effectledger.errors import InvalidInput, TrailKeyInvalid
from effectledger.events.authentication import (
    TRAIL_KEY_ENV,
    TrailKey,
    TrailKeys,
    load_trail_keys,
    new_trail_key,
    trail_keys_from_environment,
)
from effectledger.keyfiles import (
    LOG_KEY_FILE,
    SEALER_MEMORY_FILE,
    TRAIL_KEYS_FILE,
    VERIFIER_KEY_FILE,
    key_directory_for,
    make_private_directory,
    replace_private_file,
    write_private_file,
)
from effectledger.store import Store, redact

if TYPE_CHECKING:
    from effectledger.audit.keys.signers import Signer

__all__ = [
    "LedgerKeys",
    "create_keys",
    "drop_trail_key",
    "find_keys",
    "load_keys",
    "rotate_trail_key",
    "sealer_memory_for",
    "warn_unprotected",
]

log = logging.getLogger("effectledger")

TRAIL_EXPOSED = (
    "no trail key: an administrator who re-hashes a stored event (an amount of 30 made 500,000) "
    "has it dispatched"
)
LOG_EXPOSED = (
    "no log key: nothing is sealed, receipts answer log_not_sealed and the seal lag grows "
    "(the SealingStopped alert)"
)


_LOG_KEY_ENV = "EFFECTLEDGER_LOG_KEY"
""":data:`effectledger.audit.keys.files.KEY_ENV`, named here so that opening a ledger (and
performing) loads no evidence module: the log key is parsed by the first seal."""


@dataclass(frozen=True, slots=True)
class LedgerKeys:
    """The keys found for one ledger, and the key directory they were looked for in.

    ``trail_keys``: ``None`` when the ledger runs without a trail key. The log key is
    ``signer`` (given by the caller), else ``log_key_file`` (the key directory's), else
    ``$EFFECTLEDGER_LOG_KEY`` when ``log_key_env``; it is parsed when first used
    (:meth:`load_signer`). ``directory``: the key directory, ``None`` when none was looked at.
    ``created``: this call made the directory and its keys.
    """

    trail_keys: TrailKeys | None
    signer: Signer | None = None
    log_key_file: Path | None = None
    log_key_env: bool = False
    directory: Path | None = None
    created: bool = False

    @property
    def has_log_key(self) -> bool:
        """Whether a log key was found (it may still fail to parse when first used)."""
        return self.signer is not None or self.log_key_file is not None or self.log_key_env

    def load_signer(self) -> Signer | None:
        """The log's signer, parsed from where it was found; ``None`` without a log key.

        Raises :class:`~effectledger.errors.LogKeyInvalid` for a malformed or exposed key.
        """
        if self.signer is not None or not self.has_log_key:
            return self.signer
        from effectledger.audit.keys.files import load_signer

        return load_signer(self.log_key_file)

    def verifier_key(self) -> str | None:
        """The public key that verifies the log's checkpoints (safe to show), if there is one."""
        signer = self.load_signer()
        return None if signer is None else signer.verifier().key_string()

    @property
    def exposed(self) -> tuple[str, ...]:
        """What is unprotected, one sentence per missing key (empty when both are held)."""
        return tuple(
            sentence
            for sentence, held in (
                (TRAIL_EXPOSED, self.trail_keys is not None),
                (LOG_EXPOSED, self.has_log_key),
            )
            if not held
        )


def load_keys(directory: Path) -> LedgerKeys:
    """The keys in the key directory ``directory`` (each absent when its file is).

    A trail key file that is present but unreadable, malformed or readable by others raises
    ``trail_key_invalid``; the log key file is parsed when first used (``log_key_invalid``).
    """
    trail_file, log_file = directory / TRAIL_KEYS_FILE, directory / LOG_KEY_FILE
    return LedgerKeys(
        trail_keys=load_trail_keys(trail_file) if trail_file.exists() else None,
        log_key_file=log_file if log_file.exists() else None,
        directory=directory,
    )


def create_keys(directory: Path, *, log_key_name: str = "effectledger") -> LedgerKeys:
    """Make the key directory ``directory`` with a new trail key and a new log key.

    The keys are written into a private directory beside it that is then renamed into place,
    so another process never sees a half-made one; when another process made ``directory``
    first, its keys are the ones returned (``created`` false). Nothing is printed or logged.
    """
    from effectledger.audit.keys.files import new_key_pair

    directory = directory.absolute()
    staging = directory.with_name(f".{directory.name}.{secrets.token_hex(8)}")
    signer_key, verifier_key = new_key_pair(log_key_name)
    make_private_directory(staging)
    try:
        write_private_file(staging / TRAIL_KEYS_FILE, new_trail_key() + "\n")
        write_private_file(staging / LOG_KEY_FILE, signer_key + "\n")
        write_private_file(staging / VERIFIER_KEY_FILE, verifier_key + "\n")
        try:
            os.rename(staging, directory)  # atomic; refused when directory already exists
        except OSError:
            if not directory.is_dir():
                raise
            return load_keys(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dataclasses.replace(load_keys(directory), created=True)


def _is_new(store: Store) -> bool:
    row = store.one("ledger_has_events", {})
    return row is None or not row["found"]


def find_keys(
    store: Store,
    url: str,
    *,
    key_dir: str | os.PathLike[str] | None = None,
    trail_keys: TrailKeys | None = None,
    signer: Signer | None = None,
    create: bool = False,
    environ: Mapping[str, str] | None = None,
) -> LedgerKeys:
    """The keys of the ledger ``store`` opened at ``url`` (see the module docstring).

    ``trail_keys`` / ``signer``: what the caller chose, which wins. ``key_dir``: the configured
    key directory (else, for SQLite, beside the file). ``create``: make the key directory when
    the ledger has never written an event and has none (what ``migrate`` does). Raises
    :class:`~effectledger.errors.InvalidInput` (field ``key_dir``) when a key is still missing
    and no key directory can be named (a PostgreSQL ledger with no ``key_dir``).
    """
    env = os.environ if environ is None else environ
    if trail_keys is None and env.get(TRAIL_KEY_ENV, "").strip():
        trail_keys = trail_keys_from_environment(env)
    log_key_env = signer is None and bool(env.get(_LOG_KEY_ENV, "").strip())
    if trail_keys is not None and (signer is not None or log_key_env):
        return LedgerKeys(trail_keys, signer, log_key_env=log_key_env)
    directory = key_directory_for(url, key_dir)
    if create and not directory.exists() and _is_new(store):
        found = create_keys(directory)
    elif directory.exists():  # asked again: whoever wrote the first event made it before
        found = load_keys(directory)
    else:
        found = LedgerKeys(None, directory=directory)
    given_log = signer is not None or log_key_env
    return LedgerKeys(
        trail_keys or found.trail_keys,
        signer,
        log_key_file=None if given_log else found.log_key_file,
        log_key_env=log_key_env,
        directory=directory,
        created=found.created,
    )


def sealer_memory_for(url: str, key_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Where a sealer of the ledger at ``url`` keeps its memory by default
    (:mod:`effectledger.audit.sealing.memory`): ``sealer-memory.json`` in the ledger's key
    directory, beside its keys; ``None`` when the ledger has no key directory (none exists, or none
    can be named: a PostgreSQL ledger without ``key_dir``)."""
    try:
        directory = key_directory_for(url, key_dir)
    except InvalidInput:
        return None
    return directory / SEALER_MEMORY_FILE if directory.is_dir() else None


def warn_unprotected(url: str, keys: LedgerKeys) -> None:
    """Log one warning on the ``effectledger`` logger naming what the ledger at ``url`` runs
    without; nothing when both keys are held."""
    if not keys.exposed:
        return
    where = (
        "opened without looking for keys"
        if keys.directory is None
        else f"key directory {keys.directory}"
    )
    log.warning(
        "the ledger %s is open UNPROTECTED (%s): %s. `effectledger migrate --create-keys` "
        'makes the keys (docs/operating.md, "Keys")',
        redact(url),
        where,
        "; ".join(keys.exposed),
    )


def _trail_file(directory: Path) -> Path:
    path = directory / TRAIL_KEYS_FILE
    if not path.exists():
        raise TrailKeyInvalid(f"the key directory {directory} has no {TRAIL_KEYS_FILE} file")
    return path


def _next_key_id(keys: TrailKeys) -> str:
    numbers = [
        int(key_id[6:])
        for key_id in keys.key_ids
        if key_id[:6] == "trail-" and key_id[6:].isdigit()
    ]
    candidate = f"trail-{max(numbers, default=0) + 1}"
    return candidate if candidate not in keys.key_ids else f"trail-{secrets.token_hex(4)}"


def rotate_trail_key(
    directory: Path, *, now_us: int, retire_after_us: int = 0, key_id: str | None = None
) -> tuple[TrailKeys, TrailKeys]:
    """Put a new current trail key first in ``directory``'s ``trail.keys`` and retire the others.

    Every previous key that is not retired yet is retired at ``now_us + retire_after_us``: it
    keeps verifying the events recorded before then (the trails in flight, until ``audit
    retag`` re-tags them), and nothing newer. The grace lets every process be restarted with
    the new file first (each reads its keys when it opens the ledger). Returns the keys before
    and after. The file is replaced atomically, mode 600; no secret is printed or logged.
    """
    path = _trail_file(directory)
    before = load_trail_keys(path)
    new = TrailKey.from_key_string(new_trail_key(key_id or _next_key_id(before)))
    if new.key_id in before.key_ids:
        raise TrailKeyInvalid(f"the key directory already holds a trail key {new.key_id!r}")
    retired_us = int(now_us) + max(0, int(retire_after_us))
    previous = [
        key if key.retired_us is not None else key.retire(retired_us) for key in before.keys
    ]
    after = TrailKeys(new, retired=previous)
    replace_private_file(path, after.key_lines())
    return before, after


def drop_trail_key(directory: Path, key_id: str) -> TrailKeys:
    """Remove the retired trail key ``key_id`` from ``directory``'s ``trail.keys`` (its secret
    is gone with the old file); the keys that remain. The current key, and a key not retired
    yet, are refused: retire it by a rotation first."""
    path = _trail_file(directory)
    keys = load_trail_keys(path)
    found = next((key for key in keys.keys if key.key_id == key_id), None)
    if found is None:
        raise TrailKeyInvalid(f"the key directory holds no trail key {key_id!r}")
    if found is keys.current or found.retired_us is None:
        raise TrailKeyInvalid(
            f"the trail key {key_id!r} is not retired: rotate (audit rotate-trail-key) first"
        )
    after = TrailKeys(keys.current, retired=[key for key in keys.keys[1:] if key is not found])
    replace_private_file(path, after.key_lines())
    return after
