"""Digest versions on a real store: v2 for everything new, v1 records still verify.

Version 1 records are written the way the ledger wrote them before version 2 existed (a proposal
row with a bare-hex digest, events hashed under ``effectledger/event/v1``), then read, approved,
chained onto, sealed, exported and verified offline, on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from effectledger import Context, DestinationRef, InvalidInput, ManualClock
from effectledger.actions.policy import RulePolicy
from effectledger.actions.registry import Action, ActionRegistry
from effectledger.audit.bundles.export import export_log
from effectledger.audit.bundles.receipt import prove_events
from effectledger.audit.explain import explain_stored
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.authority import Authority
from effectledger.errors import ChainBreak, ExportFailed, TamperedProposal
from effectledger.events.chain import GENESIS_HASH, event_body, verify_chain
from effectledger.events.record import entry_bytes, hash_of_entry
from effectledger.ledger import Ledger
from effectledger.model.canonical import MAX_SAFE_INTEGER, digest, digest_version
from effectledger.model.operations import to_micros
from effectledger.store import open_store
from tests.conftest import admit, count_rows, drop_trigger, raw_sql, reply_command
from tests.support.evidence import SIGNER, VERIFIER_KEY
from tests.support.evidence import verify_both_ways as verify_bundle

AGENT = Context(tenant_id="acme", actor_id="agent-7", roles=frozenset({"agent"}))
REVIEWER = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))


class Transfer(BaseModel):
    """Arguments with no business bound on the amount: only the encoding bounds it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    account: str
    amount: Annotated[int, Field(ge=0)]
    fee: int = 0


@pytest.fixture
def authority(store_url: str, clock: ManualClock) -> Iterator[Authority]:
    """An authority with one ``transfer`` action whose units are its amount."""
    action = Action(
        name="transfer",
        contract_version="transfer-v1",
        arguments=Transfer,
        policy=RulePolicy(version="transfer-policy-1"),
        destination=DestinationRef(account_id="acct", endpoint="https://receiver.invalid/v1"),
        pool="transfers",
        units=lambda arguments: arguments.amount,
        target=lambda arguments: arguments.account,
        resource_version=lambda context, target: "v1",
    )
    ledger = Ledger(open_store(store_url), clock=clock)
    yield Authority(ledger, ActionRegistry([action]))
    ledger.store.close()


@pytest.mark.parametrize(
    "arguments",
    [
        {"account": "a-1", "amount": MAX_SAFE_INTEGER + 1},
        {"account": "a-1", "amount": 5, "fee": -MAX_SAFE_INTEGER - 1},
        {"account": "a-1", "amount": 2**63 - 1},
    ],
)
def test_units_and_amounts_beyond_2_53_are_refused_at_proposal(
    authority: Authority, store_url: str, arguments: dict[str, Any]
) -> None:
    """An amount or units outside ±(2^53-1) is ``invalid_input`` and writes no row at all."""
    with pytest.raises(InvalidInput) as refused:
        authority.propose(AGENT, "transfer", arguments)
    assert refused.value.code == "invalid_input"
    assert "2^53-1" in refused.value.message
    assert count_rows(store_url, "proposals") == 0
    assert count_rows(store_url, "audit_events") == 0


def test_the_largest_safe_amount_is_proposed_with_a_v2_digest(
    authority: Authority, store_url: str
) -> None:
    """±(2^53-1) itself is accepted; the stored digest is ``v2:`` and recomputes on read."""
    proposal = authority.propose(AGENT, "transfer", {"account": "a-1", "amount": MAX_SAFE_INTEGER})
    assert digest_version(proposal.digest) == 2
    assert proposal.digest == digest("proposal", proposal.digest_body())
    assert authority.get_proposal(AGENT, proposal.proposal_id).digest == proposal.digest
    assert count_rows(store_url, "proposals") == 1


def _v1_proposal(authority: Authority, store_url: str, clock: ManualClock) -> str:
    """Store a proposal the way the ledger did before v2: a bare-hex v1 digest."""
    body = {
        "action": "transfer",
        "arguments": {"account": "a-9", "amount": 40, "fee": 0},
        "contract_version": "transfer-v1",
        "destination": {"account_id": "acct", "endpoint": "https://receiver.invalid/v1"},
        "expires_us": to_micros(clock.now()) + 600_000_000,
        "operation_id": "op-old",
        "policy_version": "transfer-policy-1",
        "pool": "transfers",
        "proposer_id": AGENT.actor_id,
        "resource_version": "v1",
        "target": "a-9",
        "tenant_id": "acme",
        "units": 40,
    }
    old = digest("proposal", body, version=1)
    authority.ledger.store.write(
        lambda tx: tx.run(
            "proposal_insert",
            {
                **{k: v for k, v in body.items() if k not in {"arguments", "destination"}},
                "proposal_id": "prop-old",
                "arguments_json": '{"account":"a-9","amount":40,"fee":0}',
                "destination_account": "acct",
                "destination_endpoint": "https://receiver.invalid/v1",
                "correlation_json": "{}",
                "digest": old,
                "created_us": to_micros(clock.now()),
                "stated_reason": None,
            },
        ),
        label="test_v1_proposal",
    )
    return old


