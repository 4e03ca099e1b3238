"""A private PostgreSQL cluster for a test that restarts its server (never the shared one).

Built with the installed server's ``initdb`` and ``pg_ctl`` in a temporary folder owned by the
``postgres`` user, listening on a free port of 127.0.0.1 with trust authentication; stopped and
deleted afterwards. Needs root (to act as ``postgres``) and the server binaries: without them
the tests that use it skip, saying why (and fail under CI).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import in_ci

ROOT = Path("/usr/lib/postgresql")


def _binaries() -> Path | None:
    versions = sorted(ROOT.glob("*/bin/pg_ctl")) if ROOT.is_dir() else []
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """One running private server: its URL, and restart/stop/start as an operator would."""

    def __init__(self, bin_dir: Path, folder: Path) -> None:
        self.bin_dir = bin_dir
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()

    @property
    def url(self) -> str:
        """The URL of the cluster's ``postgres`` database."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *command: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        self._as_postgres(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-o",
            options,
            "-w",
            action,
            *extra,
        )

    def init(self) -> None:
        """Create the cluster's files and start it."""
        self._as_postgres(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"
        )
        self.start()

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._pg_ctl("start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions and close every session)."""
        self._pg_ctl("stop", "-m", mode)

    def restart(self) -> None:
        """Restart the server, closing every session, as an operator's restart does."""
        self._pg_ctl("restart", "-m", "fast")


def private_cluster() -> Iterator[Cluster]:
    """A started private cluster, stopped and removed afterwards."""
    reason = None
    bin_dir = _binaries()
    if bin_dir is None:
        reason = f"no PostgreSQL server binaries under {ROOT}"
    elif os.geteuid() != 0 or shutil.which("runuser") is None:
        reason = "starting a private PostgreSQL cluster needs root and runuser"
    if reason is not None or bin_dir is None:
        if in_ci():
            pytest.fail(str(reason))
        pytest.skip(str(reason))
    folder = Path(tempfile.mkdtemp(prefix="effectledger-pg-"))
    shutil.chown(folder, "postgres", "postgres")
    folder.chmod(0o700)
    cluster = Cluster(bin_dir, folder)
    try:
        cluster.init()
        yield cluster
    finally:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(bin_dir / "pg_ctl"), "-D", str(cluster.data),
             "stop", "-m", "immediate"],
            capture_output=True,
            timeout=60,
            check=False,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
