"""What an asynchronous failover does to the ledger, shown rather than hoped away.

With asynchronous replication the primary acknowledges a COMMIT before any standby has it.
The test makes that window certain: it freezes the standbys' WAL receivers, performs a refund
(the claim, the receiver's effect and the recorded success all acknowledged by the primary
alone), seals it, and then the primary's machine dies and the frozen WAL never arrives. The
promoted standby holds the operation as READY: the claim the ledger acknowledged is gone. The
worker sends it again **under the same idempotency key**, so the receiver's own deduplication
keeps one effect; and the sealer's memory, kept outside the database, refuses the log that went
backwards with a message that names a failover. ``effectledger status`` warned beforehand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from effectledger import LedgerSettings, OperationState
from effectledger.audit.sealing.memory import SealerMemory
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.clock import SystemClock
from effectledger.errors import AuditVerificationFailed
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.faults._patroni import HaCluster, Node, ha_cluster
from tests.support.evidence import SIGNER
from tests.worker.support import refunds

# One worker runs the clusters one at a time (pytest -n auto --dist loadgroup): two Patroni
# clusters or restarts at once on a 2-core machine would turn their deadlines into races.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres-clusters")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[HaCluster]:
    """Three PostgreSQL nodes under Patroni, replicating asynchronously."""
    yield from ha_cluster(synchronous=False)


def _status_stderr(url: str) -> str:
    """What ``effectledger status`` prints on standard error for this ledger."""
    done = subprocess.run(
        [sys.executable, "-m", "effectledger", "status", "--db", url, "--tenant", "acme"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr


def _replayed_everywhere(cluster: HaCluster, leader: Node, timeout: float = 180.0) -> None:
    """Wait until every standby has replayed all the primary has written so far.

    A node that an earlier test of the module killed may still be rejoining (Patroni rewinds it
    and it catches up before it streams again): on a loaded machine that has taken over a
    minute, so the wait is generous; it returns as soon as both standbys have replayed."""
    with psycopg.connect(cluster.node_url(leader), autocommit=True) as connection:
        target = connection.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert target is not None
        deadline = time.monotonic() + timeout
        while True:
            row = connection.execute(
                "SELECT count(*) FILTER (WHERE replay_lsn >= %s), count(*) "
                "FROM pg_stat_replication",
                (target[0],),
            ).fetchone()
            assert row is not None
            if row[1] == len(cluster.nodes) - 1 and row[0] == row[1]:
                return
            assert time.monotonic() < deadline, row
            time.sleep(0.1)


def test_a_claim_lost_in_an_asynchronous_failover_is_sent_again_under_its_own_key(
    cluster: HaCluster, tmp_path: Path
) -> None:
    """A refund whose claim and success the old primary alone acknowledged is READY on the new
    primary, is re-sent under the same idempotency key (the receiver counts two submissions and
    one effect), and the sealer's memory refuses the rolled-back log, naming a failover."""
    url = cluster.url(schema=f"fa_{uuid.uuid4().hex[:10]}")
    world = refunds(
        url, tmp_path, clock=SystemClock(), settings=LedgerSettings(recover_after=timedelta(0))
    )
    memory = SealerMemory(tmp_path / "sealer.memory")
    sealer = LogSealer(world.app.store, SIGNER, clock=SystemClock(), memory=memory)
    leader = cluster.leader()
    assert leader is not None
    _replayed_everywhere(cluster, leader)  # both standbys stream before the operator asks
    assert "asynchronously" in _status_stderr(url)  # the operator was told beforehand

    proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
    approval = world.app.approve(REVIEWER, proposal)
    admitted = world.app.authority.admit(
        AGENT, proposal.proposal_id, approval_id=approval.approval_id
    )
    key = admitted.idempotency_key
    sealer.seal("acme")
    assert cluster.leader() is leader
    _replayed_everywhere(cluster, leader)  # the admission and its seal reached every standby

    standbys = [node for node in cluster.nodes if node is not leader]
    frozen = [pid for node in standbys for pid in cluster.walreceivers(node)]
    assert len(frozen) == len(standbys)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)  # the standbys stop taking WAL: async COMMITs still return
    try:
        done = world.app.dispatch(AGENT, admitted.operation_id)
        assert done.state is OperationState.SUCCEEDED  # acknowledged, by the primary alone
        assert sealer.seal("acme").sealed > 0  # and sealed: the memory remembers that tree
        cluster.kill_node(leader)  # the machine dies with writes no standby received
    finally:
        for pid in frozen:  # the frozen receivers die too: what their sockets held is gone
            os.kill(pid, signal.SIGKILL)
    assert world.receiver.effects_for(key) == 1

    cluster.wait_new_leader(leader)
    lost = world.app.operation(REVIEWER, admitted.operation_id)
    assert lost.state is OperationState.READY  # the acknowledged claim is gone
    assert lost.idempotency_key == key

    world.app.dispatch_ready()
    again = world.app.operation(REVIEWER, admitted.operation_id)
    assert again.state is OperationState.SUCCEEDED
    counts = world.receiver.counts()
    assert world.receiver.effects_for(key) == 1  # the destination's deduplication held
    assert (counts.submissions, counts.effects) == (2, 1)

    with pytest.raises(AuditVerificationFailed) as refused:
        sealer.seal("acme")
    assert refused.value.details["reason"] == "log_rolled_back"
    assert "failover" in str(refused.value)
    world.close()
