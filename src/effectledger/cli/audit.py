"""``audit``: read the trail, explain it, show checkpoints and verify bundles.

The commands that keep the log (keygen, seal, rotate-key, export, prove) live in
:mod:`effectledger.cli.audit_log`; this module adds the ``audit`` group and the reading ones.
"""

from __future__ import annotations

import argparse
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

from effectledger.audit.bundles.reader import read_events
from effectledger.audit.bundles.verify import VerificationReport, verify_bundle
from effectledger.audit.explain import explain, explain_stored
from effectledger.audit.keys.files import parse_verifiers
from effectledger.audit.log.origins import origin_for
from effectledger.audit.witnessing.reading import latest_checkpoint, operation_events
from effectledger.cli import audit_log, trail_keys
from effectledger.cli.ledger import OPERATOR, operation_document
from effectledger.cli.options import (
    Commands,
    add_db,
    add_json,
    add_wide,
    open_existing,
    read_text_file,
)
from effectledger.cli.output import Output, jsonable
from effectledger.cli.protection import add_key_dir, found_trail_keys
from effectledger.errors import ExportFailed, InvalidInput, NotFound
from effectledger.events.authentication import TrailKeys
from effectledger.events.chain import verify_chain
from effectledger.ledger import Ledger
from effectledger.model.operations import AuditEvent, Context, validate_identifier

__all__ = ["events_rows", "register"]

MAX_FINDINGS_SHOWN = 50


def register(commands: Commands) -> None:
    """Add the ``audit`` group and its sub-commands."""
    audit = commands.add_parser(
        "audit",
        help="read, seal, export, verify and explain the audit trail",
        description="The audit trail's evidence: hash-chained events, per-tenant Merkle logs "
        "with signed checkpoints, bundles a reviewer verifies offline. Commands given --db "
        "open an existing ledger only.",
    )
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")

    trail = actions.add_parser(
        "trail",
        help="print one operation's audit trail",
        description="Print the operation's events and verify its hash chain up to the head "
        "the operation row records.",
    )
    add_db(trail)
    trail.add_argument("--tenant", required=True, help="tenant id")
    trail.add_argument("operation_id", help="the operation")
    add_json(trail)
    add_wide(trail)
    trail.set_defaults(handler=_trail)

    audit_log.register(actions)
    trail_keys.register(actions)

    checkpoint = actions.add_parser(
        "checkpoint",
        help="print a tenant's latest signed checkpoint",
        description="Print the latest signed checkpoint so a reviewer can keep it and later "
        "check that history only grew (verify --checkpoint).",
    )
    add_db(checkpoint)
    checkpoint.add_argument("--tenant", required=True, help="tenant id")
    checkpoint.add_argument("--out", type=Path, help="write it to this file instead")
    add_json(checkpoint)
    checkpoint.set_defaults(handler=_checkpoint)

    verify = actions.add_parser(
        "verify",
        help="verify a bundle offline",
        description="Check a bundle's signatures, consistency, hash chains and Merkle roots "
        "with no database, naming every finding by a stable code.",
    )
    verify.add_argument("--bundle", type=Path, required=True, help="the bundle or receipt file")
    verify.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="VERIFIER_KEY",
        help="a trusted verifier key string (repeat for several)",
    )
    verify.add_argument(
        "--checkpoint",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a signed checkpoint kept from earlier that the bundle must extend (repeatable)",
    )
    verify.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="processes scanning a log bundle (1: serial; default: up to the CPU count for a "
        "bundle of 16 MiB or more, else 1); the report is the same whatever N",
    )
    _witness_options(verify)
    pin = verify.add_mutually_exclusive_group()
    pin.add_argument("--tenant", help="require the bundle to be this tenant's log")
    pin.add_argument("--origin", help="require the bundle to be the log of this origin")
    add_json(verify)
    verify.set_defaults(handler=_verify)

    explain_ = actions.add_parser(
        "explain",
        help="explain an operation in plain language, citing its events",
        description="Tell what the audit trail says happened to one operation; every sentence "
        "cites the event it rests on. Reads the database (its hash chain verified, and every "
        "event's trail tag when the trail key is found: $EFFECTLEDGER_TRAIL_KEY or the key "
        "directory), or a bundle verified first.",
    )
    add_db(explain_)
    explain_.add_argument("--tenant", help="tenant id (required with --db)")
    add_key_dir(explain_)
    explain_.add_argument("--bundle", type=Path, help="explain from this bundle instead")
    explain_.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VERIFIER_KEY",
        help="with --bundle: a trusted verifier key string (repeatable)",
    )
    _witness_options(explain_)
    explain_.add_argument("operation_id", help="the operation")
    add_json(explain_)
    explain_.set_defaults(handler=_explain)


