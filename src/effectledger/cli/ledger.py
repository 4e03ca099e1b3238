"""``migrate``, ``status`` and ``recover``: the ledger's schema, its operations, and recovery."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from effectledger.app import EffectLedger
from effectledger.app.protection import find_keys, warn_unprotected
from effectledger.audit.moving import move_ledger
from effectledger.cli.application import load_ledger
from effectledger.cli.options import (
    Commands,
    add_db,
    add_json,
    add_wide,
    open_existing,
    positive,
    takes_store_urls,
)
from effectledger.cli.output import Output, jsonable
from effectledger.cli.protection import (
    add_key_dir,
    check_key_dir,
    configured_key_dir,
    migrate_keys,
    shown_keys,
    summary_lines,
)
from effectledger.destinations.simulated import LookupMode, SimulatedReceiver
from effectledger.errors import InvalidInput
from effectledger.ledger import Ledger, LedgerSettings
from effectledger.model.operations import Context, Operation
from effectledger.sql import migrations
from effectledger.store import Store, open_store, redact
from effectledger.workers.recovery import RecoveryReport, RecoveryWorker

__all__ = ["EXIT_UNCERTAIN", "operation_document", "register"]

OPERATOR = "operator"
EXIT_UNCERTAIN = 3
"""``status --fail-on-uncertain`` exits with this when an operation shown is uncertain."""


def register(commands: Commands) -> None:
    """Add ``migrate``, ``status`` and ``recover``."""
    migrate = commands.add_parser(
        "migrate",
        help="create the ledger schema or bring it up to date, or move a ledger to another store",
        description="Apply the pending schema migrations to the store, each once even when "
        "several processes migrate at the same time. The only command besides demo that "
        "creates a database. With --from and --to, copy a whole ledger into an empty one "
        "(every table, in one transaction of the target), verify it there (rows, trails, "
        "logs and checkpoints) and commit only then: on any failure the target stays empty. "
        "A new ledger gets a key directory with a trail key and a log key (only the verifier "
        "key is printed); --create-keys makes one for an older ledger.",
    )
    add_db(migrate)
    add_key_dir(migrate)
    keys = migrate.add_mutually_exclusive_group()
    keys.add_argument(
        "--create-keys",
        action="store_true",
        help="make the key directory of a ledger that already holds events and has none",
    )
    keys.add_argument(
        "--no-keys",
        action="store_true",
        help="migrate without making or looking for keys (the ledger runs unprotected)",
    )
    migrate.add_argument("--from", dest="from_url", metavar="URL", help="the ledger to move")
    migrate.add_argument(
        "--to", dest="to_url", metavar="URL", help="the empty store to move it into"
    )
    migrate.add_argument(
        "--batch", type=int, default=1000, help="rows per batch with --from (default 1000)"
    )
    add_json(migrate)
    takes_store_urls(migrate, from_url="--from", to_url="--to")
    migrate.set_defaults(handler=_migrate)

    status = commands.add_parser(
        "status",
        help="show a tenant's operations or one operation",
        description="List a tenant's operations (or show one), marking every outcome that is "
        "still uncertain. Reads an existing ledger only.",
    )
    add_db(status)
    add_key_dir(status)
    status.add_argument("--tenant", required=True, help="tenant id")
    status.add_argument("operation_id", nargs="?", help="one operation to show")
    status.add_argument("--limit", type=int, default=50, help="operations to list (default 50)")
    status.add_argument(
        "--summary",
        action="store_true",
        help="the tenant's figures instead: operations by state, uncertain ones and the oldest "
        "one's age, events waiting to be sealed, and the ledger's keys (or what runs "
        "unprotected without them)",
    )
    status.add_argument(
        "--fail-on-uncertain",
        action="store_true",
        help=f"exit {EXIT_UNCERTAIN} if any operation shown is still uncertain",
    )
    add_json(status)
    add_wide(status)
    status.set_defaults(handler=_status)

    recover = commands.add_parser(
        "recover",
        help="reconcile uncertain operations by asking the destination",
        description="Look up each due uncertain operation at its destination by its "
        "persisted key and record the answer; never resubmits. With --app, every destination "
        "the application declares; with --receiver, the simulated receiver's existing file.",
    )
    add_db(recover)
    add_key_dir(recover)
    source = recover.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--app",
        metavar="MODULE:FACTORY",
        help="the EffectLedger whose declared destinations to look up, or a factory of it",
    )
    source.add_argument(
        "--receiver",
        help="path of the simulated receiver's existing SQLite file to look up",
    )
    recover.add_argument("--account", default="acct-demo", help="receiver account id")
    recover.add_argument(
        "--endpoint", default="https://receiver.invalid/v1/effects", help="receiver endpoint"
    )
    mode = recover.add_mutually_exclusive_group(required=True)
    mode.add_argument("--once", action="store_true", help="one pass over what is due, then exit")
    mode.add_argument("--loop", action="store_true", help="keep recovering until interrupted")
    recover.add_argument(
        "--interval", type=float, default=5.0, help="seconds between passes with --loop"
    )
    recover.add_argument("--limit", type=int, default=100, help="attempts per pass (default 100)")
    add_json(recover)
    recover.set_defaults(handler=_recover)


def _migrate(args: argparse.Namespace, out: Output) -> int:
    if args.from_url is not None or args.to_url is not None:
        return _move(args, out)
    check_key_dir(args)  # a PostgreSQL ledger with no key directory: refused before migrating
    store = open_store(args.db, migrate=False)
    try:
        applied = store.migrate()
        latest = migrations(store.dialect)[-1][0]
        if not out.json_mode:
            _migrated(out, applied, latest)
        keys = migrate_keys(store, args, out)
    finally:
        store.close()
    if out.json_mode:
        out.json({"applied": applied, "version": latest, "keys": keys})
    return 0


def _migrated(out: Output, applied: list[int], latest: int) -> None:
    if applied:
        names = ", ".join(f"{version:04d}" for version in applied)
        out.line(f"applied migration(s) {names}; schema at version {latest}")
    else:
        out.line(f"schema already at version {latest}; nothing to apply")


def _move(args: argparse.Namespace, out: Output) -> int:
    if args.from_url is None or args.to_url is None:
        raise InvalidInput("migrate moves a ledger with both --from URL and --to URL")
    shown: dict[str, int] = {}

    def progress(table: str, done: int, total: int) -> None:
        if shown.get(table) != done:
            shown[table] = done
            out.line(f"migrate: {table} {done}/{total}", err=True)

    report = move_ledger(args.from_url, args.to_url, batch=args.batch, progress=progress)
    moved = sum(report.rows.values())
    if out.json_mode:
        out.json(
            {
                "rows": report.rows,
                "trails": report.trails,
                "logs": report.logs,
                "checkpoints": report.checkpoints,
                "verified": True,
            }
        )
    else:
        out.line(
            f"moved {moved} rows of {len(report.rows)} tables to {redact(args.to_url)}; verified "
            f"{report.trails} trails, {report.logs} logs and {report.checkpoints} checkpoints"
        )
    return 0


def operation_document(operation: Operation) -> dict[str, Any]:
    """An operation as JSON data, with ``uncertain`` spelled out."""
    document: dict[str, Any] = jsonable(operation)
    document["uncertain"] = operation.state.uncertain
    return document


def _operations_table(out: Output, operations: Sequence[Operation]) -> None:
    rows = [
        (
            out.short(op.operation_id),
            op.state.value + (" (uncertain)" if op.state.uncertain else ""),
            op.requester_id,
            f"{op.command.action} ({op.command.contract_version})",
            out.short(op.provider_reference),
            str(op.version),
        )
        for op in operations
    ]
    out.table(
        "Operations",
        ("operation", "state", "requester", "action", "provider ref", "version"),
        rows,
        no_wrap=("operation", "provider ref"),
    )


def _status(args: argparse.Namespace, out: Output) -> int:
    positive(args.limit, "--limit")
    if args.summary:
        return _summary(args, out)
    store = open_existing(args.db)
    try:
        _warn_if_replicas_lag(store, out)
        ledger = Ledger(store)
        context = Context(tenant_id=args.tenant, actor_id=OPERATOR)
        if args.operation_id:
            operations = [ledger.get(context, args.operation_id)]
        else:
            operations = ledger.list_operations(context, limit=args.limit)
    finally:
        store.close()
    uncertain = [op.operation_id for op in operations if op.state.uncertain]
    if out.json_mode:
        out.json({"operations": [operation_document(op) for op in operations]})
    elif not operations:
        out.line(f"tenant {args.tenant} has no operations in this ledger")
    else:
        _operations_table(out, operations)
        if uncertain:
            out.line(f"{len(uncertain)} operation(s) uncertain: the effect may have happened.")
    return EXIT_UNCERTAIN if uncertain and args.fail_on_uncertain else 0


def _warn_if_replicas_lag(store: Store, out: Output) -> None:
    """Warn on standard error when the database's standbys replicate asynchronously."""
    replication = getattr(store, "replication", None)  # only a PostgreSQL store has standbys
    warning = replication().warning() if replication is not None else None
    if warning is not None:
        out.line(f"warning: {warning}", err=True)


