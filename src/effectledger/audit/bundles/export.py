"""Export a tenant's log to a bundle file, resumably (receipts:
:mod:`effectledger.audit.bundles.receipt`).

:func:`export_log` appends to a JSON Lines bundle (:mod:`effectledger.audit.bundles.format`) in
batches. After each batch the file is flushed and fsync'ed, then the exporter's durable cursor
(``export_cursors``: next position, last checkpoint, acknowledged file length) advances in one
transaction. A crash between the two leaves lines the cursor does not acknowledge: the next run
drops a torn last line, reads the unacknowledged complete lines and skips their event ids and
checkpoints, so the file ends up with every event exactly once and in order. A file shorter than
the cursor says, or a file without a cursor, is refused (:class:`ExportCursorMismatch`) rather
than patched.

The exporter is faithful: it writes what the database holds (an edited row, a missing position)
and leaves judging it to :mod:`effectledger.audit.bundles.verify`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

from effectledger._failpoints import crash_point
from effectledger.audit.bundles.blobs import cited_hash, stored_blobs
from effectledger.audit.bundles.format import (
    blob_line,
    checkpoint_line,
    consistency_line,
    header_line,
)
from effectledger.audit.bundles.receipt import ProofReport, prove_events, stored_event_line
from effectledger.audit.witnessing.submit import cosigned_note
from effectledger.clock import Clock, SystemClock
from effectledger.errors import (
    ConstraintViolation,
    ExportCursorMismatch,
    ExportFailed,
    InvalidInput,
)
from effectledger.model.operations import Row, to_micros, validate_identifier
from effectledger.store import Store, Transaction

# Receipts live in receipt.py; these names stay importable from here.
__all__ = ["ExportReport", "ProofReport", "export_log", "prove_events"]

DEFAULT_EXPORT_BATCH = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportReport:
    """What one :func:`export_log` run wrote.

    ``position`` is the next log position to export; ``duplicates_skipped`` counts lines an
    earlier, interrupted run had written but not acknowledged.
    """

    tenant_id: str
    exporter_id: str
    path: Path
    events: int
    checkpoints: int
    position: int
    checkpoint_seq: int
    resumed: bool
    duplicates_skipped: int


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[BinaryIO]:
    try:  # imported here, so the rest of the evidence tooling imports where there is no fcntl
        import fcntl
    except ImportError as exc:  # pragma: no cover - not a POSIX system
        raise ExportFailed("exporting needs POSIX file locks (fcntl)") from exc
    try:
        handle = open(path, "a+b")  # noqa: SIM115 - held for the whole export
    except OSError as exc:
        raise ExportFailed(f"cannot open {path}: {exc.strerror}") from exc
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise ExportFailed(f"another exporter is writing {path}") from exc
        yield handle
    finally:
        handle.close()


def _durable_append(handle: BinaryIO, data: bytes) -> int:
    handle.seek(0, os.SEEK_END)
    handle.write(data)
    handle.flush()
    os.fsync(handle.fileno())
    return handle.tell()


def _unacknowledged(handle: BinaryIO, offset: int, path: Path) -> tuple[set[str], set[int]]:
    """Event ids and checkpoint numbers written after ``offset``; drop a torn last line."""
    size = handle.seek(0, os.SEEK_END)
    if size < offset:
        raise ExportCursorMismatch(
            f"{path} holds {size} bytes but its cursor acknowledges {offset}: the file was "
            "truncated or replaced; export to a new file or under a new exporter id",
            file_size=size,
            file_offset=offset,
        )
    handle.seek(offset)
    tail = handle.read()
    complete = tail.rfind(b"\n") + 1
    if complete < len(tail):
        handle.truncate(offset + complete)
        handle.flush()
        os.fsync(handle.fileno())
    events: set[str] = set()
    checkpoints: set[int] = set()
    for line in tail[:complete].splitlines():
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ExportCursorMismatch(f"{path} has an unreadable line after its cursor") from exc
        if value.get("type") == "event":
            events.add(value["entry"]["event_id"])
        elif value.get("type") == "checkpoint":
            checkpoints.add(int(value["seq"]))
    return events, checkpoints


def _checkpoint_lines(row: Row) -> bytes:
    """A checkpoint's consistency line and its line (``note`` with its cosignatures)."""
    lines = b""
    if int(row["previous_size"]) > 0:
        proof = [bytes.fromhex(node) for node in json.loads(row["consistency_proof"])]
        lines += consistency_line(int(row["previous_size"]), int(row["size"]), proof)
    return lines + checkpoint_line(int(row["seq"]), row["note"])


def export_log(
    store: Store,
    tenant_id: str,
    path: str | os.PathLike[str],
    *,
    exporter_id: str | None = None,
    batch_size: int = DEFAULT_EXPORT_BATCH,
    clock: Clock | None = None,
    between_batches: Callable[[int], None] | None = None,
) -> ExportReport:
    """Append everything of ``tenant_id``'s log not yet exported by this exporter to ``path``.

    ``exporter_id`` names the durable cursor (default: ``file:`` and the file's absolute path).
    ``between_batches`` is called with the next position after each batch is durable in the file
    but before the cursor records it (the window a crash is most likely to hit).
    Raises :class:`ExportFailed` / :class:`ExportCursorMismatch` with a message; the file and the
    cursor are then left as the last durable batch had them.
    """
    validate_identifier(tenant_id, "tenant_id")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput("batch_size must be a positive integer")
    target = Path(path)
    exporter = _Exporter(
        store,
        tenant_id,
        target,
        exporter_id or f"file:{target.resolve()}",
        batch_size,
        clock or SystemClock(),
    )
    with _locked(target) as handle:
        try:
            return exporter.run(handle, between_batches)
        except OSError as exc:
            raise ExportFailed(f"cannot write {target}: {exc.strerror or exc}") from exc


