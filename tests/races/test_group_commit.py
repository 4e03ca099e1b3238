"""Performs racing with group commit on: 16 threads and 4 processes, on both backends.

The callers mix what a batch must keep apart: admissions that pass, admissions a capacity limit
refuses once it is full, repeats of one proposal, and callers another actor's proposal is
refused to. Each write is rolled back to its own savepoint when it fails, so afterwards the rows
(operations, attempts, audit events, approval consumptions, capacity totals) and the receiver's
own count of effects are exactly those of the admitted refunds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.authority.capacity import totals_mismatches_in
from effectledger.events.chain import verify_chain
from effectledger.store.batching import BATCH_LIMIT
from tests.conftest import count_rows
from tests.faults.test_group_commit_crash import grouped
from tests.races.test_authority_races import (
    THREADS,
    effects,
    proposals,
    race,
    spawn_performs,
)
from tests.races.world import AGENT, MALLORY, build, close

LIMIT = 150  # five refunds of 30
DISTINCT = 12


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service with group commit on, its pool limited to :data:`LIMIT`."""
    made = build(grouped(store_url), tmp_path)
    made.authority.set_capacity_limit("acme", "refunds", LIMIT)
    yield made
    close(made)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_grouped_performs_admit_to_the_limit_and_keep_every_row_and_effect_exact(
    mode: str, service: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """16 grouped performs (12 proposals, 2 repeats, 2 by another actor) admit exactly five,
    and rows, totals and the receiver's effects are those five refunds' and nothing more."""
    url = grouped(store_url)
    made = proposals(service, DISTINCT, approve=True)
    calls = [(AGENT.actor_id, p, a) for p, a in made]
    calls += [(AGENT.actor_id, *made[0]), (AGENT.actor_id, *made[1])]
    calls += [(MALLORY.actor_id, *made[2]), (MALLORY.actor_id, *made[3])]
    assert len(calls) == THREADS
    events_before = count_rows(url, "audit_events")
    if mode == "threads":
        contexts = {AGENT.actor_id: AGENT, MALLORY.actor_id: MALLORY}
        results = race(
            THREADS,
            lambda i: service.perform(contexts[calls[i][0]], calls[i][1], approval=calls[i][2]),
        )
        outcomes = [(r.outcome, r.reason) for r in results]
        group = service.ledger.store._group  # type: ignore[attr-defined]
        assert group.batches >= 1  # the race went through shared commits
        assert group.grouped <= group.batches * BATCH_LIMIT
    else:
        outcomes = [(o, r) for o, r, _ in spawn_performs(url, tmp_path, "approval", calls)]
    counted = Counter(outcomes)
    assert counted[("performed", None)] == LIMIT // 30
    assert counted[("denied", "actor_mismatch")] == 2
    assert counted[("replayed", None)] + counted[("denied", "capacity_exceeded")] == 9
    assert counted[("replayed", None)] <= 2
    admitted = LIMIT // 30
    assert count_rows(url, "operations") == admitted
    assert count_rows(url, "operations", "state = 'SUCCEEDED'") == admitted
    assert count_rows(url, "attempts") == admitted
    assert count_rows(url, "approval_consumptions") == admitted
    denied = sum(n for (outcome, _), n in counted.items() if outcome == "denied")
    # Admitted, prepared, confirmed: three events per refund; one AdmissionDenied per denial
    # (a denied write re-run alone after its batch is recorded once); nothing else.
    assert count_rows(url, "audit_events") - events_before == 3 * admitted + denied
    assert count_rows(url, "audit_events", "event_type = 'AdmissionDenied'") == denied
    usage = service.authority.capacity(AGENT, "refunds")
    assert (usage.held, usage.committed) == (0, LIMIT)
    assert service.ledger.store.read(totals_mismatches_in) == []
    assert effects(tmp_path) == admitted
    for proposal_id, _ in made:
        operation_id = service.proposal(AGENT, proposal_id).operation_id
        if count_rows(url, "operations", f"operation_id = '{operation_id}'"):
            verify_chain(service.ledger.events(AGENT, operation_id))


def test_a_grouped_store_answers_a_lone_write_alone(store_url: str, tmp_path: Path) -> None:
    """With nobody else writing, a grouped store's write commits alone: no batch is counted."""
    service = build(grouped(store_url), tmp_path)
    try:
        made = proposals(service, 2, approve=True)
        for proposal_id, approval_id in made:
            assert service.perform(AGENT, proposal_id, approval=approval_id).outcome == "performed"
        group = service.ledger.store._group  # type: ignore[attr-defined]
        assert (group.batches, group.grouped) == (0, 0)
    finally:
        close(service)
    assert count_rows(grouped(store_url), "operations", "state = 'SUCCEEDED'") == 2
    assert effects(tmp_path) == 2
