"""A real high-availability PostgreSQL cluster for the failover tests: Patroni over etcd.

Three PostgreSQL nodes of the installed major version, each managed by its own Patroni process,
with one etcd member as Patroni's store, all on free ports of 127.0.0.1 and with every file in
a temporary folder; stopped and deleted afterwards. The cluster is what people run in
production: a primary, a synchronous standby and a replica, and Patroni promoting a standby when
the primary fails. The fixture waits for a leader and a synchronous standby, gives the
multi-host URL (``host=a,b,c`` with ``target_session_attrs=read-write``, so libpq finds the
primary by itself), and can kill -9 the primary's postmaster, stop its node cleanly, or ask
Patroni for a switchover, as an operator or a failure would.

Needs root (PostgreSQL runs as the ``postgres`` user), Debian's ``patroni`` and ``etcd-server``
and the server binaries: without them the tests that use it skip, saying why (and fail under
CI, where ``.ci/run`` installs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_ci

ROOT = Path("/usr/lib/postgresql")
NODES = 3


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports of 127.0.0.1 (held open together, so none repeats)."""
    probes = []
    try:
        for _ in range(count):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            probes.append(probe)
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _binaries() -> Path | None:
    versions = sorted(ROOT.glob("*/bin/pg_ctl")) if ROOT.is_dir() else []
    return versions[-1].parent if versions else None


def missing() -> str | None:
    """Why this machine cannot run the cluster, or ``None`` if it can."""
    if os.geteuid() != 0:
        return "the HA cluster runs PostgreSQL as the postgres user, which needs root"
    if _binaries() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql"
    for tool, package in (("patroni", "patroni"), ("etcd", "etcd-server")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package})"
    return None


@dataclass
class Node:
    """One PostgreSQL node and the Patroni process that manages it."""

    name: str
    pg_port: int
    api_port: int
    config: Path
    data: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def api(self) -> str:
        """The base URL of this node's Patroni REST API."""
        return f"http://127.0.0.1:{self.api_port}"

    def postmaster_pid(self) -> int | None:
        """The pid of this node's running postmaster, if it has one."""
        try:
            first = (self.data / "postmaster.pid").read_text("ascii").splitlines()[0]
        except (OSError, IndexError):
            return None
        return int(first) if first.strip().isdigit() else None