def test_a_v1_proposal_still_verifies_and_is_approved_by_its_digest(
    authority: Authority, store_url: str, clock: ManualClock
) -> None:
    """A stored v1 digest recomputes under v1: the proposal reads, and its digest is approved."""
    old = _v1_proposal(authority, store_url, clock)
    assert digest_version(old) == 1
    proposal = authority.get_proposal(AGENT, "prop-old")
    assert proposal.digest == old
    approval = authority.approve(REVIEWER, "prop-old", digest=old)
    assert approval.digest == old
    assert approval.granted
    drop_trigger(store_url, "proposals", "proposals_no_update")
    raw_sql(store_url, "UPDATE proposals SET units = 41 WHERE proposal_id = 'prop-old'")
    with pytest.raises(TamperedProposal):
        authority.get_proposal(AGENT, "prop-old")


def _v1_event(ledger: Ledger, operation_id: str, sequence: int, prev_hash: str, now: int) -> str:
    """Append one event hashed the way the ledger did before v2; return its v1 hash."""
    body = event_body(
        event_id=f"v1-{operation_id}-{sequence}",
        tenant_id="acme",
        operation_id=operation_id,
        attempt_id=None,
        sequence=sequence,
        actor="legacy",
        event_type="LegacyNote",
        recorded_us=now,
        evidence_reference=None,
        details={"n": 2**60, "\U0001f600": 1, "\ue000": 2},  # v1-only: big int, UTF-8 key order
        observation_id=None,
        prev_hash=prev_hash,
    )
    data = entry_bytes(body, 1)
    details = data[data.index(b',"details":') + 11 : data.rindex(b',"event_id":')]
    row = {
        **body,
        "event_hash": hash_of_entry(data, 1),
        "details_json": details.decode(),
        "trail_tag": None,  # written before trail keys
    }
    ledger.store.write(lambda tx: tx.run("event_insert", row), label="test_v1_event")
    return str(row["event_hash"])


def test_a_chain_begun_in_v1_continues_in_v2_and_verifies_everywhere(
    ledger: Ledger, store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """v1 events, then v2 events on the same chain: sealed, exported and verified offline."""
    now = to_micros(clock.now())
    first = _v1_event(ledger, "op-mixed", 1, GENESIS_HASH, now)
    second = _v1_event(ledger, "op-mixed", 2, first, now + 1)
    assert digest_version(second) == 1
    context = Context(tenant_id="acme", actor_id="agent-7")
    ledger.admit(
        context,
        operation_id="op-mixed",
        revision="r1",
        command=reply_command(),
        destination=DestinationRef(account_id="acct", endpoint="https://receiver.invalid/v1"),
        admission_reference="approval/1",
    )
    events = ledger.events(context, "op-mixed")
    assert [digest_version(event.event_hash) for event in events] == [1, 1, 2]
    assert events[2].prev_hash == second
    verify_chain(events, head=ledger.get(context, "op-mixed").last_event_hash)
    LogSealer(ledger.store, SIGNER, clock=clock).seal("acme")
    bundle = tmp_path / "mixed.jsonl"
    export_log(ledger.store, "acme", bundle, clock=clock)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok, report.findings
    assert report.events == 3
    receipt = tmp_path / "receipt.jsonl"
    prove_events(ledger.store, "acme", [events[0].event_id, events[2].event_id], receipt)
    assert verify_bundle(receipt, [VERIFIER_KEY]).ok
    assert len(explain_stored(ledger.store, "acme", "op-mixed")) == 4


def test_explain_verifies_the_chain_head_before_any_text(
    ledger: Ledger, store_url: str, clock: ManualClock, tmp_path: Path, receiver: Any
) -> None:
    """Deleting an operation's last event makes ``explain_stored`` raise instead of explain."""
    context = Context(tenant_id="acme", actor_id="agent-7")
    admit(ledger, context, receiver, "op-cut")
    prepared = ledger.claim(context, "op-cut", attempt_id="a-1")
    assert prepared is not None
    assert len(explain_stored(ledger.store, "acme", "op-cut")) == 3
    drop_trigger(store_url, "audit_events", "audit_events_no_delete")
    raw_sql(store_url, "DELETE FROM audit_events WHERE operation_id = 'op-cut' AND sequence = 2")
    with pytest.raises(ChainBreak) as broken:
        explain_stored(ledger.store, "acme", "op-cut")
    assert broken.value.code == "audit_chain_broken"


def test_prove_keeps_an_existing_file_unless_overwrite(
    ledger: Ledger, clock: ManualClock, tmp_path: Path, receiver: Any
) -> None:
    """An existing receipt file is refused with ``file_exists`` and left byte for byte as it was."""
    context = Context(tenant_id="acme", actor_id="agent-7")
    admit(ledger, context, receiver, "op-proved")
    LogSealer(ledger.store, SIGNER, clock=clock).seal("acme")
    event_id = ledger.events(context, "op-proved")[0].event_id
    target = tmp_path / "receipt.jsonl"
    target.write_bytes(b"an earlier receipt\n")
    with pytest.raises(ExportFailed) as refused:
        prove_events(ledger.store, "acme", [event_id], target)
    assert refused.value.details["reason"] == "file_exists"
    assert target.read_bytes() == b"an earlier receipt\n"
    prove_events(ledger.store, "acme", [event_id], target, overwrite=True)
    assert verify_bundle(target, [VERIFIER_KEY]).ok
