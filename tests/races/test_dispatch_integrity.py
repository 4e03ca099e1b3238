"""The rows are a cache of the chain: database edits that bypassed the ledger block dispatch.

A hostile database administrator edits rows outside the audit events; before anything leaves the
process the executor checks the operation against its hash-chained trail and its authority, and
refuses with ``tampered_operation``. Each test checks the receiver's own count of submissions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger, OperationState, SimulatedReceiver, TamperedOperation
from effectledger.model.canonical import COMMAND_VERSION, canonical_bytes, digest_bytes
from effectledger.model.operations import to_micros
from effectledger.workers import Executor
from tests.conftest import RAW_REFUSED, count_rows, drop_trigger, raw_sql
from tests.races.world import AGENT, REFUND_30, START, approver, build, close


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


def receiver(service: EffectLedger) -> SimulatedReceiver:
    (destination,) = service.destinations.values()
    assert isinstance(destination, SimulatedReceiver)
    return destination


def admitted(service: EffectLedger) -> tuple[str, str, str]:
    """An approved proposal admitted but not yet dispatched: (proposal, approval, operation)."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    operation = service.authority.admit(
        AGENT, proposal.proposal_id, approval_id=approval.approval_id
    )
    assert operation.state is OperationState.READY
    return proposal.proposal_id, approval.approval_id, operation.operation_id


def assert_refused(service: EffectLedger, operation_id: str, reason: str) -> None:
    executor = service.executor_for(next(iter(service.destinations)))
    with pytest.raises(TamperedOperation) as refused:
        executor.execute(AGENT, operation_id)
    assert refused.value.details["reason"] == reason
    assert refused.value.code == "tampered_operation"


def test_a_rewritten_command_and_fingerprint_are_not_sent(
    service: EffectLedger, store_url: str
) -> None:
    """A READY refund of 30 rewritten to 5000 (with a matching fingerprint) is never sent."""
    _, _, operation_id = admitted(service)
    (row,) = raw_sql(
        store_url, f"SELECT command_json FROM operations WHERE operation_id = '{operation_id}'"
    )
    command = json.loads(str(row[0]))
    command["arguments"]["amount_minor"] = 5000
    forged = canonical_bytes(command, version=COMMAND_VERSION)
    fingerprint = digest_bytes("command", forged, version=COMMAND_VERSION)
    raw_sql(
        store_url,
        f"UPDATE operations SET command_json = '{forged.decode()}', "
        f"fingerprint = '{fingerprint}' WHERE operation_id = '{operation_id}'",
    )
    assert_refused(service, operation_id, "command_not_admitted")
    assert receiver(service).counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0
    assert service.ledger.get(AGENT, operation_id).state is OperationState.READY


def test_an_approval_inserted_without_its_event_is_refused_and_never_sent(
    service: EffectLedger, store_url: str
) -> None:
    """The database refuses an approval row with no event; inserted past that, it admits nothing."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    at = to_micros(START)
    forged = (
        f"INSERT INTO approvals VALUES ('acme', 'appr-forged', '{proposal.proposal_id}', "
        f"'{proposal.digest}', 'granted', 'approval', 'approver-0', 'refund-policy-1', NULL, "
        f"{at}, {at + 3_600_000_000})"
    )
    with pytest.raises(RAW_REFUSED):
        raw_sql(store_url, forged)
    drop_trigger(store_url, "approvals", "approvals_insert_needs_event")
    raw_sql(store_url, forged)
    with pytest.raises(TamperedOperation) as refused:
        service.perform(AGENT, proposal.proposal_id, approval="appr-forged")
    assert refused.value.details["reason"] == "approval_not_in_trail"
    assert receiver(service).counts().submissions == 0
    assert count_rows(store_url, "attempts") == 0


def test_a_denial_flipped_to_granted_is_never_sent(service: EffectLedger, store_url: str) -> None:
    """A recorded denial edited into a grant does not admit an effect that reaches the receiver."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    denial = service.deny(
        approver(1), proposal.proposal_id, digest=proposal.digest, reason="not eligible"
    )
    drop_trigger(store_url, "approvals", "approvals_no_update")
    raw_sql(
        store_url,
        f"UPDATE approvals SET decision = 'granted', expires_us = {to_micros(START) + 10**10} "
        f"WHERE approval_id = '{denial.approval_id}'",
    )
    with pytest.raises(TamperedOperation) as refused:
        service.perform(AGENT, proposal.proposal_id, approval=denial.approval_id)
    assert refused.value.details["reason"] in {"proposal_denied", "approval_not_in_trail"}
    assert receiver(service).counts().submissions == 0