@dataclass
class HaCluster:
    """A running Patroni cluster: its URL, its members, and the failures a test inflicts."""

    folder: Path
    synchronous: bool
    nodes: list[Node] = field(default_factory=list)
    etcd: subprocess.Popen[bytes] | None = None
    etcd_port: int = 0

    def url(self, database: str = "postgres", **options: Any) -> str:
        """The multi-host URL that always reaches the current primary."""
        hosts = ",".join(f"127.0.0.1:{node.pg_port}" for node in self.nodes)
        query = "&".join(
            [
                "target_session_attrs=read-write",
                "connect_timeout=2",
                *(f"{k}={v}" for k, v in options.items()),
            ]
        )
        return f"postgresql://postgres@{hosts}/{database}?{query}"

    def node_url(self, node: Node, database: str = "postgres") -> str:
        """A URL of one node alone (for reading what that node holds)."""
        return f"postgresql://postgres@127.0.0.1:{node.pg_port}/{database}?connect_timeout=2"

    # -- members --------------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the members (``GET /cluster`` of the first node that answers)."""
        for node in self.nodes:
            try:
                with urllib.request.urlopen(f"{node.api}/cluster", timeout=2) as answer:
                    return list(json.loads(answer.read())["members"])
            except (OSError, ValueError, KeyError):
                continue
        return []

    def _by_role(self, *roles: str) -> Node | None:
        for member in self.members():
            if member.get("role") in roles and member.get("state") in {"running", "streaming"}:
                return self.node(member["name"])
        return None

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        return next(node for node in self.nodes if node.name == name)

    def leader(self) -> Node | None:
        """The node Patroni holds as leader, if one is running."""
        return self._by_role("leader", "master", "primary")

    def wait_healthy(self, timeout: float = 120.0) -> Node:
        """Wait until there is a running leader and every other node streams from it (one of
        them synchronous when the cluster is); return the leader."""
        deadline = time.monotonic() + timeout
        while True:
            members = self.members()
            roles = {m.get("role") for m in members}
            running = [m for m in members if m.get("state") in {"running", "streaming"}]
            leader = self.leader() if len(running) == len(self.nodes) else None
            timelines = {m.get("timeline") for m in running}
            if (
                leader is not None
                and len(timelines) == 1
                and (not self.synchronous or "sync_standby" in roles)
                and self._writable(leader)
            ):
                return leader
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not become healthy: {members}")
            time.sleep(0.25)

    def _writable(self, node: Node) -> bool:
        """Whether ``node`` answers and is out of recovery (a primary that takes writes)."""
        try:
            answer = subprocess.run(
                ["psql", self.node_url(node), "-Atqc", "SELECT pg_is_in_recovery()"],
                check=True,
                capture_output=True,
                text=True,
                timeout=5,
            )
        except (subprocess.SubprocessError, OSError):
            return False
        return answer.stdout.strip() == "f"

    # -- failures -------------------------------------------------------------------------

    def kill_primary(self) -> Node:
        """kill -9 the leader's postmaster (its sessions die, nothing is flushed); return it."""
        leader = self.leader()
        assert leader is not None, "no leader to kill"
        pid = leader.postmaster_pid()
        assert pid is not None, f"{leader.name} has no postmaster"
        os.kill(pid, signal.SIGKILL)
        return leader

    def kill_node(self, node: Node) -> None:
        """kill -9 the node's Patroni and then its postmaster: the machine is gone, and the
        cluster fails over only once the leader key expires."""
        if node.process is not None and node.process.poll() is None:
            os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(10)
        pid = node.postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def wait_new_leader(self, old: Node, timeout: float = 120.0) -> Node:
        """Wait until a node other than ``old`` leads and accepts writes; return it."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self.leader()
            if leader is not None and leader is not old and self._writable(leader):
                return leader
            assert time.monotonic() < deadline, f"no new leader: {self.members()}"
            time.sleep(0.25)

    def walreceivers(self, node: Node) -> list[int]:
        """The pids of the standby ``node``'s WAL receiver processes."""
        parent = node.postmaster_pid()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and b"walreceiver" in command:
                found.append(int(entry.name))
        return found

    def stop_primary(self) -> Node:
        """Stop the leader's node cleanly (its Patroni shuts PostgreSQL down and hands over)."""
        leader = self.leader()
        assert leader is not None, "no leader to stop"
        self._stop(leader)
        return leader

    def switchover(self) -> tuple[Node, Node]:
        """Ask Patroni to hand the primary to a standby; return (old leader, candidate)."""
        leader = self.leader()
        assert leader is not None, "no leader to switch over from"
        members = self.members()
        wanted = "sync_standby" if self.synchronous else "replica"
        candidate = next(m["name"] for m in members if m.get("role") == wanted)
        body = json.dumps({"leader": leader.name, "candidate": candidate}).encode()
        request = urllib.request.Request(
            f"{leader.api}/switchover",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200, answer.read()
        return leader, self.node(candidate)

    # -- processes ------------------------------------------------------------------------

    def start(self, node: Node) -> None:
        """Start (or restart) the Patroni process of ``node``."""
        log = node.log.open("ab")
        node.process = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", "patroni", str(node.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def _stop(self, node: Node, timeout: float = 60.0) -> None:
        if node.process is None or node.process.poll() is not None:
            return
        os.killpg(node.process.pid, signal.SIGTERM)
        try:
            node.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(10)

    def close(self) -> None:
        """Stop every node and etcd; kill any server left running in the folder."""
        for node in self.nodes:
            self._stop(node)
        for node in self.nodes:
            pid = node.postmaster_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()


def _node_config(cluster: HaCluster, node: Node, bin_dir: Path, scope: str) -> dict[str, Any]:
    synchronous = cluster.synchronous
    return {
        "scope": scope,
        "name": node.name,
        "restapi": {
            "listen": f"127.0.0.1:{node.api_port}",
            "connect_address": f"127.0.0.1:{node.api_port}",
        },
        "etcd3": {"hosts": f"127.0.0.1:{cluster.etcd_port}"},
        "bootstrap": {
            "dcs": {
                "ttl": 20,
                "loop_wait": 1,
                "retry_timeout": 5,
                # A crashed primary hands over at once instead of restarting in place.
                "master_start_timeout": 0,
                "synchronous_mode": synchronous,
                "postgresql": {
                    "use_pg_rewind": True,
                    "parameters": {
                        "wal_log_hints": "on",
                        "max_connections": 200,
                        "synchronous_commit": "on",
                    },
                },
            },
            "pg_hba": [
                "local all all trust",
                "host replication all 127.0.0.1/32 trust",
                "host all all 127.0.0.1/32 trust",
            ],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{node.pg_port}",
            "connect_address": f"127.0.0.1:{node.pg_port}",
            "data_dir": str(node.data),
            "bin_dir": str(bin_dir),
            "pgpass": str(cluster.folder / f"pgpass-{node.name}"),
            "authentication": {
                "replication": {"username": "postgres"},
                "superuser": {"username": "postgres"},
                "rewind": {"username": "postgres"},
            },
            "parameters": {"unix_socket_directories": str(cluster.folder), "fsync": "on"},
        },
    }


def start_cluster(folder: Path, *, synchronous: bool = True) -> HaCluster:
    """Start etcd and three Patroni nodes in ``folder`` and wait for a healthy cluster."""
    bin_dir = _binaries()
    assert bin_dir is not None
    ports = _free_ports(2 + 2 * NODES)
    cluster = HaCluster(folder=folder, synchronous=synchronous, etcd_port=ports[0])
    etcd_log = (folder / "etcd.log").open("ab")
    cluster.etcd = subprocess.Popen(
        [
            "etcd",
            "--name=e1",
            f"--data-dir={folder / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{ports[0]}",
            f"--advertise-client-urls=http://127.0.0.1:{ports[0]}",
            f"--listen-peer-urls=http://127.0.0.1:{ports[1]}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports[1]}",
            f"--initial-cluster=e1=http://127.0.0.1:{ports[1]}",
        ],
        stdout=etcd_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    etcd_log.close()
    scope = f"el{os.getpid()}x{ports[0]}"
    for index in range(NODES):
        name = f"n{index + 1}"
        node = Node(
            name=name,
            pg_port=ports[2 + 2 * index],
            api_port=ports[3 + 2 * index],
            config=folder / f"{name}.json",
            data=folder / name,
            log=folder / f"{name}.log",
        )
        cluster.nodes.append(node)
    for node in cluster.nodes:
        # Patroni reads YAML, and JSON is YAML.
        node.config.write_text(json.dumps(_node_config(cluster, node, bin_dir, scope)), "utf-8")
    shutil.chown(folder, "postgres")
    for path in folder.iterdir():
        shutil.chown(path, "postgres")
    try:
        _wait_for_etcd(cluster.etcd_port)
        for node in cluster.nodes:
            cluster.start(node)
        cluster.wait_healthy(timeout=180)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _wait_for_etcd(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise AssertionError("etcd did not start") from None
            time.sleep(0.2)


def ha_cluster(*, synchronous: bool = True) -> Iterator[HaCluster]:
    """Yield a healthy cluster in a fresh temporary folder, then stop it and delete the folder."""
    reason = missing()
    if reason is not None:
        if in_ci():
            pytest.fail(f"the failover tests must run in CI: {reason}")
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="effectledger-ha-"))
    os.chmod(folder, 0o755)
    cluster = start_cluster(folder, synchronous=synchronous)
    try:
        yield cluster
    finally:
        cluster.close()
        shutil.rmtree(folder, ignore_errors=True)
