"""The evidence sub-commands of ``effectledger audit``: keygen, seal, rotate-key, checkpoint,
export, prove, verify and explain (``audit trail`` lives in :mod:`effectledger.cli`).

Every command prints plain text; failures raise an :class:`~effectledger.errors.EffectLedgerError`
that the command line prints as ``error [code]: message`` with exit status 1. ``verify`` first
prints each finding as ``finding [code]: message``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from effectledger.audit.bundle import read_events
from effectledger.audit.explain import explain, explain_stored, render
from effectledger.audit.export import DEFAULT_EXPORT_BATCH, export_log, prove_events
from effectledger.audit.keys import KEY_ENV, load_signer, new_key_pair, parse_verifiers
from effectledger.audit.sealer import DEFAULT_BATCH_SIZE, LogSealer, SealReport
from effectledger.audit.verify import VerificationReport, verify_bundle
from effectledger.errors import ExportFailed, InvalidInput, LogKeyInvalid, NotFound
from effectledger.model import validate_identifier
from effectledger.store import Store, open_store

__all__ = ["EVIDENCE_COMMANDS", "add_evidence_commands", "run_evidence_command", "seal_loop"]

EVIDENCE_COMMANDS = (
    "keygen",
    "seal",
    "rotate-key",
    "checkpoint",
    "export",
    "prove",
    "verify",
    "explain",
)


def _key_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key-file",
        type=Path,
        help=f"file holding the log's signer key string (default: ${KEY_ENV})",
    )


def add_evidence_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    db_argument: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Add the evidence sub-commands to the ``audit`` command's sub-parsers."""
    keygen = commands.add_parser(
        "keygen",
        help="create a log signing key and print its verifier key",
        description="Print a new signer key string (secret) and its verifier key string.",
    )
    keygen.add_argument("--name", default="effectledger", help="key name (default %(default)s)")
    keygen.add_argument(
        "--out", type=Path, help="write the signer key to this new file (mode 600) instead"
    )

    seal = commands.add_parser(
        "seal",
        help="give committed events log positions and sign checkpoints",
        description="Seal pending audit events into each tenant's Merkle log, one signed "
        "checkpoint per batch, and report how long events waited.",
    )
    db_argument(seal)
    seal.add_argument("--tenant", help="seal only this tenant (default: every tenant)")
    _key_file(seal)
    seal.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help="events per batch and checkpoint (default %(default)s)",
    )
    seal.add_argument("--loop", action="store_true", help="keep sealing until interrupted")
    seal.add_argument(
        "--max-delay",
        type=float,
        default=5.0,
        help="with --loop: seconds an event may wait to be sealed; passes run twice as often "
        "and a longer wait is reported (default %(default)s)",
    )

    rotate = commands.add_parser(
        "rotate-key",
        help="hand a log over to a new signing key",
        description="Sign each log's current checkpoint with the old and the new key together "
        "(a rotation checkpoint); later seals need the new key.",
    )
    db_argument(rotate)
    rotate.add_argument("--tenant", help="rotate only this tenant's log (default: every log)")
    _key_file(rotate)
    rotate.add_argument(
        "--new-key-file", type=Path, required=True, help="file holding the new signer key string"
    )

    checkpoint = commands.add_parser(
        "checkpoint",
        help="print a tenant's latest signed checkpoint",
        description="Print the latest signed checkpoint so a reviewer can keep it and later "
        "check that history only grew (verify --checkpoint).",
    )
    db_argument(checkpoint)
    checkpoint.add_argument("--tenant", required=True, help="tenant id")
    checkpoint.add_argument("--out", type=Path, help="write it to this file instead")

    export = commands.add_parser(
        "export",
        help="append a tenant's log to a bundle file, resumably",
        description="Export the tenant's sealed events, checkpoints and consistency proofs to "
        "a JSON Lines bundle; a durable cursor makes a rerun continue exactly where the last "
        "durable batch ended.",
    )
    db_argument(export)
    export.add_argument("--tenant", required=True, help="tenant id")
    export.add_argument("--out", type=Path, required=True, help="the bundle file")
    export.add_argument(
        "--exporter", help="name of the durable cursor (default: file:<absolute path>)"
    )
    export.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_EXPORT_BATCH,
        help="events per durable batch (default %(default)s)",
    )

    prove = commands.add_parser(
        "prove",
        help="write a receipt proving events are in the log",
        description="Write a receipt bundle: the latest signed checkpoint and each event with "
        "its inclusion proof.",
    )
    db_argument(prove)
    prove.add_argument("--tenant", required=True, help="tenant id")
    prove.add_argument("--out", type=Path, required=True, help="the receipt file")
    prove.add_argument(
        "--force", action="store_true", help="overwrite the receipt file if it exists"
    )
    prove.add_argument("event_ids", nargs="+", metavar="EVENT_ID", help="events to prove")

    verify = commands.add_parser(
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

    explain_ = commands.add_parser(
        "explain",
        help="explain an operation in plain language, citing its events",
        description="Tell what the audit trail says happened to one operation; every sentence "
        "cites the event it rests on. Reads the database, or a bundle verified first.",
    )
    db_argument(explain_)
    explain_.add_argument("--tenant", help="tenant id (required with --db)")
    explain_.add_argument("--bundle", type=Path, help="explain from this bundle instead")
    explain_.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VERIFIER_KEY",
        help="with --bundle: a trusted verifier key string (repeatable)",
    )
    explain_.add_argument("operation_id", help="the operation")


