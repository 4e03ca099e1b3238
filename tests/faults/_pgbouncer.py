"""A real PgBouncer in transaction pooling mode in front of the test PostgreSQL server.

Debian's ``pgbouncer``, run as the ``postgres`` user on a free port of 127.0.0.1 with its
configuration in a temporary folder, pooling by transaction (``pool_mode = transaction``) with
few server connections, so that the clients' transactions really share them. Needs root and
the package: without them the tests that use it skip, saying why (and fail under CI).

Run as a module, it puts one in front of ``$EFFECTLEDGER_TEST_POSTGRES_URL`` for a command::

    python -m tests.faults._pgbouncer -- .venv/bin/pytest tests/races -m postgres

which runs with ``EFFECTLEDGER_TEST_POSTGRES_URL`` pointing at PgBouncer and
``EFFECTLEDGER_TEST_POOLER=transaction``, so every store the fixtures open goes through it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import in_ci, require_postgres

POOL_SIZE = 3
"""Server connections per database and user: fewer than the clients, so they are shared."""


def missing() -> str | None:
    """Why PgBouncer cannot run here, or ``None`` if it can."""
    if os.geteuid() != 0:
        return "PgBouncer runs as the postgres user, which needs root"
    if shutil.which("pgbouncer") is None:
        return "pgbouncer is not installed (Debian package pgbouncer)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def pgbouncer(target_url: str) -> Iterator[str]:
    """Run PgBouncer in front of the server of ``target_url``; yield the same URL through it."""
    target = urlsplit(target_url)
    folder = Path(tempfile.mkdtemp(prefix="effectledger-pgbouncer-"))
    port = _free_port()
    config = folder / "pgbouncer.ini"
    config.write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={target.hostname or '127.0.0.1'} port={target.port or 5432}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'users.txt'}",
                "pool_mode = transaction",
                "max_client_conn = 500",
                f"default_pool_size = {POOL_SIZE}",
                "max_db_connections = 50",
                f"logfile = {folder / 'pgbouncer.log'}",
                f"pidfile = {folder / 'pgbouncer.pid'}",
                "",
            ]
        ),
        "utf-8",
    )
    (folder / "users.txt").write_text(f'"{target.username or "postgres"}" ""\n', "utf-8")
    shutil.chown(folder, "postgres")
    for path in folder.iterdir():
        shutil.chown(path, "postgres")
    process = subprocess.Popen(
        ["runuser", "-u", "postgres", "--", "pgbouncer", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, (folder / "pgbouncer.log").read_text()
                assert time.monotonic() < deadline, "PgBouncer did not start"
                time.sleep(0.1)
        netloc = target.netloc.rsplit("@", 1)
        user = f"{netloc[0]}@" if len(netloc) == 2 else ""
        yield urlunsplit(target._replace(netloc=f"{user}127.0.0.1:{port}"))
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(folder, ignore_errors=True)


def pgbouncer_fixture() -> Iterator[str]:
    """Yield the test server's URL through a PgBouncer in transaction mode (or skip)."""
    reason = missing()
    if reason is not None:
        if in_ci():
            pytest.fail(f"the PgBouncer tests must run in CI: {reason}")
        pytest.skip(reason)
    with pgbouncer(require_postgres()) as url:
        yield url


def main(argv: list[str]) -> int:
    """Run ``argv`` (after ``--``) with the test server behind PgBouncer."""
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    reason = missing()
    if reason is not None:
        print(f"cannot run PgBouncer: {reason}", file=sys.stderr)
        return 1
    with pgbouncer(os.environ["EFFECTLEDGER_TEST_POSTGRES_URL"]) as url:
        env = {
            **os.environ,
            "EFFECTLEDGER_TEST_POSTGRES_URL": url,
            "EFFECTLEDGER_TEST_POOLER": "transaction",
        }
        print(f"+ through PgBouncer (transaction pooling): {' '.join(command)}", flush=True)
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
