"""Sealed is final: an event edited after the log sealed it blocks dispatch, explain and sealing.

The administrator edits sealed events and recomputes their hashes and every later link (the
forgery of :mod:`tests.races.forgery`) on a ledger with no trail key, so only the sealed leaves
can tell. The claim, ``explain`` and the sealer each compare sealed events with their leaves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger, OperationState, TamperedOperation
from effectledger.audit.bundles.export import export_log
from effectledger.audit.explain import explain_stored
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed, ChainBreak
from tests.conftest import count_rows
from tests.races.forgery import admitted, forge, receiver
from tests.races.world import AGENT, REFUND_30, approver, build, close
from tests.support.evidence import SIGNER, VERIFIER_KEY
from tests.support.evidence import verify_both_ways as verify_bundle


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger (no trail key) and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


def seal(service: EffectLedger) -> int:
    """Seal tenant acme's pending events; how many were sealed."""
    return LogSealer(service.ledger.store, SIGNER).seal("acme").sealed


def test_an_admitted_refund_edited_after_sealing_is_not_dispatched(
    service: EffectLedger, store_url: str
) -> None:
    """A sealed trail re-hashed to 500,000 refuses the claim (``sealed_event_edited``)."""
    proposal_id, operation_id = admitted(service)
    assert seal(service) == 3
    forge(service, store_url, proposal_id)
    executor = service.executor_for(next(iter(service.destinations)))
    with pytest.raises(TamperedOperation) as refused:
        executor.execute(AGENT, operation_id)
    assert refused.value.details["reason"] == "sealed_event_edited"
    assert receiver(service).counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0
    assert service.ledger.get(AGENT, operation_id).state is OperationState.READY


def test_explain_refuses_to_tell_a_story_rewritten_after_sealing(
    service: EffectLedger, store_url: str
) -> None:
    """``explain`` of a sealed operation whose events were re-hashed raises ``ChainBreak``."""
    proposal_id, operation_id = admitted(service)
    seal(service)
    assert explain_stored(service.ledger.store, "acme", operation_id)
    forge(service, store_url, proposal_id)
    with pytest.raises(ChainBreak, match="after the log sealed it"):
        explain_stored(service.ledger.store, "acme", operation_id)


def test_the_sealer_stops_at_an_event_that_follows_an_edited_sealed_one(
    service: EffectLedger, store_url: str
) -> None:
    """An admission chained after re-hashed sealed events stops the sealer; nothing is signed."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert seal(service) == 2
    forge(service, store_url, proposal.proposal_id)
    service.authority.admit(AGENT, proposal.proposal_id, approval_id=approval.approval_id)
    checkpoints = count_rows(store_url, "log_checkpoints")
    with pytest.raises(AuditVerificationFailed, match="changed after the log sealed it") as stop:
        seal(service)
    assert stop.value.details["reason"] == "event_edited"
    assert count_rows(store_url, "log_checkpoints") == checkpoints
    assert count_rows(store_url, "log_entries") == 2


def test_genuine_work_seals_exports_and_verifies(
    service: EffectLedger, store_url: str, tmp_path: Path
) -> None:
    """The positive control: a performed refund seals, dispatches, seals again and verifies."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    assert seal(service) == 2
    done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.SUCCEEDED
    assert seal(service) == 3
    assert done.operation_id is not None
    assert explain_stored(service.ledger.store, "acme", done.operation_id)
    bundle = tmp_path / "acme.jsonl"
    export_log(service.ledger.store, "acme", bundle)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok
    assert receiver(service).counts().effects == 1
