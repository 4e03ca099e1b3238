"""A witness: an independent cosigner of checkpoints, in the C2SP tlog-witness style.

A witness keeps, in its own small SQLite file, the latest checkpoint it cosigned for each log
origin. It answers ``add-checkpoint`` requests (an ``old <size>`` line, the consistency proof's
hashes in base64, an empty line, the signed checkpoint) exactly as C2SP tlog-witness asks:

* 404 for an origin it does not witness, 403 unless a log key it trusts signed the checkpoint,
  400 for a malformed request or an old size above the checkpoint's;
* 409 (``text/x.tlog.size``, the size it holds) when the old size is not the size of its
  latest cosigned checkpoint, so an older or rolled-back checkpoint is refused, and when the old
  size equals the new one but the roots differ (a fork);
* 422 when the consistency proof from its latest checkpoint does not verify;
* otherwise it records the checkpoint and answers 200 with its cosignature line
  (:mod:`effectledger.audit.witnessing.cosign`).

The check against the stored size and the update are one ``BEGIN IMMEDIATE`` transaction, so
two concurrent requests cannot roll the witness back. The witness trusts nothing the log says
about itself beyond the log key's signature and the proof.
"""

from __future__ import annotations

import base64
import binascii
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from effectledger.audit.keys.signers import Verifier
from effectledger.audit.log.merkle import EMPTY_ROOT
from effectledger.audit.log.origins import ORIGIN_PREFIX
from effectledger.audit.log.proofs import verify_consistency
from effectledger.audit.log.tlog import Checkpoint, open_checkpoint
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.errors import NoteError, ProofError
from effectledger.sql import load_statements

__all__ = ["MAX_REQUEST_BYTES", "SIZE_CONTENT_TYPE", "Witness", "WitnessAnswer"]

MAX_REQUEST_BYTES: Final = 64 * 1024
SIZE_CONTENT_TYPE: Final = "text/x.tlog.size"
_MAX_PROOF_LINES: Final = 63
_SQL = load_statements("witness", "queries.sql")


@dataclass(frozen=True, slots=True)
class WitnessAnswer:
    """An HTTP answer of the witness: status, content type and body."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def _text(status: int, message: str) -> WitnessAnswer:
    return WitnessAnswer(status, (message + "\n").encode())


@dataclass(frozen=True, slots=True)
class _Request:
    old_size: int
    proof: tuple[bytes, ...]
    note: str


def _parse(body: bytes) -> _Request | None:
    """The parts of an ``add-checkpoint`` body, or ``None`` if it is malformed."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head, separator, note = text.partition("\n\n")
    if not separator:
        return None
    lines = head.split("\n")
    old = lines[0]
    digits = old.removeprefix("old ")
    if (
        digits == old
        or not digits.isdigit()
        or (len(digits) > 1 and digits[0] == "0")
        or len(lines) - 1 > _MAX_PROOF_LINES
    ):
        return None
    proof: list[bytes] = []
    for line in lines[1:]:
        try:
            node = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(node) != 32:
            return None
        proof.append(node)
    return _Request(int(digits), tuple(proof), note)


class Witness:
    """Cosigns checkpoints of the logs it witnesses, keeping the latest per origin in ``path``.

    ``log_keys``: the log verifier keys it trusts. ``origins``: the origins it witnesses
    (``None``: every ``effectledger/`` origin). ``clock``: POSIX seconds for the timestamp.
    """

    def __init__(
        self,
        path: str | Path,
        cosigner: Cosigner,
        log_keys: Sequence[Verifier],
        *,
        origins: Sequence[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not log_keys:
            raise ValueError("a witness trusts at least one log key")
        self.path = Path(path)
        self.cosigner = cosigner
        self.log_keys = tuple(log_keys)
        self.origins = None if origins is None else frozenset(origins)
        self.clock = clock
        self._local = threading.local()
        connection = self._connection()
        connection.execute(_SQL["journal_mode_wal"])
        connection.execute(_SQL["create_table"])

    def _connection(self) -> sqlite3.Connection:
        found: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if found is None:
            found = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._local.connection = found
        return found

    def close(self) -> None:
        """Close this thread's connection to the witness's file."""
        found: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if found is not None:
            found.close()
            self._local.connection = None

    def witnesses(self, origin: str) -> bool:
        """Whether this witness cosigns checkpoints of ``origin``."""
        if self.origins is not None:
            return origin in self.origins
        return origin.startswith(ORIGIN_PREFIX)

    def latest(self, origin: str) -> tuple[int, str] | None:
        """``(size, note)`` of the latest checkpoint cosigned for ``origin``, if any."""
        row = self._connection().execute(_SQL["latest"], {"origin": origin}).fetchone()
        return None if row is None else (int(row[0]), str(row[2]))

    def add_checkpoint(self, body: bytes) -> WitnessAnswer:
        """Answer one ``add-checkpoint`` request body (see the module docstring)."""
        if len(body) > MAX_REQUEST_BYTES:
            return _text(400, "request too large")
        request = _parse(body)
        if request is None:
            return _text(400, "malformed add-checkpoint request")
        split = request.note.rfind("\n\n")
        try:
            checkpoint = Checkpoint.parse(request.note[: split + 1] if split >= 0 else "")
        except NoteError:
            return _text(400, "malformed checkpoint")
        if not self.witnesses(checkpoint.origin):
            return _text(404, f"unknown log origin {checkpoint.origin}")
        try:
            open_checkpoint(request.note, self.log_keys, origin=checkpoint.origin)
        except NoteError as exc:
            if exc.details.get("reason") in ("note_unverified", "note_bad_signature"):
                return _text(403, "no signature by a trusted log key")
            return _text(400, "malformed checkpoint note")
        if request.old_size > checkpoint.size:
            return _text(400, "the old size is above the checkpoint's size")
        return self._cosign(request, checkpoint, request.note[: split + 1])

    def _cosign(self, request: _Request, checkpoint: Checkpoint, body: str) -> WitnessAnswer:
        connection = self._connection()
        origin = checkpoint.origin
        connection.execute(_SQL["begin_write"])
        try:
            row = connection.execute(_SQL["latest"], {"origin": origin}).fetchone()
            size, root = (0, EMPTY_ROOT) if row is None else (int(row[0]), bytes.fromhex(row[1]))
            if request.old_size != size:
                connection.execute(_SQL["rollback"])
                return WitnessAnswer(409, f"{size}\n".encode(), SIZE_CONTENT_TYPE)
            if request.old_size == checkpoint.size and (
                request.proof or checkpoint.root_hash != root
            ):
                connection.execute(_SQL["rollback"])
                return _text(409, "another root at the size already cosigned: a fork")
            try:
                verify_consistency(size, checkpoint.size, root, checkpoint.root_hash, request.proof)
            except ProofError:
                connection.execute(_SQL["rollback"])
                return _text(422, "the consistency proof does not verify")
            connection.execute(
                _SQL["record"],
                {
                    "origin": origin,
                    "size": checkpoint.size,
                    "root": checkpoint.root_hash.hex(),
                    "note": request.note,
                },
            )
            connection.execute(_SQL["commit"])
        except BaseException:
            if connection.in_transaction:
                connection.execute(_SQL["rollback"])
            raise
        line = self.cosigner.cosign(body, int(self.clock()))
        return WitnessAnswer(200, line.encode())
