"""``effectledger demo``: the whole story on fresh SQLite files.

An agent proposes a refund of 30; policy requires approval; a reviewer approves that digest; the
agent's edit to 35 is refused; the dispatch performs the refund and loses the reply; a repeated
call makes no new attempt; recovery asks the receiver and reconciles. Tables show the proposal,
the approval, the operation, the capacity and the audit trail, with the receiver's own count.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from effectledger.actions import ActionRegistry
from effectledger.audit.chain import verify_chain
from effectledger.clock import ManualClock
from effectledger.destinations.simulated import SimulatedReceiver, SubmitMode
from effectledger.errors import EffectLedgerError
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.ledger import Ledger
from effectledger.model import AuditEvent, Context, DestinationRef
from effectledger.service import EffectService
from effectledger.store import open_store

__all__ = ["events_table", "run_demo"]


def events_table(events: list[AuditEvent], title: str) -> Table:
    """The audit trail as a table: sequence, actor, event, attempt, evidence."""
    table = Table(title=title)
    table.add_column("seq", justify="right")
    table.add_column("actor", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("attempt", no_wrap=True)
    table.add_column("evidence", overflow="fold")
    for event in events:
        table.add_row(
            *map(
                escape,
                (
                    str(event.sequence),
                    event.actor,
                    event.event_type,
                    (event.attempt_id or "-")[:8],
                    event.evidence_reference or "-",
                ),
            )
        )
    return table


def _facts(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in rows:
        table.add_row(escape(name), escape(value))
    return table


def run_demo(console: Console, folder: Path | None = None) -> int:
    """Tell the story; return the exit code (0 when every check of the story held)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="effectledger-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    ledger_path, receiver_path = folder / "ledger.db", folder / "receiver.db"
    for stale in (ledger_path, receiver_path):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{stale}{suffix}").unlink(missing_ok=True)
    clock = ManualClock()
    store = open_store(f"sqlite:///{ledger_path}")
    ledger = Ledger(store, clock=clock)
    receiver = SimulatedReceiver(receiver_path, submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY)
    orders = OrderBook()
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    service = EffectService(
        ledger, ActionRegistry([refund_action(orders=orders, destination=destination)]), [receiver]
    )
    agent = Context(tenant_id="acme", actor_id="support-agent-7", roles=frozenset({"agent"}))
    reviewer = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
    console.print(f"[bold]effectledger demo[/bold]: ledger {escape(str(ledger_path))}")
    console.print(f"receiver {escape(str(receiver_path))} (performs, then loses its reply)")

    refund = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR", "reason": "damaged"}
    proposal = service.propose(agent, "refund_order", refund)
    console.print(
        f"1. The agent proposes a refund of 30 EUR minor units on ord-1001: proposal "
        f"{proposal.proposal_id[:13]}..., digest {proposal.digest[:16]}..."
    )
    decision = service.registry.get("refund_order").policy.decide(agent, proposal, clock.now())
    console.print(f"2. Policy {decision.policy_version} says: {decision.tier}")
    approval = service.approve(reviewer, proposal.proposal_id, digest=proposal.digest)
    console.print(f"3. Reviewer rita approves exactly that digest: {approval.approval_id[:13]}...")

    edited = service.propose(agent, "refund_order", {**refund, "amount_minor": 35})
    refused = service.perform(agent, edited.proposal_id, approval_id=approval.approval_id)
    console.print(
        f"4. The agent edits the amount to 35 and presents rita's approval: "
        f"[red]{refused.outcome} ({refused.reason})[/red], receiver effects: "
        f"{receiver.counts().effects}"
    )

    first = service.perform(agent, proposal.proposal_id, approval_id=approval.approval_id)
    usage = service.authority.capacity(agent, "refunds")
    console.print(
        f"5. The approved refund is admitted and dispatched; the reply is lost: "
        f"[yellow]{first.state}[/yellow] (uncertain: {first.uncertain}); "
        f"held {usage.held}, committed {usage.committed}"
    )
    operation_id = proposal.operation_id
    tool = service.dispatch_tool(agent, operation_id)
    again = tool.invoke()
    console.print(
        f"6. The agent calls the dispatch tool again: [yellow]{again.state}[/yellow], no new "
        f"attempt (receiver saw {receiver.counts().submissions} submission)"
    )
    try:
        tool.invoke({"amount_minor": 3000})
    except EffectLedgerError as exc:
        console.print(f"7. A call that smuggles an amount is refused: [red]{exc.code}[/red]")

    clock.advance(ledger.settings.recover_after)
    reconciled = service.reconcile(agent, operation_id)
    usage = service.authority.capacity(agent, "refunds")
    console.print(
        f"8. {int(ledger.settings.recover_after.total_seconds())} s later (demo clock) recovery "
        f"looks up the persisted key: [green]{reconciled.state}[/green], provider reference "
        f"{reconciled.provider_reference}; held {usage.held}, committed {usage.committed}"
    )

    operation = ledger.get(agent, operation_id)
    consumed = service.authority.approval_consumed_by(agent, approval.approval_id)
    console.print(
        _facts(
            "Proposal",
            [
                ("proposal", proposal.proposal_id),
                ("proposer", proposal.proposer_id),
                ("action", f"{proposal.action} ({proposal.contract_version})"),
                ("target", f"{proposal.target} at {proposal.resource_version}"),
                ("arguments", str(dict(proposal.arguments))),
                ("digest", proposal.digest),
            ],
        )
    )
    console.print(
        _facts(
            "Approval",
            [
                ("approval", approval.approval_id),
                ("approver", approval.approver_id),
                ("digest", approval.digest),
                ("consumed by", consumed or "-"),
            ],
        )
    )
    console.print(
        _facts(
            "Operation",
            [
                ("operation", operation.operation_id),
                ("state", str(operation.state)),
                ("idempotency key", operation.idempotency_key),
                ("provider reference", operation.provider_reference or "-"),
                ("capacity", f"refunds: held {usage.held}, committed {usage.committed}"),
            ],
        )
    )
    events = ledger.events(agent, operation_id)
    verify_chain(events, head=operation.last_event_hash)
    console.print(events_table(events, f"Audit trail of {operation_id}"))
    counts = receiver.counts()
    console.print(
        f"Hash chain verified over {len(events)} events. Receiver's own count: "
        f"{counts.submissions} submission, {counts.lookups} lookup, "
        f"[bold]{counts.effects} effect[/bold]."
    )
    store.close()
    receiver.close()
    ok = counts.effects == 1 and refused.reason == "digest_mismatch"
    return 0 if ok else 1