def _witness_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--witness-key",
        action="append",
        default=[],
        metavar="WITNESS_KEY",
        help="a witness verifier key whose cosignature the latest checkpoint must carry "
        "(repeatable)",
    )
    parser.add_argument(
        "--witnesses",
        type=int,
        metavar="N",
        help="how many of the given witnesses must have cosigned (default: all of them)",
    )
    parser.add_argument(
        "--max-age",
        type=_duration,
        metavar="DURATION",
        help="freshness: the required cosignatures must be at most this old (e.g. 900s, 30m, "
        "6h, 2d; needs --witness-key), else cosignature_stale",
    )


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> timedelta:
    """A duration as ``<number>[s|m|h|d]`` (seconds without a unit), greater than zero."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:], 0)
    number = value[:-1] if unit else value
    try:
        amount = float(number) * (unit or 1)
    except ValueError:
        amount = math.nan
    if not math.isfinite(amount) or amount <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (a number greater than 0 with s, m, h or d)"
        )
    return timedelta(seconds=amount)


def _witness_arguments(args: argparse.Namespace) -> dict[str, Any]:
    if args.witnesses is not None and not args.witness_key:
        raise InvalidInput("--witnesses needs --witness-key")
    if args.max_age is not None and not args.witness_key:
        raise InvalidInput(
            "--max-age needs --witness-key: only a witness's cosignature says when the log was "
            "last seen",
            field="max_age",
        )
    return {"witness_keys": args.witness_key, "witnesses": args.witnesses, "max_age": args.max_age}


def events_rows(out: Output, events: list[AuditEvent]) -> list[tuple[str, ...]]:
    """The rows of an audit trail table: sequence, event, actor, attempt, evidence."""
    return [
        (
            str(event.sequence),
            event.event_type,
            event.actor,
            out.short(event.attempt_id),
            out.short_reference(event.evidence_reference),
        )
        for event in events
    ]


EVENT_COLUMNS = ("seq", "event", "actor", "attempt", "evidence")


def _trail(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(args.db)
    try:
        ledger = Ledger(store)
        context = Context(tenant_id=args.tenant, actor_id=OPERATOR)
        operation = ledger.get(context, args.operation_id)
        events = ledger.events(context, args.operation_id)
    finally:
        store.close()
    verify_chain(events, head=operation.last_event_hash)
    if out.json_mode:
        out.json(
            {
                "operation": operation_document(operation),
                "events": events,
                "chain_verified": True,
            }
        )
        return 0
    out.table(
        f"Audit trail of {out.short(args.operation_id)}",
        EVENT_COLUMNS,
        events_rows(out, events),
        no_wrap=("event", "actor", "attempt"),
    )
    out.line(f"Hash chain verified over {len(events)} events; state {operation.state}.")
    return 0


def _checkpoint(args: argparse.Namespace, out: Output) -> int:
    tenant_id = validate_identifier(args.tenant, "tenant_id")
    store = open_existing(args.db)
    try:
        stored = latest_checkpoint(store, tenant_id)
    finally:
        store.close()
    if stored is None:
        raise NotFound(f"{tenant_id}'s log has no checkpoint yet")
    if args.out is not None:
        try:
            Path(args.out).write_text(stored.note, "utf-8")
        except OSError as exc:
            raise ExportFailed(f"cannot write {args.out}: {exc.strerror}") from exc
    if out.json_mode:
        out.json(
            {
                "tenant_id": stored.tenant_id,
                "seq": stored.seq,
                "size": stored.size,
                "root_hash": stored.root_hash,
                "note": stored.note,
                "path": None if args.out is None else str(args.out),
            }
        )
    elif args.out is None:
        out.lines(stored.note)
    else:
        out.line(
            f"checkpoint #{stored.seq} of {tenant_id} (size {stored.size}) written to {args.out}"
        )
    return 0


def _print_report(out: Output, report: VerificationReport) -> None:
    if out.json_mode:
        out.json({**jsonable(report), "ok": report.ok})
        return
    for restore in report.restores:
        lost = (
            f"; {restore.lost} entries it had signed are not in this log"
            if restore.lost
            else "; it had signed another tree at that size"
            if restore.forked
            else ""
        )
        out.line(
            f"restored from a backup: {restore.origin} goes on from {restore.size} leaves of "
            f"{restore.previous_origin}, which had signed {restore.previous_size}{lost} "
            f"(reason: {restore.reason})",
            err=True,
        )
    for finding in report.findings[:MAX_FINDINGS_SHOWN]:
        out.line(f"finding [{finding.code}]: {finding.message}", err=True)
    hidden = len(report.findings) - MAX_FINDINGS_SHOWN
    if hidden > 0:
        out.line(f"... and {hidden} more finding(s)", err=True)
    if report.ok:
        what = "log" if report.kind == "log" else "receipt"
        out.line(
            f"verified {what} of tenant {report.tenant_id}: {report.events} event(s) of "
            f"{report.operations} operation(s), {report.checkpoints} checkpoint(s), tree size "
            f"{report.size}, root {report.root_hash}, signed by {', '.join(report.signers)}"
        )


def _bundle_file(path: Path) -> None:
    if not path.is_file():
        raise InvalidInput(f"no bundle file {path}")


def _verify(args: argparse.Namespace, out: Output) -> int:
    witnessing = _witness_arguments(args)  # a contradictory flag before any file is read
    kept = [read_text_file(Path(path), "checkpoint file") for path in args.checkpoint]
    _bundle_file(args.bundle)
    origin = origin_for(args.tenant) if args.tenant is not None else args.origin
    report = verify_bundle(
        args.bundle,
        parse_verifiers(args.key),
        trusted_checkpoints=kept,
        origin=origin,
        jobs=args.jobs,
        **witnessing,
    )
    _print_report(out, report)
    report.raise_for_findings()
    return 0


def _explain(args: argparse.Namespace, out: Output) -> int:
    validate_identifier(args.operation_id, "operation_id")
    trail_keys: TrailKeys | None = None
    if args.bundle is not None:
        if not args.key:
            raise InvalidInput("explaining from a bundle needs --key to verify it first")
        _bundle_file(args.bundle)
        report = verify_bundle(args.bundle, parse_verifiers(args.key), **_witness_arguments(args))
        if not (out.json_mode and report.ok):
            _print_report(out, report)
        report.raise_for_findings()
        events = read_events(args.bundle, args.operation_id)
        if not events:
            raise NotFound(f"the bundle holds no event of operation {args.operation_id}")
    else:
        if not args.tenant:
            raise InvalidInput("explain needs --tenant with --db (or --bundle)")
        if args.witness_key or args.witnesses is not None or args.max_age is not None:
            raise InvalidInput("--witness-key, --witnesses and --max-age check a bundle (--bundle)")
        trail_keys = found_trail_keys(args)
        store = open_existing(args.db)
        try:
            # Verifies the whole chain up to the row's latest hash, and every event's trail tag,
            # before any text is made.
            sentences = explain_stored(store, args.tenant, args.operation_id, trail_keys=trail_keys)
            events = operation_events(store, args.tenant, args.operation_id)
        finally:
            store.close()
    if args.bundle is not None:
        sentences = explain(events)
    if out.json_mode:
        out.json(
            {
                "operation_id": args.operation_id,
                "sentences": sentences,
                "events": len(events),
                "chain_verified": True,
                "tags_verified": args.bundle is None and trail_keys is not None,
            }
        )
        return 0
    for sentence in sentences:
        out.line(sentence.render())
    if args.bundle is None and trail_keys is not None:
        out.line(f"hash chain and trail tags verified over {len(events)} event(s)")
    elif args.bundle is None:
        out.line(
            f"hash chain verified over {len(events)} event(s); trail tags not checked (no "
            "trail key found)"
        )
    return 0
