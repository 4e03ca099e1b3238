"""``effectledger demo --http``: the lost-reply story over real sockets.

A reference receiver is served on 127.0.0.1 (its own SQLite file, a bearer token read from the
environment by the destination); an operation is dispatched through the HTTP destination while
the receiver commits and drops the connection. Once, inside the replay window, a resend with the
same key settles it; then with every resend lost too, the ledger records Unknown with the failure
as evidence, a repeated call makes no new request, and recovery looks the key up and reconciles. The
audit trail shows each event's evidence blob, and the receiver's own count shows one effect.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rich.markup import escape

from effectledger.app.protection import create_keys
from effectledger.cli.audit import EVENT_COLUMNS, events_rows
from effectledger.cli.output import Output
from effectledger.clock import ManualClock
from effectledger.destinations.secrets import env_secret
from effectledger.ledger import Ledger, LedgerSettings
from effectledger.ledger.evidence import load_evidence
from effectledger.model.operations import (
    Command,
    Context,
    DestinationRef,
    OperationState,
)
from effectledger.receiver.contract import reference_destination
from effectledger.receiver.server import serve
from effectledger.store import open_store
from effectledger.workers.executor import Executor
from effectledger.workers.recovery import RecoveryWorker

__all__ = ["run_http_demo"]

_TOKEN_VARIABLE = "EFFECTLEDGER_DEMO_RECEIVER_TOKEN"


def run_http_demo(out: Output, folder: Path | None = None) -> int:
    """Tell the story; return 0 when both operations ended SUCCEEDED with one effect each."""
    console = out.console()
    folder = folder or Path(tempfile.mkdtemp(prefix="effectledger-http-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    token = os.environ.setdefault(_TOKEN_VARIABLE, os.urandom(12).hex())
    clock = ManualClock()
    keys = create_keys(folder / "ledger.db.keys")  # protected as a ledger migrate makes
    store = open_store(f"sqlite:///{folder / 'ledger.db'}")
    ledger = Ledger(store, clock=clock, settings=LedgerSettings(trail_keys=keys.trail_keys))
    agent = Context(tenant_id="acme", actor_id="support-agent-7")
    with serve(folder / "receiver.db", token=token) as receiver:
        destination = reference_destination(
            receiver.url, token=env_secret(_TOKEN_VARIABLE, "Bearer {secret}")
        )
        console.print(f"[bold]effectledger demo --http[/bold]: receiver at {receiver.url}")
        executor = Executor(ledger, destination)
        for operation_id in ("op-http-1", "op-http-2"):
            ledger.admit(
                agent,
                operation_id=operation_id,
                revision="rev-1",
                command=Command(
                    action="send_support_reply",
                    contract_version="reply-v1",
                    arguments={"recipient": "customer@example.com", "body": "Refund sent."},
                ),
                destination=DestinationRef(
                    account_id=destination.account_id, endpoint=destination.endpoint
                ),
                admission_reference=f"approval/{operation_id}",
            )
        receiver.faults.drop_after_commit = 1
        settled = executor.execute(agent, "op-http-1")
        console.print(
            f"1. op-http-1: the receiver commits, then drops the connection; the destination "
            f"resends inside its replay window with the same key: [green]{settled.state}"
            f"[/green], receiver effects {receiver.store.effects_for(_key(ledger, agent, 1))}"
        )
        receiver.faults.drop_after_commit = 3  # the send and every resend the contract allows
        first = executor.execute(agent, "op-http-2")
        console.print(
            f"2. op-http-2: every send and resend loses its reply: [yellow]{first.state}"
            f"[/yellow] (uncertain: {first.uncertain})"
        )
        again = executor.execute(agent, "op-http-2")
        console.print(f"3. Called again: [yellow]{again.state}[/yellow], no new request")
        clock.advance(ledger.settings.recover_after)
        RecoveryWorker(ledger, destination).run_once()
        final = ledger.status(agent, "op-http-2")
        console.print(
            f"4. Recovery looks the key up: [green]{final.state}[/green], provider reference "
            f"{final.provider_reference}"
        )
        events = ledger.events(agent, "op-http-2")
        out.table("Audit trail of op-http-2", EVENT_COLUMNS, events_rows(out, events))
        reference = events[-1].evidence_reference
        blob = load_evidence(store, agent.tenant_id, reference) if reference else None
        if blob is not None:
            console.print(f"Evidence {escape(blob.reference)}:")
            console.print_json(blob.content.decode())
        counts = receiver.store.counts()
        console.print(
            f"Receiver's own count: {counts.submissions} submissions, {counts.lookups} lookup, "
            f"[bold]{counts.effects} effects[/bold] (one per operation)."
        )
        destination.close()
    store.close()
    ok = OperationState.SUCCEEDED is final.state is settled.state and counts.effects == 2
    return 0 if ok else 1


def _key(ledger: Ledger, context: Context, number: int) -> str:
    return ledger.get(context, f"op-http-{number}").idempotency_key