def test_a_finished_operation_set_back_to_ready_is_not_sent_again(
    service: EffectLedger, store_url: str
) -> None:
    """A SUCCEEDED refund edited back to READY is refused: the receiver still saw one submission."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.SUCCEEDED
    raw_sql(
        store_url,
        f"UPDATE operations SET state = 'READY' WHERE operation_id = '{done.operation_id}'",
    )
    assert done.operation_id is not None
    assert_refused(service, done.operation_id, "state_not_in_trail")
    assert receiver(service).counts().submissions == 1
    assert count_rows(store_url, "attempts") == 1


def test_a_pool_executor_passes_over_a_tampered_operation(
    service: EffectLedger, store_url: str
) -> None:
    """An executor pool never claims a tampered READY operation; it stays READY, unsent."""
    _, _, operation_id = admitted(service)
    raw_sql(
        store_url,
        "UPDATE operations SET command_json = replace(command_json, '30', '3000'), "
        f"fingerprint = 'x' WHERE operation_id = '{operation_id}'",
    )
    results = Executor(service.ledger, receiver(service)).run_ready()
    assert results == []
    assert receiver(service).counts().submissions == 0
    assert service.ledger.get(AGENT, operation_id).state is OperationState.READY


def test_an_untouched_operation_passes_every_check(service: EffectLedger, store_url: str) -> None:
    """The checks refuse only edits: an admitted operation dispatches once, as approved."""
    _, approval_id, operation_id = admitted(service)
    executor = service.executor_for(next(iter(service.destinations)))
    assert executor.execute(AGENT, operation_id).state is OperationState.SUCCEEDED
    effect = receiver(service).effect(service.ledger.get(AGENT, operation_id).idempotency_key)
    assert effect is not None
    assert (effect.operation_id, effect.approval_id) == (operation_id, approval_id)


def _rewrite_commands_on_insert(store_url: str) -> None:
    """A trigger that turns every admitted refund of 30 into one of 5000 as its row is written:
    an administrator's edit made inside the admitting transaction itself."""
    forged = "replace(command_json, '\"amount_minor\":30', '\"amount_minor\":5000')"
    if store_url.startswith("sqlite:"):
        raw_sql(
            store_url,
            "CREATE TRIGGER forge_command AFTER INSERT ON operations BEGIN "
            f"UPDATE operations SET command_json = {forged} "
            "WHERE tenant_id = NEW.tenant_id AND operation_id = NEW.operation_id; END",
        )
        return
    raw_sql(
        store_url,
        "CREATE FUNCTION forge_command() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"NEW.command_json := {forged.replace('command_json', 'NEW.command_json')}; "
        "RETURN NEW; END; $$",
    )
    raw_sql(
        store_url,
        "CREATE TRIGGER forge_command BEFORE INSERT ON operations FOR EACH ROW "
        "EXECUTE FUNCTION forge_command()",
    )


def test_a_command_rewritten_while_it_is_admitted_is_not_what_is_sent(
    service: EffectLedger, store_url: str
) -> None:
    """A perform admits and claims in one transaction; a trigger rewriting the operation's
    stored command in that transaction changes the row, not the request: the destination
    performs the approved refund of 30, once."""
    _rewrite_commands_on_insert(store_url)
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.SUCCEEDED
    (stored,) = raw_sql(
        store_url,
        f"SELECT command_json, idempotency_key FROM operations "
        f"WHERE operation_id = '{done.operation_id}'",
    )
    assert '"amount_minor":5000' in str(stored[0])  # the trigger did rewrite the row
    effect = receiver(service).effect(str(stored[1]))
    assert effect is not None
    assert (effect.amount, effect.unit) == (30, "EUR")
    assert '"amount_minor":30' in effect.command_json
    assert receiver(service).counts().effects == 1


def _replayed(service: EffectLedger, store_url: str, edit: str) -> tuple[str, str]:
    """A refund performed to SUCCEEDED, then its operation row edited with ``edit`` (SQL after
    ``SET``): the proposal and approval ids a repeated perform names."""
    proposal = service.propose(AGENT, "refund_order", REFUND_30)
    approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
    done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.state is OperationState.SUCCEEDED
    raw_sql(store_url, f"UPDATE operations SET {edit} WHERE operation_id = '{done.operation_id}'")
    return proposal.proposal_id, approval.approval_id


def test_a_replay_does_not_report_a_state_its_trail_lacks(
    service: EffectLedger, store_url: str
) -> None:
    """A SUCCEEDED refund edited to REJECTED is refused on a repeated perform (the head of its
    trail is an acceptance), not reported as rejected; the receiver saw one submission."""
    proposal_id, approval_id = _replayed(service, store_url, "state = 'REJECTED'")
    with pytest.raises(TamperedOperation) as refused:
        service.perform(AGENT, proposal_id, approval=approval_id)
    assert refused.value.details["reason"] == "state_not_in_trail"
    assert receiver(service).counts().submissions == 1


def test_a_replay_does_not_report_a_reference_its_trail_lacks(
    service: EffectLedger, store_url: str
) -> None:
    """A SUCCEEDED refund whose provider reference was rewritten is refused on a repeated
    perform: the reference its acceptance recorded is not the row's."""
    proposal_id, approval_id = _replayed(service, store_url, "provider_reference = 'rcpt-forged'")
    with pytest.raises(TamperedOperation) as refused:
        service.perform(AGENT, proposal_id, approval=approval_id)
    assert refused.value.details["reason"] == "state_not_in_trail"
    assert receiver(service).counts().submissions == 1


def test_a_replay_whose_row_points_off_its_head_reads_its_trail(
    service: EffectLedger, store_url: str
) -> None:
    """A SUCCEEDED refund whose row points at an earlier trail position is refused on a
    repeated perform, where its head alone cannot say, after the whole trail is read."""
    proposal_id, approval_id = _replayed(service, store_url, "event_sequence = event_sequence - 1")
    with pytest.raises(TamperedOperation) as refused:
        service.perform(AGENT, proposal_id, approval=approval_id)
    assert refused.value.details["reason"] in {"chain_broken", "state_not_in_trail"}
    assert receiver(service).counts().submissions == 1


def test_an_untouched_replay_reports_the_recorded_result(
    service: EffectLedger, store_url: str
) -> None:
    """The same check passes a finished refund whose row was not edited: a repeated perform
    reports SUCCEEDED with the receiver's reference, and nothing is submitted again."""
    proposal_id, approval_id = _replayed(service, store_url, "version = version")
    again = service.perform(AGENT, proposal_id, approval=approval_id)
    assert again.state is OperationState.SUCCEEDED
    assert again.outcome.value == "replayed"
    assert again.provider_reference is not None
    assert again.provider_reference.startswith("rcpt-")
    assert receiver(service).counts().submissions == 1