def _summary(args: argparse.Namespace, out: Output) -> int:
    if args.operation_id:
        raise InvalidInput("--summary covers the whole tenant; name no operation", field="summary")
    with EffectLedger(open_existing(args.db)) as ledger:
        _warn_if_replicas_lag(ledger.store, out)
        auditor = Context(tenant_id=args.tenant, actor_id=OPERATOR, roles=frozenset({"auditor"}))
        summary = ledger.summary(auditor)
        keys = shown_keys(ledger.store, args)
    age = summary.oldest_uncertain_age
    lag = summary.seal_lag
    if out.json_mode:
        out.json(
            {
                "tenant_id": summary.tenant_id,
                "operations": summary.by_state,
                "uncertain": summary.uncertain,
                "oldest_uncertain_age_s": None if age is None else age.total_seconds(),
                "seal_pending": summary.seal_pending,
                "seal_lag_s": None if lag is None else lag.total_seconds(),
                "keys": keys,
            }
        )
    else:
        states = ", ".join(f"{state} {n}" for state, n in summary.by_state.items() if n)
        out.line(f"operations: {states or 'none'}")
        oldest = "" if age is None else f", the oldest unchanged for {age.total_seconds():.0f} s"
        out.line(f"uncertain: {summary.uncertain}{oldest}")
        waited = "" if lag is None else f", the oldest waiting {lag.total_seconds():.0f} s"
        out.line(f"not yet sealed: {summary.seal_pending} event(s){waited}")
        summary_lines(out, keys)
    failing = summary.uncertain and args.fail_on_uncertain
    return EXIT_UNCERTAIN if failing else 0