def _seconds(delta: timedelta | None) -> str:
    return "-" if delta is None else f"{delta.total_seconds():.1f} s"


def _seal_line(report: SealReport) -> str:
    return (
        f"{report.tenant_id}: sealed {report.sealed} event(s) in {report.checkpoints} "
        f"checkpoint(s), longest wait {_seconds(report.max_delay)}; log size {report.size}, "
        f"checkpoint #{report.checkpoint_seq}; pending {report.pending}, oldest "
        f"{_seconds(report.oldest_pending_age)}"
    )


def seal_loop(
    sealer: LogSealer,
    tenant_id: str | None,
    *,
    max_delay: timedelta,
    out: TextIO,
    sleep: Callable[[float], object] = time.sleep,
    passes: int | None = None,
) -> int:
    """Seal every ``max_delay / 2`` and report each pass; return how many passes found a wait
    longer than ``max_delay`` (an event waited too long, or one is still waiting too long).
    """
    if max_delay <= timedelta(0):
        raise InvalidInput("--max-delay must be positive")
    late = done = 0
    while passes is None or done < passes:
        reports = [sealer.seal(tenant_id)] if tenant_id else sealer.seal_all()
        for report in reports:
            print(_seal_line(report), file=out, flush=True)
            waited = [d for d in (report.max_delay, report.oldest_pending_age) if d is not None]
            if any(delay > max_delay for delay in waited):
                late += 1
                print(
                    f"{report.tenant_id}: an event waited longer than the maximum delay of "
                    f"{_seconds(max_delay)}",
                    file=out,
                    flush=True,
                )
        done += 1
        if passes is None or done < passes:
            sleep(max_delay.total_seconds() / 2)
    return late


def _keygen(args: argparse.Namespace) -> int:
    signer_key, verifier_key = new_key_pair(args.name)
    if args.out is None:
        print(f"signer key (secret): {signer_key}")
        print(f"verifier key: {verifier_key}")
        return 0
    try:
        descriptor = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise LogKeyInvalid(f"cannot create {args.out}: {exc.strerror}") from exc
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(signer_key + "\n")
    print(verifier_key)
    return 0


MAX_FINDINGS_SHOWN = 50


def _print_report(report: VerificationReport) -> None:
    for finding in report.findings[:MAX_FINDINGS_SHOWN]:
        print(f"finding [{finding.code}]: {finding.message}", file=sys.stderr)
    hidden = len(report.findings) - MAX_FINDINGS_SHOWN
    if hidden > 0:
        print(f"... and {hidden} more finding(s)", file=sys.stderr)
    if report.ok:
        what = "log" if report.kind == "log" else "receipt"
        print(
            f"verified {what} of tenant {report.tenant_id}: {report.events} event(s) of "
            f"{report.operations} operation(s), {report.checkpoints} checkpoint(s), tree size "
            f"{report.size}, root {report.root_hash}, signed by {', '.join(report.signers)}"
        )


def _verify(args: argparse.Namespace) -> int:
    kept: list[str] = []
    for path in args.checkpoint:
        try:
            kept.append(Path(path).read_text("utf-8"))
        except OSError as exc:
            raise InvalidInput(f"cannot read checkpoint file {path}: {exc.strerror}") from exc
    _readable(args.bundle)
    report = verify_bundle(args.bundle, parse_verifiers(args.key), trusted_checkpoints=kept)
    _print_report(report)
    report.raise_for_findings()
    return 0


def _readable(path: Path) -> None:
    if not path.is_file():
        raise InvalidInput(f"no bundle file {path}")


