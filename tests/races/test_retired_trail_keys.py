"""A retired trail key verifies what it tagged before its retirement and authorizes nothing newer.

The rotation the docs describe keeps the old key in the key file, retired: operations admitted
before it still dispatch. Someone who holds that old key and has write access to the database
(the key leaked, or a backup of the key directory) runs the ledger's own code with it after the
retirement: an approved refund re-hashed to 500,000 and every event tagged with the old key.
A ledger that still treats the old key as active dispatches it (the control proves the forgery
is complete); with the key retired the claim refuses it and the receiver's own record shows
nothing. ``audit retag`` then vouches for the trails in flight under the new key, after which the
old key can be destroyed and those operations still dispatch, and recover.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from effectledger import EffectLedger, ManualClock, OperationState, TamperedOperation
from effectledger.events.authentication import TrailKey, TrailKeys
from effectledger.ledger.retagging import retag_trails, trails_needing_retag
from effectledger.model.operations import to_micros
from effectledger.store.hashes import unpack_hash
from tests.conftest import count_rows, run_sql
from tests.faults._harness import spawn_all
from tests.races.forgery import FORGED_AMOUNT, admitted, forge, receiver
from tests.races.test_authority_races import PROCESSES, THREADS, race
from tests.races.world import AGENT, START, build, close

# Fixed secrets: a spawned process rebuilds the same keys.
OLD = TrailKey("trail-1", bytes(range(32)))
NEW = TrailKey("trail-2", bytes(range(32, 64)))
RETIRED_AT = START + timedelta(minutes=5)
RETIRED = OLD.retire(to_micros(RETIRED_AT))
AFTER = START + timedelta(minutes=10)  # within a proposal's 15 minutes


def _service(store_url: str, directory: Path, keys: TrailKeys, at: Any = START) -> EffectLedger:
    return build(store_url, directory, trail_keys=keys, clock=ManualClock(at))


def _retag_with(service: EffectLedger, store_url: str, operation_id: str, key: TrailKey) -> None:
    """What the holder of ``key`` does after re-hashing a trail (:func:`forge`, which dropped
    the update trigger): tag each event again."""
    for event_id, event_hash in run_sql(
        store_url,
        "SELECT event_id, event_hash FROM audit_events WHERE operation_id = ?",
        (operation_id,),
    ):
        text = unpack_hash(bytes(event_hash)) if not isinstance(event_hash, str) else event_hash
        run_sql(
            store_url,
            "UPDATE audit_events SET trail_tag = ? WHERE event_id = ?",
            (key.tag(text), event_id),
        )


def _forged_after_retirement(store_url: str, directory: Path) -> str:
    """The holder of the old key makes a new refund after its retirement, re-hashed to 500,000
    and tagged with the old key throughout; the operation id."""
    attacker = _service(store_url, directory, TrailKeys(OLD), AFTER)
    try:
        proposal_id, operation_id = admitted(attacker)
        forge(attacker, store_url, proposal_id)
        _retag_with(attacker, store_url, operation_id, OLD)
    finally:
        close(attacker)
    return operation_id


def _trail_retagged(store_url: str, operation_id: str | None = None) -> int:
    sql = "SELECT count(*) FROM audit_events WHERE event_type = 'TrailRetagged'"
    if operation_id is None:
        return int(run_sql(store_url, sql)[0][0])
    return int(run_sql(store_url, sql + " AND operation_id = ?", (operation_id,))[0][0])


def test_a_forgery_tagged_by_a_key_still_active_is_dispatched(
    store_url: str, tmp_path: Path
) -> None:
    """The control: with the old key kept active (not retired) the forgery sends 500,000."""
    operation_id = _forged_after_retirement(store_url, tmp_path)
    lax = _service(store_url, tmp_path, TrailKeys(NEW, retired=[OLD]), AFTER)
    try:
        done = lax.executor_for(next(iter(lax.destinations))).execute(AGENT, operation_id)
        assert done.state is OperationState.SUCCEEDED
        (key,) = run_sql(
            store_url,
            "SELECT idempotency_key FROM operations WHERE operation_id = ?",
            (operation_id,),
        )
        effect = receiver(lax).effect(str(key[0]))
        assert effect is not None
        assert effect.amount == FORGED_AMOUNT
    finally:
        close(lax)


def test_a_trail_made_with_a_retired_key_after_its_retirement_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    """Attack 3: the old key's new forged trail is tampered_operation; no attempt, no effect."""
    operation_id = _forged_after_retirement(store_url, tmp_path)
    rotated = _service(store_url, tmp_path, TrailKeys(NEW, retired=[RETIRED]), AFTER)
    try:
        executor = rotated.executor_for(next(iter(rotated.destinations)))
        with pytest.raises(TamperedOperation, match="retired_key") as refused:
            executor.execute(AGENT, operation_id)
        assert refused.value.code == "tampered_operation"
        assert refused.value.details["reason"] == "trail_not_authentic"
        assert "retired before it was recorded" in refused.value.message
        assert receiver(rotated).counts().submissions == 0
        assert receiver(rotated).counts().effects == 0
        assert count_rows(store_url, "attempts") == 0
        assert rotated.ledger.get(AGENT, operation_id).state is OperationState.READY
        # Nor does a re-tag vouch for it: it is refused with the same reason, nothing appended.
        report = retag_trails(rotated.ledger)
        assert report.refused == (("acme", operation_id, "retired_key"),)
        assert _trail_retagged(store_url) == 0
    finally:
        close(rotated)


