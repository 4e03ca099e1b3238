"""The ``effectledger`` command: demo, migrate, status, audit, recover.

Exit codes: 0 success; 1 an effectledger error (the message names its stable code); 2 a usage
error; 3 ``status`` found an operation whose outcome is still uncertain (only with
``--fail-on-uncertain``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from effectledger.audit.chain import verify_chain
from effectledger.clock import ManualClock
from effectledger.destinations.simulated import LookupMode, SimulatedReceiver, SubmitMode
from effectledger.errors import EffectLedgerError
from effectledger.ledger import Ledger
from effectledger.model import AuditEvent, Context, Operation
from effectledger.recovery import RecoveryReport, RecoveryWorker
from effectledger.store import open_store
from effectledger.store.queries import migrations

__all__ = ["main"]

DEFAULT_DB = "sqlite:///effectledger.db"
OPERATOR = "operator"


def _db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("EFFECTLEDGER_DB", DEFAULT_DB),
        help="store URL: sqlite:///path.db or postgresql://... "
        "(default: $EFFECTLEDGER_DB or %(default)s)",
    )


def _receiver_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--receiver",
        required=True,
        help="path of the simulated receiver's SQLite file to look up",
    )
    parser.add_argument("--account", default="acct-demo", help="receiver account id")
    parser.add_argument(
        "--endpoint", default="https://receiver.invalid/v1/effects", help="receiver endpoint"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``effectledger`` command."""
    parser = argparse.ArgumentParser(
        prog="effectledger",
        description="A durable ledger for an AI agent's consequential tool calls.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="tell the lost-reply story on a fresh SQLite ledger",
        description=(
            "Admit an operation, dispatch it to a receiver that performs it and loses the reply, "
            "repeat the tool call, recover by lookup, and print the audit trail."
        ),
    )
    demo.add_argument("--dir", type=Path, help="folder for the demo's files (default: a new one)")

    migrate = commands.add_parser(
        "migrate",
        help="create the ledger schema or bring it up to date",
        description=(
            "Apply the pending schema migrations to the store, each once even when several "
            "processes migrate at the same time."
        ),
    )
    _db_argument(migrate)

    status = commands.add_parser("status", help="show a tenant's operations or one operation")
    _db_argument(status)
    status.add_argument("--tenant", required=True, help="tenant id")
    status.add_argument("operation_id", nargs="?", help="one operation to show")
    status.add_argument("--limit", type=int, default=50, help="operations to list (default 50)")
    status.add_argument(
        "--fail-on-uncertain",
        action="store_true",
        help="exit 3 if any operation shown is still uncertain",
    )

    audit = commands.add_parser("audit", help="read and check the audit trail")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    trail = audit_commands.add_parser("trail", help="print one operation's audit trail")
    _db_argument(trail)
    trail.add_argument("--tenant", required=True, help="tenant id")
    trail.add_argument("operation_id", help="the operation")

    recover = commands.add_parser(
        "recover", help="reconcile uncertain operations by asking the destination"
    )
    _db_argument(recover)
    _receiver_arguments(recover)
    mode = recover.add_mutually_exclusive_group(required=True)
    mode.add_argument("--once", action="store_true", help="one pass over what is due, then exit")
    mode.add_argument("--loop", action="store_true", help="keep recovering until interrupted")
    recover.add_argument(
        "--interval", type=float, default=5.0, help="seconds between passes with --loop"
    )
    recover.add_argument("--limit", type=int, default=100, help="attempts per pass (default 100)")
    return parser


def _operations_table(operations: Sequence[Operation]) -> Table:
    table = Table(title="Operations")
    for column in ("operation", "state", "requester", "action", "provider ref", "version"):
        table.add_column(column)
    for op in operations:
        state = op.state.value + (" (uncertain)" if op.state.uncertain else "")
        table.add_row(
            op.operation_id,
            state,
            op.requester_id,
            f"{op.command.action} ({op.command.contract_version})",
            op.provider_reference or "-",
            str(op.version),
        )
    return table


def _events_table(events: Sequence[AuditEvent], title: str) -> Table:
    table = Table(title=title)
    for column in ("seq", "actor", "event", "attempt", "evidence"):
        table.add_column(column)
    for event in events:
        table.add_row(
            str(event.sequence),
            event.actor,
            event.event_type,
            (event.attempt_id or "-")[:8],
            event.evidence_reference or "-",
        )
    return table


def _report_line(report: RecoveryReport) -> str:
    return (
        f"due {report.due}, looked up {report.looked_up}, resolved {len(report.resolved)}, "
        f"still unknown {len(report.still_unknown)}, escalated {len(report.escalated)}, "
        f"skipped {len(report.skipped)}, failed {len(report.failed)}"
    )


