"""A database administrator without the trail key cannot make a forged trail dispatch.

The administrator has full write access: they drop the protective triggers, change an approved
refund of 30 to 500,000 in the proposal, the approval's digest, the command and the three trail
events, and recompute every digest, fingerprint and hash in the order the ledger would. Without a
trail key that forgery is indistinguishable from genuine work (the control below proves the
forgery is complete); with one, the claim refuses it (``trail_not_authentic``) and the receiver's
own record shows no effect.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger, OperationState, TamperedOperation
from effectledger.events.authentication import TrailKey, TrailKeys, new_trail_key
from effectledger.store.hashes import unpack_hash
from tests.conftest import count_rows, drop_trigger, run_sql
from tests.races.forgery import FORGED_AMOUNT, admitted, forge, receiver
from tests.races.world import AGENT, REFUND_30, approver, build, close

KEY = TrailKey.from_key_string(new_trail_key("trail-1"))


def _service(store_url: str, directory: Path, keys: TrailKeys | None) -> Iterator[EffectLedger]:
    made = build(store_url, directory, trail_keys=keys)
    yield made
    close(made)


@pytest.fixture
def keyed(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service whose ledger holds a trail key."""
    yield from _service(store_url, tmp_path, TrailKeys(KEY))


@pytest.fixture
def keyless(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service whose ledger holds no trail key (as every ledger did before)."""
    yield from _service(store_url, tmp_path, None)


def test_without_a_trail_key_the_complete_forgery_is_dispatched(
    keyless: EffectLedger, store_url: str
) -> None:
    """A keyless ledger cannot tell the forgery from genuine work: the receiver gets 500,000."""
    proposal_id, operation_id = admitted(keyless)
    forge(keyless, store_url, proposal_id)
    done = keyless.executor_for(next(iter(keyless.destinations))).execute(AGENT, operation_id)
    assert done.state is OperationState.SUCCEEDED
    (operation,) = run_sql(
        store_url, "SELECT idempotency_key FROM operations WHERE operation_id = ?", (operation_id,)
    )
    effect = receiver(keyless).effect(str(operation[0]))
    assert effect is not None
    assert effect.amount == FORGED_AMOUNT


def test_with_a_trail_key_the_forgery_is_refused_and_nothing_is_sent(
    keyed: EffectLedger, store_url: str
) -> None:
    """The same forgery on a keyed ledger is ``tampered_operation``: no attempt, no effect."""
    proposal_id, operation_id = admitted(keyed)
    forge(keyed, store_url, proposal_id)
    executor = keyed.executor_for(next(iter(keyed.destinations)))
    with pytest.raises(TamperedOperation) as refused:
        executor.execute(AGENT, operation_id)
    assert refused.value.details["reason"] == "trail_not_authentic"
    assert refused.value.code == "tampered_operation"
    assert receiver(keyed).counts().submissions == 0
    assert receiver(keyed).counts().effects == 0
    assert count_rows(store_url, "attempts") == 0
    assert keyed.ledger.get(AGENT, operation_id).state is OperationState.READY


def test_a_forged_proposal_performed_from_scratch_is_refused(
    keyed: EffectLedger, store_url: str
) -> None:
    """Forged before admission, the approved proposal's perform is refused: no effect."""
    proposal = keyed.propose(AGENT, "refund_order", REFUND_30)
    approval = keyed.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    forge(keyed, store_url, proposal.proposal_id)
    with pytest.raises(TamperedOperation) as refused:
        keyed.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert refused.value.details["reason"] == "trail_not_authentic"
    assert receiver(keyed).counts().effects == 0


def test_tags_stripped_or_moved_by_the_administrator_are_refused(
    keyed: EffectLedger, store_url: str
) -> None:
    """Emptying a tag, or copying another event's genuine tag onto it, refuses the claim."""
    drop_trigger(store_url, "audit_events", "audit_events_no_update")
    _, first = admitted(keyed)
    _, second = admitted(keyed)
    run_sql(
        store_url,
        "UPDATE audit_events SET trail_tag = NULL WHERE operation_id = ? AND sequence = 2",
        (first,),
    )
    (donor,) = run_sql(
        store_url,
        "SELECT trail_tag FROM audit_events WHERE operation_id = ? AND sequence = 1",
        (first,),
    )
    run_sql(
        store_url,
        "UPDATE audit_events SET trail_tag = ? WHERE operation_id = ? AND sequence = 1",
        (donor[0], second),
    )
    executor = keyed.executor_for(next(iter(keyed.destinations)))
    for operation_id, problem in ((first, "untagged"), (second, "tag_invalid")):
        with pytest.raises(TamperedOperation, match=problem) as refused:
            executor.execute(AGENT, operation_id)
        assert refused.value.details["reason"] == "trail_not_authentic"
    assert receiver(keyed).counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0


def test_genuine_work_with_a_trail_key_is_performed_and_every_event_is_tagged(
    keyed: EffectLedger, store_url: str
) -> None:
    """The positive control: a keyed ledger performs a genuine refund, every event tagged."""
    proposal = keyed.propose(AGENT, "refund_order", REFUND_30)
    approval = keyed.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    done = keyed.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.SUCCEEDED
    assert receiver(keyed).counts().effects == 1
    tags = run_sql(store_url, "SELECT event_hash, trail_tag FROM audit_events")
    assert len(tags) >= 4
    keys = TrailKeys(KEY)
    # The column holds the hash's bytes (migration 15): the tag is over its string.
    assert all(
        keys.problem(unpack_hash(bytes(event_hash)), str(tag)) is None  # type: ignore[arg-type]
        for event_hash, tag in tags
    )


def test_the_trail_secret_never_reaches_the_database(keyed: EffectLedger, store_url: str) -> None:
    """No stored text holds the trail key's secret, in base64 or in hex."""
    proposal = keyed.propose(AGENT, "refund_order", REFUND_30)
    approval = keyed.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    keyed.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    secret_forms = (KEY.key_string().split("+", 2)[2], KEY.secret.hex())
    for table in ("audit_events", "operations", "proposals", "approvals", "attempts"):
        for row in run_sql(store_url, f"SELECT * FROM {table}"):
            text = " ".join(str(value) for value in row)
            assert not any(form in text for form in secret_forms), table


def test_a_rotated_key_still_vouches_for_what_it_tagged(store_url: str, tmp_path: Path) -> None:
    """Events tagged by a retired key pass; a ledger that no longer knows that key refuses them."""
    old = TrailKey.from_key_string(new_trail_key("trail-old"))
    new = TrailKey.from_key_string(new_trail_key("trail-new"))
    before = build(store_url, tmp_path, trail_keys=TrailKeys(old))
    _, operation_id = admitted(before)
    _, other_id = admitted(before)
    close(before)
    forgetful = build(store_url, tmp_path, trail_keys=TrailKeys(new))
    with pytest.raises(TamperedOperation, match="unknown_key"):
        forgetful.executor_for(next(iter(forgetful.destinations))).execute(AGENT, other_id)
    close(forgetful)
    rotated = build(store_url, tmp_path, trail_keys=TrailKeys(new, retired=[old]))
    try:
        done = rotated.executor_for(next(iter(rotated.destinations))).execute(AGENT, operation_id)
        assert done.state is OperationState.SUCCEEDED
        (tag,) = run_sql(
            store_url,
            "SELECT trail_tag FROM audit_events WHERE operation_id = ? "
            "ORDER BY sequence DESC LIMIT 1",
            (operation_id,),
        )
        assert str(tag[0]).startswith("t1:trail-new:")
        assert receiver(rotated).counts().effects == 1
    finally:
        close(rotated)


def test_untagged_trails_of_a_ledger_that_had_no_key_are_refused_unless_accepted(
    store_url: str, tmp_path: Path
) -> None:
    """Operations admitted before the key are untagged: refused, or drained with accept_untagged."""
    before = build(store_url, tmp_path)
    _, refused_id = admitted(before)
    _, drained_id = admitted(before)
    close(before)
    strict = build(store_url, tmp_path, trail_keys=TrailKeys(KEY))
    with pytest.raises(TamperedOperation, match="untagged"):
        strict.executor_for(next(iter(strict.destinations))).execute(AGENT, refused_id)
    close(strict)
    draining = build(store_url, tmp_path, trail_keys=TrailKeys(KEY, accept_untagged=True))
    try:
        done = draining.executor_for(next(iter(draining.destinations))).execute(AGENT, drained_id)
        assert done.state is OperationState.SUCCEEDED
        assert receiver(draining).counts().effects == 1
    finally:
        close(draining)