def _explain(args: argparse.Namespace) -> int:
    validate_identifier(args.operation_id, "operation_id")
    if args.bundle is not None:
        if not args.key:
            raise InvalidInput("explaining from a bundle needs --key to verify it first")
        _readable(args.bundle)
        report = verify_bundle(args.bundle, parse_verifiers(args.key))
        _print_report(report)
        report.raise_for_findings()
        events = read_events(args.bundle, args.operation_id)
        if not events:
            raise NotFound(f"the bundle holds no event of operation {args.operation_id}")
        print(render(explain(events)), end="")
        return 0
    if not args.tenant:
        raise InvalidInput("explain needs --tenant with --db (or --bundle)")
    store = open_store(args.db)
    try:
        sentences = explain_stored(store, args.tenant, args.operation_id)  # verifies first
    finally:
        store.close()
    print(render(sentences), end="")
    cited = len({sentence.event_id for sentence in sentences})
    print(f"hash chain verified over {cited} event(s)")
    return 0


def _sealer(args: argparse.Namespace, batch_size: int = DEFAULT_BATCH_SIZE) -> LogSealer:
    return LogSealer(open_store(args.db), load_signer(args.key_file), batch_size=batch_size)


def run_evidence_command(args: argparse.Namespace) -> int:
    """Run one evidence sub-command; return its exit status."""
    command = args.audit_command
    if command == "keygen":
        return _keygen(args)
    if command == "verify":
        return _verify(args)
    if command == "explain":
        return _explain(args)
    if command in ("seal", "rotate-key"):
        sealer = _sealer(args, getattr(args, "batch_size", DEFAULT_BATCH_SIZE))
        try:
            if command == "rotate-key":
                return _rotate(sealer, args)
            if args.loop:
                try:
                    seal_loop(
                        sealer,
                        args.tenant,
                        max_delay=timedelta(seconds=args.max_delay),
                        out=sys.stdout,
                    )
                except KeyboardInterrupt:
                    print("stopped")
                return 0
            reports = [sealer.seal(args.tenant)] if args.tenant else sealer.seal_all()
            for report in reports:
                print(_seal_line(report))
            return 0
        finally:
            sealer.store.close()
    store = open_store(args.db)
    try:
        if command == "checkpoint":
            return _checkpoint(store, args)
        if command == "export":
            result = export_log(
                store,
                args.tenant,
                args.out,
                exporter_id=args.exporter,
                batch_size=args.batch_size,
            )
            print(
                f"exported {result.events} event(s) and {result.checkpoints} checkpoint(s) of "
                f"{result.tenant_id} to {result.path}; next position {result.position}"
                + (
                    f"; resumed, skipped {result.duplicates_skipped} line(s) already written"
                    if result.resumed
                    else ""
                )
            )
            return 0
        if command == "prove":
            proved = prove_events(
                store, args.tenant, args.event_ids, args.out, overwrite=args.force
            )
            print(
                f"proved {proved.events} event(s) in {proved.tenant_id}'s log of size "
                f"{proved.size} (checkpoint #{proved.checkpoint_seq}) to {proved.path}"
            )
            return 0
    finally:
        store.close()
    raise AssertionError(f"unhandled audit command {command}")  # pragma: no cover


def _rotate(sealer: LogSealer, args: argparse.Namespace) -> int:
    new_signer = load_signer(args.new_key_file)
    tenants: Sequence[str] = [args.tenant] if args.tenant else sealer.tenants()
    for tenant_id in tenants:
        stored = sealer.rotate_key(tenant_id, new_signer)
        if stored is None:
            print(f"{tenant_id}: no checkpoint yet; its first seal can use the new key")
        else:
            print(
                f"{tenant_id}: rotation checkpoint #{stored.seq} at size {stored.size} signed "
                f"by {sealer.signer.name} and {new_signer.name}"
            )
    return 0


def _checkpoint(store: Store, args: argparse.Namespace) -> int:
    row = store.one("log_checkpoint_latest", {"tenant_id": args.tenant})
    if row is None:
        raise NotFound(f"{args.tenant}'s log has no checkpoint yet")
    if args.out is None:
        print(row["note"], end="")
        return 0
    try:
        Path(args.out).write_text(row["note"], "utf-8")
    except OSError as exc:
        raise ExportFailed(f"cannot write {args.out}: {exc.strerror}") from exc
    print(f"checkpoint #{row['seq']} of {args.tenant} (size {row['size']}) written to {args.out}")
    return 0