def test_an_operation_admitted_before_the_rotation_still_dispatches(
    store_url: str, tmp_path: Path
) -> None:
    """In flight under the old key, admitted before its retirement: performed once."""
    before = _service(store_url, tmp_path, TrailKeys(OLD))
    _, operation_id = admitted(before)
    close(before)
    rotated = _service(store_url, tmp_path, TrailKeys(NEW, retired=[RETIRED]), AFTER)
    try:
        done = rotated.executor_for(next(iter(rotated.destinations))).execute(AGENT, operation_id)
        assert done.state is OperationState.SUCCEEDED
        assert receiver(rotated).counts().effects == 1
        (tag,) = run_sql(
            store_url,
            "SELECT trail_tag FROM audit_events WHERE operation_id = ? "
            "ORDER BY sequence DESC LIMIT 1",
            (operation_id,),
        )
        assert str(tag[0]).startswith("t1:trail-2:")  # only the current key tags
    finally:
        close(rotated)


def test_after_a_retag_the_old_key_is_destroyed_and_operations_in_flight_still_dispatch(
    store_url: str, tmp_path: Path
) -> None:
    """Re-tagged, then opened without the old key: each operation in flight sends once."""
    before = _service(store_url, tmp_path, TrailKeys(OLD))
    operations = [admitted(before)[1] for _ in range(3)]
    close(before)
    rotated = _service(store_url, tmp_path, TrailKeys(NEW, retired=[RETIRED]), AFTER)
    try:
        assert trails_needing_retag(rotated.ledger) == 3
        progress: list[tuple[int, int]] = []
        report = retag_trails(
            rotated.ledger, progress=lambda done, total: progress.append((done, total))
        )
        assert sorted(op for _, op in report.retagged) == sorted(operations)
        assert report.ok
        assert progress[-1] == (3, 3)
        again = retag_trails(rotated.ledger)
        assert (again.retagged, again.current) == ((), 3)
        assert trails_needing_retag(rotated.ledger) == 0
    finally:
        close(rotated)
    for operation_id in operations:
        assert _trail_retagged(store_url, operation_id) == 1
    destroyed = _service(store_url, tmp_path, TrailKeys(NEW), AFTER)
    try:
        executor = destroyed.executor_for(next(iter(destroyed.destinations)))
        for operation_id in operations:
            assert executor.execute(AGENT, operation_id).state is OperationState.SUCCEEDED
        assert receiver(destroyed).counts().effects == 3
        for (key,) in run_sql(store_url, "SELECT idempotency_key FROM operations"):
            assert receiver(destroyed).effect(str(key)) is not None
    finally:
        close(destroyed)


