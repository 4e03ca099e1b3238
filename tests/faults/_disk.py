"""A real small disk for the SQLite ledger: a size-limited tmpfs, filled, freed, remounted.

Mounting needs root (CI runs as root); elsewhere the tests that use it skip, saying why.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from effectledger import EffectLedger, OperationState
from effectledger.events.chain import verify_chain
from tests.acceptance.test_authority_matrix import REVIEWER
from tests.conftest import in_ci, raw_sql

DISK_SIZE = "4m"
"""Room for the ledger's schema and some refunds; the filler takes the rest."""


class SmallDisk:
    """A tmpfs mounted at :attr:`path`, with a filler file to take its free space."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    @property
    def url(self) -> str:
        """The store URL of a ledger on this disk."""
        return f"sqlite:///{self.path / 'ledger.db'}"

    def fill(self) -> int:
        """Write the filler until the file system refuses a byte; return its size."""
        chunk = b"\0" * 4096
        with self.filler.open("ab", buffering=0) as out:
            error = 0
            while not error:
                try:
                    out.write(chunk)
                except OSError as exc:
                    error = exc.errno or -1
            assert error == errno.ENOSPC, error
            with suppress(OSError):  # the last partial page: one byte at a time
                while True:
                    out.write(b"\0")
        return self.filler.stat().st_size

    def free(self) -> None:
        """Delete the filler: the disk has room again."""
        self.filler.unlink()

    def remount(self, mode: str) -> None:
        """Remount the file system ``ro`` or ``rw``."""
        subprocess.run(["mount", "-o", f"remount,{mode}", str(self.path)], check=True)


def mount_small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """Mount a tmpfs of :data:`DISK_SIZE` under ``tmp_path``; unmount it afterwards."""
    reason = None
    if os.geteuid() != 0:
        reason = "mounting a size-limited tmpfs needs root"
    path = tmp_path / "disk"
    path.mkdir()
    if reason is None:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            reason = f"cannot mount a tmpfs: {done.stderr.strip()}"
    if reason is not None:
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield SmallDisk(path)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(path)], capture_output=True)
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"


def row_counts(store_url: str) -> dict[str, int]:
    """How many rows each table of the ledger file holds, read around the store."""
    tables = [str(name) for (name,) in raw_sql(store_url, TABLES_SQL)]
    return {
        table: int(str(raw_sql(store_url, f'SELECT count(*) FROM "{table}"')[0][0]))
        for table in tables
    }


def check_consistent(app: EffectLedger, store_url: str) -> dict[OperationState, int]:
    """Every trail unbroken up to its row's head, every attempt with its prepared event; the
    operations counted by state."""
    states: dict[OperationState, int] = {}
    for operation in app.operations(REVIEWER, limit=1000):
        events = app.events(REVIEWER, operation.operation_id)
        verify_chain(events, head=operation.last_event_hash)
        states[operation.state] = states.get(operation.state, 0) + 1
    orphans = raw_sql(
        store_url,
        "SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM audit_events e "
        "WHERE e.attempt_id = a.attempt_id AND e.event_type = 'AttemptPrepared')",
    )
    assert orphans == [(0,)]
    return states
