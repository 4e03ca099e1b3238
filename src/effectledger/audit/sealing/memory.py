"""The sealer's memory: the last tree it signed per log, kept outside the ledger database.

A sealer that learns what it signed from the database it seals can be made to sign anything the
database says: empty the log tables and re-queue rewritten events, and it signs the forged
history as checkpoint 1; roll the file back after a later checkpoint, and it signs a fork. So the
sealer keeps its own record, in a file beside its key (the database administrator has no access
to it), and before each signature it requires the database's log to be a consistent extension of
the tree it last signed:

* the database's log is the remembered tree, or one the sealer was about to sign when it last
  stopped (a signature whose COMMIT it never saw): go on;
* it is larger: its stored leaves must reproduce both the remembered root at the remembered size
  and the database's latest checkpoint (another sealer holding the key signed on);
* it is empty: ``log_emptied`` (signing it would re-seal a history);
* it is smaller: ``log_rolled_back`` (cut back, or the database restored from an older copy);
* it has the remembered size and another root, or its leaves do not extend the remembered
  tree: ``log_forked``.

Each ends in :class:`~effectledger.errors.AuditVerificationFailed` and no signature. A log the
memory has never seen is taken as it is on first use, and remembered from its first signature.

A restore from a backup (``effectledger audit restore``) is the one way on from a rolled-back
log: the restored tree goes on as a new segment under a new origin, remembered from its restore
checkpoint, and the old origin is marked as continued by it, so a database that later shows the
old segment again is refused (``log_superseded``) whatever its size.

The file is JSON, ``{"version": 1, "logs": {origin: {"size", "root", "pending"}}}`` (and
``"continued_by"`` for a segment a restore closed), replaced
atomically (written beside, flushed, renamed) under an exclusive lock on ``<file>.lock``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectledger.audit.log.merkle import MerkleTree
from effectledger.errors import AuditVerificationFailed, InvalidInput

__all__ = ["Remembered", "SealerMemory"]

_VERSION = 1


@dataclass(frozen=True, slots=True)
class Remembered:
    """A tree size and root (hex) the sealer signed, or was about to sign."""

    size: int
    root: str


class SealerMemory:
    """The file in which a sealer keeps the last tree it signed for each log origin."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"SealerMemory({str(self.path)!r})"

    # -- reading -------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return {"version": _VERSION, "logs": {}}
        except OSError as exc:
            raise InvalidInput(
                f"cannot read the sealer memory {self.path}: {exc.strerror}"
            ) from exc
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"the sealer memory {self.path} is not JSON") from exc
        if (
            not isinstance(document, dict)
            or document.get("version") != _VERSION
            or not isinstance(document.get("logs"), dict)
        ):
            raise InvalidInput(f"the sealer memory {self.path} is not a version 1 memory")
        return document

    def recall(self, origin: str) -> tuple[Remembered | None, Remembered | None]:
        """``(signed, pending)`` for ``origin``: the last tree signed, and one being signed."""
        return _remembered(self._load()["logs"].get(origin))

    # -- checking ------------------------------------------------------------------------

    def check(
        self,
        origin: str,
        size: int,
        root: str,
        leaves: Callable[[int], Sequence[bytes]],
    ) -> None:
        """Refuse unless the database's log ``(size, root)`` extends the remembered tree.

        ``leaves(n)`` reads the log's first ``n`` stored leaf hashes, needed only when the
        database's log is larger than the remembered tree. Raises
        :class:`~effectledger.errors.AuditVerificationFailed` (``log_emptied``,
        ``log_rolled_back`` or ``log_forked``) naming both trees.
        """
        entry = self._load()["logs"].get(origin)  # one read of the file per check
        if isinstance(entry, dict) and entry.get("continued_by"):
            raise _refuse(
                f"{origin}: this log was restored from a backup and goes on as "
                f"{entry['continued_by']}; the database shows the segment the restore closed",
                "log_superseded",
            )
        signed, pending = _remembered(entry)
        if signed is None:
            return  # a log this sealer has never signed: taken as it is, remembered from now on
        found = Remembered(size, root)
        if found in (signed, pending):
            return
        said = (
            f"{origin}: the database's log has size {size}, but this sealer last signed size "
            f"{signed.size} (root {signed.root[:16]}…)"
        )
        if size == 0:
            raise _refuse(
                f"{said}; it was emptied, and sealing it again would re-seal", "log_emptied"
            )
        if size < signed.size:
            raise _refuse(
                f"{said}; it was cut back or rolled back (a restore from an older copy, or a "
                "failover to a standby that lacked writes the old primary acknowledged); if "
                "the database was restored from a backup on purpose, `effectledger audit "
                "restore` goes on from it (docs/operating.md, 'Restoring from a backup')",
                "log_rolled_back",
            )
        if size == signed.size:
            raise _refuse(f"{said}; same size, another root: a fork", "log_forked")
        tree = MerkleTree(leaves(size))
        if (
            len(tree) != size
            or tree.root_at(signed.size).hex() != signed.root
            or tree.root().hex() != root
        ):
            raise _refuse(f"{said}; its leaves do not extend that tree: a fork", "log_forked")

    # -- writing -------------------------------------------------------------------------

    def begin(self, origin: str, old: Remembered, new: Remembered) -> None:
        """Note ``new``, about to be signed over ``old`` (before its COMMIT), so a lost COMMIT
        stays explained; a log seen for the first time starts from ``old``."""
        with self._locked() as document:
            entry = document["logs"].setdefault(origin, {"size": old.size, "root": old.root})
            entry["pending"] = {"size": new.size, "root": new.root}

    def commit(self, origin: str, size: int, root: str) -> None:
        """Remember ``(size, root)`` as the last tree signed for ``origin``.

        Never lowers what is remembered: when several sealers share this memory (the workers of
        one host, beside ``audit seal``), one that recorded a larger tree first keeps it.
        """
        with self._locked() as document:
            entry = document["logs"].get(origin)
            if isinstance(entry, dict) and int(entry.get("size", -1)) > size:
                if entry.get("pending") == {"size": size, "root": root}:
                    entry["pending"] = None
                return
            document["logs"][origin] = {"size": size, "root": root, "pending": None}

    def latest_segment(self, origin: str) -> str:
        """The last origin a chain of restores from ``origin`` went on as (``origin`` itself if
        no restore closed it)."""
        logs = self._load()["logs"]
        seen = {origin}
        while isinstance(logs.get(origin), dict) and logs[origin].get("continued_by"):
            origin = str(logs[origin]["continued_by"])
            if origin in seen:  # pragma: no cover - supersede never writes a cycle
                break
            seen.add(origin)
        return origin

    def supersede(self, origins: Sequence[str], by: str, size: int, root: str) -> None:
        """Close ``origins`` (a restore goes on as ``by`` from the tree ``(size, root)``).

        ``by`` is remembered as being signed from that tree (its restore checkpoint is about to
        be signed), and a database that shows one of ``origins`` again is refused from now on.
        """
        with self._locked() as document:
            logs = document["logs"]
            for origin in origins:
                closed = logs.setdefault(origin, {"size": size, "root": root, "pending": None})
                closed["continued_by"] = by
            logs[by] = {"size": size, "root": root, "pending": None}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.name == "posix":
                import fcntl

                fcntl.flock(lock, fcntl.LOCK_EX)
            document = self._load()
            yield document
            self._replace(document)
        finally:
            os.close(lock)  # closing the descriptor releases the lock

    def _replace(self, document: dict[str, Any]) -> None:
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(document, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def _remembered(entry: object) -> tuple[Remembered | None, Remembered | None]:
    """``(signed, pending)`` of one log's entry in the file (``None, None`` for none)."""
    if not isinstance(entry, dict):
        return None, None
    pending = entry.get("pending")
    return (
        Remembered(int(entry["size"]), str(entry["root"])),
        None if not pending else Remembered(int(pending["size"]), str(pending["root"])),
    )


def _refuse(message: str, reason: str) -> AuditVerificationFailed:
    return AuditVerificationFailed(message, reason=reason)