def _demo(console: Console, folder: Path | None) -> int:
    from effectledger.callers.tools import DispatchTool
    from effectledger.executor import Executor
    from effectledger.model import Command, DestinationRef

    folder = folder or Path(tempfile.mkdtemp(prefix="effectledger-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    ledger_path, receiver_path = folder / "ledger.db", folder / "receiver.db"
    for stale in (ledger_path, receiver_path):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{stale}{suffix}").unlink(missing_ok=True)
    clock = ManualClock()
    ledger = Ledger(open_store(f"sqlite:///{ledger_path}"), clock=clock)
    receiver = SimulatedReceiver(receiver_path, submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY)
    context = Context(tenant_id="acme", actor_id="support-agent-7")
    console.print(
        f"[bold]effectledger demo[/bold] - ledger {ledger_path}, receiver {receiver_path}"
    )

    operation = ledger.admit(
        context,
        operation_id="reply-1001",
        revision="rev-3",
        command=Command(
            action="send_support_reply",
            contract_version="reply-v1",
            arguments={"recipient": "customer@example.com", "body": "Your refund is on its way."},
        ),
        destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        admission_reference="approval/ticket-4711/rev-3",
    )
    console.print(
        f"1. Admitted [cyan]{operation.operation_id}[/cyan]: {operation.state.value}, "
        f"idempotency key {operation.idempotency_key}"
    )
    tool = DispatchTool(Executor(ledger, receiver), context, operation.operation_id)
    first = tool.invoke()
    console.print(
        f"2. The agent calls the tool; the receiver performs the effect and the reply is lost: "
        f"[yellow]{first.state.value}[/yellow] (uncertain: {first.uncertain})"
    )
    again = tool.invoke()
    console.print(
        f"3. The agent calls the tool again: [yellow]{again.state.value}[/yellow], no new attempt "
        f"(receiver saw {receiver.counts().submissions} submission)"
    )
    try:
        tool.invoke({"recipient": "attacker@example.net"})
    except EffectLedgerError as exc:
        console.print(f"4. A call that smuggles a recipient is refused: [red]{exc.code}[/red]")
    clock.advance(ledger.settings.recover_after)
    console.print(f"5. {int(ledger.settings.recover_after.total_seconds())} s later (demo clock):")
    report = RecoveryWorker(ledger, receiver).run_once()
    final = ledger.get(context, operation.operation_id)
    console.print(
        f"   recovery looked up the persisted key: {_report_line(report)}; now "
        f"[green]{final.state.value}[/green], provider reference {final.provider_reference}"
    )
    events = ledger.events(context, operation.operation_id)
    verify_chain(events, head=final.last_event_hash)
    console.print(_events_table(events, f"Audit trail of {operation.operation_id}"))
    counts = receiver.counts()
    console.print(
        f"Hash chain verified over {len(events)} events. Receiver's own count: "
        f"{counts.submissions} submission, {counts.lookups} lookup, "
        f"[bold]{counts.effects} effect[/bold]."
    )
    ledger.store.close()
    receiver.close()
    return 0


def _migrate(console: Console, args: argparse.Namespace) -> int:
    store = open_store(args.db, migrate=False)
    try:
        applied = store.migrate()
        latest = migrations(store.dialect)[-1][0]
    finally:
        store.close()
    if applied:
        names = ", ".join(f"{version:04d}" for version in applied)
        console.print(f"applied migration(s) {names}; schema at version {latest}")
    else:
        console.print(f"schema already at version {latest}; nothing to apply")
    return 0


def _status(console: Console, args: argparse.Namespace) -> int:
    store = open_store(args.db)
    try:
        ledger = Ledger(store)
        context = Context(tenant_id=args.tenant, actor_id=OPERATOR)
        if args.operation_id:
            operations = [ledger.get(context, args.operation_id)]
        else:
            operations = ledger.list_operations(context, limit=args.limit)
        console.print(_operations_table(operations))
        uncertain = [op.operation_id for op in operations if op.state.uncertain]
        if uncertain:
            console.print(f"{len(uncertain)} operation(s) uncertain: the effect may have happened.")
        return 3 if uncertain and args.fail_on_uncertain else 0
    finally:
        store.close()


def _audit(console: Console, args: argparse.Namespace) -> int:
    store = open_store(args.db)
    try:
        ledger = Ledger(store)
        context = Context(tenant_id=args.tenant, actor_id=OPERATOR)
        operation = ledger.get(context, args.operation_id)
        events = ledger.events(context, args.operation_id)
        console.print(_events_table(events, f"Audit trail of {args.operation_id}"))
        verify_chain(events, head=operation.last_event_hash)
        console.print(f"Hash chain verified over {len(events)} events; state {operation.state}.")
        return 0
    finally:
        store.close()


def _recover(console: Console, args: argparse.Namespace) -> int:
    store = open_store(args.db)
    receiver = SimulatedReceiver(
        args.receiver,
        account_id=args.account,
        endpoint=args.endpoint,
        lookup_mode=LookupMode.ANSWER,
    )
    worker = RecoveryWorker(Ledger(store), receiver)
    try:
        while True:
            report = worker.run_once(limit=args.limit)
            console.print(f"recovery pass: {_report_line(report)}")
            if args.once:
                return 1 if report.failed else 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        console.print("stopped")
        return 0
    finally:
        store.close()
        receiver.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        if args.command == "demo":
            return _demo(console, args.dir)
        if args.command == "migrate":
            return _migrate(console, args)
        if args.command == "status":
            return _status(console, args)
        if args.command == "audit":
            return _audit(console, args)
        if args.command == "recover":
            return _recover(console, args)
    except EffectLedgerError as exc:
        # escape(): "[code]" would otherwise be read as console markup and vanish.
        Console(stderr=True).print(f"[red]error[/red] {escape(f'[{exc.code}]: {exc.message}')}")
        return 1
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