def test_without_a_retag_the_destroyed_key_strands_operations_in_flight(
    store_url: str, tmp_path: Path
) -> None:
    """The control: the old key dropped with no re-tag, the claim is refused and nothing sent."""
    before = _service(store_url, tmp_path, TrailKeys(OLD))
    _, operation_id = admitted(before)
    close(before)
    destroyed = _service(store_url, tmp_path, TrailKeys(NEW), AFTER)
    try:
        with pytest.raises(TamperedOperation, match="unknown_key"):
            destroyed.executor_for(next(iter(destroyed.destinations))).execute(AGENT, operation_id)
        assert receiver(destroyed).counts().submissions == 0
        assert count_rows(store_url, "attempts") == 0
    finally:
        close(destroyed)


def test_a_forged_event_after_a_genuine_retag_is_still_refused(
    store_url: str, tmp_path: Path
) -> None:
    """A re-tag vouches only for what precedes it: a trail re-hashed after it is refused."""
    before = _service(store_url, tmp_path, TrailKeys(OLD))
    proposal_id, operation_id = admitted(before)
    close(before)
    rotated = _service(store_url, tmp_path, TrailKeys(NEW, retired=[RETIRED]), AFTER)
    try:
        assert len(retag_trails(rotated.ledger).retagged) == 1
        forge(rotated, store_url, proposal_id)  # re-hashes every event, the re-tag included
        with pytest.raises(TamperedOperation, match="tag_invalid"):
            rotated.executor_for(next(iter(rotated.destinations))).execute(AGENT, operation_id)
        assert receiver(rotated).counts().effects == 0
        assert count_rows(store_url, "attempts") == 0
    finally:
        close(rotated)


def _retag_in_process(
    store_url: str, directory: str, barrier: Any, results: Any, worker: int
) -> None:
    """Spawned: run a whole re-tag after the barrier."""
    service = _service(store_url, Path(directory), TrailKeys(NEW, retired=[RETIRED]), AFTER)
    barrier.wait()
    report = retag_trails(service.ledger)
    close(service)
    results.put(
        {"worker": worker, "retagged": len(report.retagged), "refused": len(report.refused)}
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_racing_retags_retag_each_trail_once(mode: str, store_url: str, tmp_path: Path) -> None:
    """16 threads or 4 processes re-tagging at once append one TrailRetagged per trail."""
    before = _service(store_url, tmp_path, TrailKeys(OLD))
    operations = [admitted(before)[1] for _ in range(6)]
    close(before)
    if mode == "threads":
        rotated = _service(store_url, tmp_path, TrailKeys(NEW, retired=[RETIRED]), AFTER)
        try:
            reports = race(THREADS, lambda _: retag_trails(rotated.ledger))
        finally:
            close(rotated)
        retagged = sum(len(report.retagged) for report in reports)
        assert not any(report.refused for report in reports)
    else:
        done = spawn_all(_retag_in_process, [(store_url, str(tmp_path)) for _ in range(PROCESSES)])
        retagged = sum(report["retagged"] for report in done)
        assert sum(report["refused"] for report in done) == 0
    assert retagged == len(operations)
    assert _trail_retagged(store_url) == len(operations)
    for operation_id in operations:
        assert _trail_retagged(store_url, operation_id) == 1
    destroyed = _service(store_url, tmp_path, TrailKeys(NEW), AFTER)
    try:
        executor = destroyed.executor_for(next(iter(destroyed.destinations)))
        for operation_id in operations:
            assert executor.execute(AGENT, operation_id).state is OperationState.SUCCEEDED
        assert receiver(destroyed).counts().effects == len(operations)
    finally:
        close(destroyed)