def _report_document(report: RecoveryReport) -> dict[str, Any]:
    return {
        "due": report.due,
        "looked_up": report.looked_up,
        "resolved": [
            {"tenant_id": tenant, "operation_id": op, "state": state}
            for tenant, op, state in report.resolved
        ],
        "still_unknown": [
            {"tenant_id": tenant, "operation_id": op} for tenant, op in report.still_unknown
        ],
        "escalated": [{"tenant_id": tenant, "operation_id": op} for tenant, op in report.escalated],
        "failed": [
            {"tenant_id": tenant, "operation_id": op, "code": code}
            for tenant, op, code in report.failed
        ],
    }


def _report_line(report: RecoveryReport) -> str:
    return (
        f"recovery pass: due {report.due}, looked up {report.looked_up}, resolved "
        f"{len(report.resolved)}, still unknown {len(report.still_unknown)}, escalated "
        f"{len(report.escalated)}, failed {len(report.failed)}"
    )


def _recover(args: argparse.Namespace, out: Output) -> int:
    positive(args.limit, "--limit")
    positive(args.interval, "--interval")
    if args.app is not None:
        ledger = load_ledger(args.app, args.db)
        try:
            return _recover_passes(args, out, lambda: ledger.recover(limit=args.limit))
        finally:
            ledger.close()
    store = open_existing(args.db)
    try:
        # It tags its events like the application: the same trail key (a bad key fails here).
        found = find_keys(store, args.db, key_dir=configured_key_dir(args))
        warn_unprotected(args.db, found)
        settings = LedgerSettings(trail_keys=found.trail_keys)
        receiver = SimulatedReceiver(
            args.receiver,
            account_id=args.account,
            endpoint=args.endpoint,
            lookup_mode=LookupMode.ANSWER,
            create=False,
        )
    except BaseException:
        store.close()
        raise
    worker = RecoveryWorker(Ledger(store, settings=settings), receiver)
    try:
        return _recover_passes(args, out, lambda: worker.run_once(limit=args.limit))
    finally:
        store.close()
        receiver.close()


def _recover_passes(
    args: argparse.Namespace, out: Output, recover: Callable[[], RecoveryReport]
) -> int:
    try:
        while True:
            report = recover()
            if out.json_mode:
                out.json(_report_document(report))
            else:
                out.line(_report_line(report))
                for tenant, op, code in report.failed:
                    out.line(f"failed: {tenant}/{op} [{code}]")
            if args.once:
                return 1 if report.failed else 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        if not out.json_mode:
            out.line("stopped")
        return 0
