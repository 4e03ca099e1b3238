"""The ``effectledger`` command: demo, migrate, status, audit, recover.

Exit codes: 0 success; 1 an effectledger error (the message names its stable code); 2 a usage
error; 3 ``status`` found an operation whose outcome is still uncertain (only with
``--fail-on-uncertain``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from effectledger.audit.chain import verify_chain
from effectledger.audit.commands import add_evidence_commands, run_evidence_command
from effectledger.demo import events_table, run_demo
from effectledger.destinations.simulated import LookupMode, SimulatedReceiver
from effectledger.errors import EffectLedgerError
from effectledger.ledger import Ledger
from effectledger.model import Context, Operation
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

    audit = commands.add_parser(
        "audit", help="read, seal, export, verify and explain the audit trail"
    )
    audit_commands = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    trail = audit_commands.add_parser("trail", help="print one operation's audit trail")
    _db_argument(trail)
    trail.add_argument("--tenant", required=True, help="tenant id")
    trail.add_argument("operation_id", help="the operation")
    add_evidence_commands(audit_commands, _db_argument)

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
            *map(
                escape,
                (
                    op.operation_id,
                    state,
                    op.requester_id,
                    f"{op.command.action} ({op.command.contract_version})",
                    op.provider_reference or "-",
                    str(op.version),
                ),
            )
        )
    return table


def _report_line(report: RecoveryReport) -> str:
    return (
        f"due {report.due}, looked up {report.looked_up}, resolved {len(report.resolved)}, "
        f"still unknown {len(report.still_unknown)}, escalated {len(report.escalated)}, "
        f"failed {len(report.failed)}"
    )


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
    if args.audit_command != "trail":
        return run_evidence_command(args)
    store = open_store(args.db)
    try:
        ledger = Ledger(store)
        context = Context(tenant_id=args.tenant, actor_id=OPERATOR)
        operation = ledger.get(context, args.operation_id)
        events = ledger.events(context, args.operation_id)
        console.print(events_table(events, f"Audit trail of {args.operation_id}"))
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
            return run_demo(console, args.dir)
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