class _Exporter:
    """One export run: the cursor's state and what this run wrote."""

    def __init__(
        self,
        store: Store,
        tenant_id: str,
        path: Path,
        exporter_id: str,
        batch_size: int,
        clock: Clock,
    ) -> None:
        self.store = store
        self.tenant_id = tenant_id
        self.path = path
        self.exporter_id = exporter_id
        self.key = {"exporter_id": exporter_id, "tenant_id": tenant_id}
        self.batch_size = batch_size
        self.clock = clock
        self.position = self.checkpoint_seq = self.offset = 0
        self.events = self.checkpoints = self.skipped = 0
        self.seen_events: set[str] = set()
        self.seen_checkpoints: set[int] = set()

    def run(self, handle: BinaryIO, between_batches: Callable[[int], None] | None) -> ExportReport:
        resumed = self._start(handle)
        while True:
            rows, pending, blobs = self.store.read(self._next_batch)
            chunk = self._lines(rows, list(pending), blobs)
            if not chunk and not rows and not pending:
                break
            new_offset = _durable_append(handle, b"".join(chunk))
            crash_point("export_after_write")
            if between_batches is not None:
                between_batches(self.position)
            if self.store.write(partial(self._advance, new_offset), label="export_cursor") != 1:
                raise ExportCursorMismatch(
                    f"exporter {self.exporter_id}'s cursor moved during the export"
                )
            self.offset = new_offset
        return ExportReport(
            tenant_id=self.tenant_id,
            exporter_id=self.exporter_id,
            path=self.path,
            events=self.events,
            checkpoints=self.checkpoints,
            position=self.position,
            checkpoint_seq=self.checkpoint_seq,
            resumed=resumed,
            duplicates_skipped=self.skipped,
        )

    def _advance(self, new_offset: int, tx: Transaction) -> int:
        return tx.run(
            "export_cursor_advance",
            {
                **self.key,
                "position": self.position,
                "checkpoint_seq": self.checkpoint_seq,
                "file_offset": new_offset,
                "old_offset": self.offset,
                "now_us": to_micros(self.clock.now()),
            },
        )

    def _start(self, handle: BinaryIO) -> bool:
        """Load or create the cursor; return whether this run resumes an earlier one."""
        cursor = self.store.one("export_cursor_get", self.key)
        if cursor is None:
            if handle.seek(0, os.SEEK_END) > 0:
                raise ExportCursorMismatch(
                    f"{self.path} already holds data that no cursor of exporter "
                    f"{self.exporter_id} acknowledges; export to a new file"
                )
            self.offset = _durable_append(handle, header_line(self.tenant_id))
            try:
                self.store.write(
                    lambda tx: tx.run(
                        "export_cursor_insert",
                        {
                            **self.key,
                            "file_offset": self.offset,
                            "now_us": to_micros(self.clock.now()),
                        },
                    ),
                    label="export_cursor",
                )
            except ConstraintViolation as exc:
                raise ExportCursorMismatch(
                    f"exporter {self.exporter_id} was started twice at once"
                ) from exc
            return False
        self.offset = int(cursor["file_offset"])
        self.position = int(cursor["position"])
        self.checkpoint_seq = int(cursor["checkpoint_seq"])
        self.seen_events, self.seen_checkpoints = _unacknowledged(handle, self.offset, self.path)
        handle.seek(0)
        try:
            header = json.loads(handle.readline())
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("tenant_id") != self.tenant_id:
            raise ExportCursorMismatch(f"{self.path} is not a bundle of tenant {self.tenant_id}")
        return True

    def _next_batch(self, tx: Transaction) -> tuple[list[Row], list[Row], dict[str, bytes]]:
        entries = tx.all(
            "log_entries_from",
            {"tenant_id": self.tenant_id, "position": self.position, "limit": self.batch_size},
        )
        checkpoints = tx.all(
            "log_checkpoints_after",
            {"tenant_id": self.tenant_id, "seq": self.checkpoint_seq, "limit": self.batch_size},
        )
        unseen = [row for row in entries if row["event_id"] not in self.seen_events]
        cosigned: list[Row] = [{**row, "note": cosigned_note(tx, row)} for row in checkpoints]
        return entries, cosigned, stored_blobs(tx, self.tenant_id, unseen)

    def _lines(self, rows: list[Row], queue: list[Row], blobs: dict[str, bytes]) -> list[bytes]:
        """The lines of one batch; each checkpoint follows the events it covers, each blob
        precedes the event that cites it."""
        chunk: list[bytes] = []
        for row in rows:
            self._checkpoint_lines(queue, chunk, int(row["position"]))
            if row["event_id"] is not None:  # a log entry whose event row is gone: a gap
                if row["event_id"] in self.seen_events:
                    self.skipped += 1
                else:
                    digest = cited_hash(row["evidence_reference"])
                    if digest is not None:
                        chunk.append(blob_line(digest, blobs[digest]))
                    chunk.append(stored_event_line(row))
                    self.events += 1
            self.position = int(row["position"]) + 1
        self._checkpoint_lines(queue, chunk, self.position)
        if not rows:  # checkpoints beyond the last entry: their events are missing
            self._checkpoint_lines(queue, chunk, None)
        return chunk

    def _checkpoint_lines(self, queue: list[Row], chunk: list[bytes], upto: int | None) -> None:
        while queue and (upto is None or int(queue[0]["size"]) <= upto):
            row = queue.pop(0)
            if int(row["seq"]) in self.seen_checkpoints:
                self.skipped += 1
            else:
                chunk.append(_checkpoint_lines(row))
                self.checkpoints += 1
            self.checkpoint_seq = int(row["seq"])
