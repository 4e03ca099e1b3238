"""The ledger through real failovers: PostgreSQL under Patroni, the primary killed mid-refund.

Four processes of four threads each propose, approve and perform refunds through the
cluster's multi-host URL (two of the processes with ``group_commit=on``), while the test kills
the primary's postmaster with SIGKILL at random moments, stops the primary's node cleanly and
asks Patroni for switchovers. After the run, the surviving cluster's rows and the receiver's own
records are the facts: every refund answered ``performed`` or ``replayed`` is SUCCEEDED, the
receiver made exactly one effect for each operation that has one and none for the others, every
operation ends final (settled, where its reply was lost, by the recovery worker's lookup, never
by a resend), every trail is whole, and the log sealed across the failovers verifies.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import LedgerSettings, OperationState
from effectledger.audit.bundles.export import export_log
from effectledger.audit.log.origins import origin_for
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.clock import SystemClock
from tests.faults._disk import check_consistent
from tests.faults._patroni import HaCluster, ha_cluster
from tests.faults.failover_load import Load, every_operation, inflict, seal_loop, settle
from tests.support.evidence import SIGNER, VERIFIER_KEY, verify_both_ways
from tests.worker.support import refunds

# One worker runs the clusters one at a time (pytest -n auto --dist loadgroup): two Patroni
# clusters or restarts at once on a 2-core machine would turn their deadlines into races.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres-clusters")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[HaCluster]:
    """Three PostgreSQL nodes under Patroni in synchronous mode, shared by this module."""
    yield from ha_cluster(synchronous=True)


def test_killed_primaries_lose_no_acknowledged_refund_and_send_none_twice(
    cluster: HaCluster, tmp_path: Path
) -> None:
    """Ten SIGKILLs of the primary, a clean stop and two switchovers under 4 x 4 performers
    (half with group commit): every acknowledged refund is SUCCEEDED on the survivor, the
    receiver holds one effect per operation with an effect and none for the rest, every
    operation ends final, every trail is whole and the log verifies."""
    url = cluster.url(schema=f"fo_{uuid.uuid4().hex[:10]}")
    world = refunds(
        url, tmp_path, clock=SystemClock(), settings=LedgerSettings(recover_after=timedelta(0))
    )
    load = Load(tmp_path)
    done = threading.Event()
    sealed: list[int] = []
    sealer = threading.Thread(target=seal_loop, args=(url, done, sealed))
    try:
        # Each thread rests 0.2 s after a refund, leaving CPU to the tests that run beside this
        # one (alone on 2 cores: 63 % of them busy rather than 75 %, and thousands of refunds
        # still cross the failures). benchmarks/failover.py rests not at all.
        load.start(
            [url, url, f"{url}&group_commit=on", f"{url}&group_commit=on"], threads=4, pause=0.2
        )
        sealer.start()
        time.sleep(3)  # the load runs before the first failure
        inflicted = inflict(cluster, kills=10, switchovers=2, stops=1)
        time.sleep(2)
    finally:
        load.stop()
        done.set()
        sealer.join(60)
    assert [i.action for i in inflicted].count("kill") == 10

    states = settle(world, url)
    performed = load.performed()
    assert len(performed) > 50, len(performed)
    # The failures met the load: a call was refused, or one was in flight across a failure's
    # start (a call the store carried through a failover met it as much as a refused one).
    spanned = [a for a in performed if any(a["began"] <= f.at <= a["t"] for f in inflicted)]
    assert load.errors() or spanned, "no call met a failover"
    for answer in performed:  # acknowledged means durable on the survivor
        if answer["state"] == "SUCCEEDED":
            assert states[answer["operation"]] is OperationState.SUCCEEDED, answer

    counts = world.receiver.counts()
    assert counts.submissions == counts.effects  # nothing was ever sent a second time
    for operation_id, state, key in every_operation(url):
        effects = world.receiver.effects_for(key)
        assert effects == (1 if state is OperationState.SUCCEEDED else 0), (operation_id, state)
    assert counts.effects == sum(s is OperationState.SUCCEEDED for s in states.values())
    check_consistent(world.app, url)

    LogSealer(world.app.store, SIGNER, clock=SystemClock()).seal("acme")
    bundle = tmp_path / "bundle.jsonl"
    export_log(world.app.store, "acme", bundle, clock=SystemClock())
    report = verify_both_ways(bundle, [VERIFIER_KEY], origin=origin_for("acme"))
    assert report.ok, report.findings
    assert sum(sealed) > 0  # sealing went on during the run
    world.close()
