"""The ``audit`` commands that keep the log: keygen, seal, rotate-key, restore, export, prove.

Sealing, rotation, export and proofs are library calls (:mod:`effectledger.audit`); these
handlers parse arguments, open an existing ledger, and print what the calls report.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from effectledger.audit.bundles.export import DEFAULT_EXPORT_BATCH, export_log, prove_events
from effectledger.audit.keys.files import KEY_ENV, load_signer, new_key_pair, write_signer_key
from effectledger.audit.sealing.memory import SealerMemory
from effectledger.audit.sealing.schedule import seal_periodically
from effectledger.audit.sealing.sealer import DEFAULT_BATCH_SIZE, LogSealer, SealReport
from effectledger.audit.witnessing.submit import parse_witnesses
from effectledger.cli.options import Commands, add_db, add_json, open_existing, positive
from effectledger.cli.output import Output
from effectledger.cli.protection import add_key_dir, found_trail_keys, log_signer, sealer_memory

__all__ = ["LOOP_MIN_BATCH", "register", "seal_line"]

LOOP_MIN_BATCH = 1000
"""Events a looping sealer gathers per checkpoint (unless the oldest waited half the delay)."""


def _key_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key-file",
        type=Path,
        help=f"file holding the log's signer key string (default: ${KEY_ENV}, else the "
        "key directory's log.key)",
    )
    add_key_dir(parser)


def register(actions: Commands) -> None:
    """Add keygen, seal, rotate-key, restore, export and prove to the ``audit`` group."""
    keygen = actions.add_parser(
        "keygen",
        help="create a log signing key and print its verifier key",
        description="Print a new signer key string (secret) and its verifier key string.",
    )
    keygen.add_argument("--name", default="effectledger", help="key name (default %(default)s)")
    keygen.add_argument(
        "--out", type=Path, help="write the signer key to this new file (mode 600) instead"
    )
    add_json(keygen)
    keygen.set_defaults(handler=_keygen)

    seal = actions.add_parser(
        "seal",
        help="give committed events log positions and sign checkpoints",
        description="Seal pending audit events into each tenant's Merkle log, one signed "
        "checkpoint per batch, and report how long events waited from being recorded to "
        "being sealed.",
    )
    add_db(seal)
    seal.add_argument("--tenant", help="seal only this tenant (default: every tenant)")
    _key_file(seal)
    memory = seal.add_mutually_exclusive_group()
    memory.add_argument(
        "--memory",
        type=Path,
        help="file where the sealer keeps the last tree it signed per log, outside the "
        "database: an emptied, rolled-back or forked log is refused before any signature "
        "(default: sealer-memory.json in the key directory, the worker's too)",
    )
    memory.add_argument(
        "--no-memory",
        action="store_true",
        help="keep no memory: trust the database's own latest checkpoint",
    )
    seal.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="URL=KEY",
        help="a witness that cosigns each checkpoint: its URL, '=', its verifier key "
        "(repeatable); one that is down is asked again on the next pass, a refusal stops "
        "the sealer",
    )
    seal.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help="events per batch and checkpoint (default %(default)s)",
    )
    seal.add_argument(
        "--min-batch",
        type=int,
        help="a checkpoint needs at least this many waiting events, unless the oldest has "
        "waited half the maximum delay (default: 1000 with --loop, else 1)",
    )
    seal.add_argument("--loop", action="store_true", help="keep sealing until interrupted")
    seal.add_argument(
        "--max-delay",
        type=float,
        default=5.0,
        help="with --loop: seconds an event may wait to be sealed; passes run twice as often "
        "and a longer wait is reported (default %(default)s)",
    )
    add_json(seal)
    seal.set_defaults(handler=_seal)

    rotate = actions.add_parser(
        "rotate-key",
        help="hand a log over to a new signing key",
        description="Sign each log's current checkpoint with the old and the new key together "
        "(a rotation checkpoint); later seals need the new key.",
    )
    add_db(rotate)
    rotate.add_argument("--tenant", help="rotate only this tenant's log (default: every log)")
    _key_file(rotate)
    rotate.add_argument(
        "--new-key-file", type=Path, required=True, help="file holding the new signer key string"
    )
    add_json(rotate)
    rotate.set_defaults(handler=_rotate)

    restore = actions.add_parser(
        "restore",
        help="go on from a log restored from a backup (a new log segment)",
        description="After the database was restored from an older copy, the sealer and the "
        "witnesses refuse the rolled-back log. This signs its restored head as the first "
        "checkpoint of a new log segment (a new origin), stating the segment it continues, "
        "the last tree the sealer's memory says that segment signed, and your reason; the "
        "witnesses cosign the new segment and sealing goes on in it. Run it once per tenant, "
        "with the worker and every sealer stopped (docs/operating.md, 'Restoring from a "
        "backup').",
    )
    add_db(restore)
    restore.add_argument("--tenant", required=True, help="the tenant whose log was restored")
    restore.add_argument(
        "--reason",
        required=True,
        help="why, in one line: it is signed into the log and shown to every reviewer",
    )
    _key_file(restore)
    restore.add_argument(
        "--memory",
        type=Path,
        help="the sealer's memory file (default: sealer-memory.json in the key directory): "
        "what the old segment last signed is read from it, and the old segment is closed there",
    )
    restore.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="URL=KEY",
        help="a witness to cosign the new segment at once (repeatable)",
    )
    add_json(restore)
    restore.set_defaults(handler=_restore, no_memory=False)

    export = actions.add_parser(
        "export",
        help="append a tenant's log to a bundle file, resumably",
        description="Export the tenant's sealed events, checkpoints and consistency proofs to "
        "a JSON Lines bundle; a durable cursor makes a rerun continue exactly where the last "
        "durable batch ended.",
    )
    add_db(export)
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
    add_json(export)
    export.set_defaults(handler=_export)

    prove = actions.add_parser(
        "prove",
        help="write a receipt proving events are in the log",
        description="Write a receipt bundle: the latest signed checkpoint and each event with "
        "its inclusion proof.",
    )
    add_db(prove)
    prove.add_argument("--tenant", required=True, help="tenant id")
    prove.add_argument("--out", type=Path, required=True, help="the receipt file")
    prove.add_argument(
        "--force", action="store_true", help="overwrite the receipt file if it exists"
    )
    prove.add_argument("event_ids", nargs="+", metavar="EVENT_ID", help="events to prove")
    add_json(prove)
    prove.set_defaults(handler=_prove)


def _seconds(delta: timedelta | None) -> str:
    return "-" if delta is None else f"{delta.total_seconds():.1f} s"


def seal_line(report: SealReport) -> str:
    """One tenant's seal report as a line of text (and the witnesses that did not answer)."""
    line = (
        f"{report.tenant_id}: sealed {report.sealed} event(s) in {report.checkpoints} "
        f"checkpoint(s), longest wait from recording to sealing {_seconds(report.max_delay)}; "
        f"log size {report.size}, checkpoint #{report.checkpoint_seq}; pending "
        f"{report.pending}, oldest waiting {_seconds(report.oldest_pending_age)}"
    )
    if report.cosigned:
        line += f"; {report.cosigned} witness cosignature(s) stored"
    for url in report.witnesses_unreachable:
        line += f"\n{report.tenant_id}: witness {url} did not answer; asked again next pass"
    return line


def _keygen(args: argparse.Namespace, out: Output) -> int:
    signer_key, verifier_key = new_key_pair(args.name)
    if args.out is not None:
        write_signer_key(args.out, signer_key)
    if out.json_mode:
        document: dict[str, Any] = {"verifier_key": verifier_key}
        if args.out is None:
            document["signer_key"] = signer_key
        else:
            document["signer_key_file"] = str(args.out)
        out.json(document)
    elif args.out is None:
        out.line(f"signer key (secret): {signer_key}")
        out.line(f"verifier key: {verifier_key}")
    else:
        out.line(verifier_key)
    return 0


def _sealer(args: argparse.Namespace, batch_size: int = DEFAULT_BATCH_SIZE) -> LogSealer:
    signer = log_signer(args)  # a bad key fails before the store is opened
    path = sealer_memory(args)
    memory = None if path is None else SealerMemory(path)
    trail_keys = found_trail_keys(args)  # only events the trail key tagged are sealed
    looping = getattr(args, "loop", False)
    min_batch = getattr(args, "min_batch", None) or (
        min(LOOP_MIN_BATCH, batch_size) if looping else 1
    )
    max_wait = timedelta(seconds=args.max_delay / 2) if looping else None
    witnesses = parse_witnesses(getattr(args, "witness", []))  # bad input before the store
    return LogSealer(
        open_existing(args.db),
        signer,
        batch_size=batch_size,
        memory=memory,
        min_batch=min_batch,
        max_wait=max_wait,
        witnesses=witnesses,
        trail_keys=trail_keys,
    )


def _seal(args: argparse.Namespace, out: Output) -> int:
    positive(args.batch_size, "--batch-size")
    if args.min_batch is not None:
        positive(args.min_batch, "--min-batch")
    if args.loop:
        positive(args.max_delay, "--max-delay")
    sealer = _sealer(args, args.batch_size)
    try:
        if not args.loop:
            reports = [sealer.seal(args.tenant)] if args.tenant else sealer.seal_all()
            if out.json_mode:
                out.json({"reports": reports})
            else:
                for report in reports:
                    out.line(seal_line(report))
            return 0
        max_delay = timedelta(seconds=args.max_delay)
        try:
            for sealed in seal_periodically(sealer, args.tenant, max_delay=max_delay):
                if out.json_mode:
                    out.json({"report": sealed.report, "late": sealed.late})
                    continue
                out.line(seal_line(sealed.report))
                if sealed.late:
                    out.line(
                        f"{sealed.report.tenant_id}: an event waited longer than the maximum "
                        f"delay of {_seconds(max_delay)}"
                    )
        except KeyboardInterrupt:
            if not out.json_mode:
                out.line("stopped")
        return 0
    finally:
        sealer.store.close()


def _rotate(args: argparse.Namespace, out: Output) -> int:
    new_signer = load_signer(args.new_key_file)
    sealer = _sealer(args)
    try:
        tenants: Sequence[str] = [args.tenant] if args.tenant else sealer.tenants()
        for tenant_id in tenants:
            stored = sealer.rotate_key(tenant_id, new_signer)
            if out.json_mode:
                out.json(
                    {
                        "tenant_id": tenant_id,
                        "rotation_checkpoint": None if stored is None else stored.seq,
                        "size": None if stored is None else stored.size,
                        "signers": [sealer.signer.name, new_signer.name],
                    }
                )
            elif stored is None:
                out.line(f"{tenant_id}: no checkpoint yet; its first seal can use the new key")
            else:
                out.line(
                    f"{tenant_id}: rotation checkpoint #{stored.seq} at size {stored.size} "
                    f"signed by {sealer.signer.name} and {new_signer.name}"
                )
        return 0
    finally:
        sealer.store.close()


def _restore(args: argparse.Namespace, out: Output) -> int:
    sealer = _sealer(args)
    try:
        stated = sealer.restore(args.tenant, args.reason)
        latest = sealer.latest_checkpoint(args.tenant)
    finally:
        sealer.store.close()
    seq = None if latest is None else latest.seq
    if out.json_mode:
        out.json({"tenant_id": args.tenant, "checkpoint_seq": seq, **stated.to_dict()})
        return 0
    out.line(
        f"{args.tenant}: restore checkpoint #{seq} starts {stated.origin} at size {stated.size}, "
        f"continuing {stated.previous_origin}"
    )
    if sealer.memory is None:
        out.line(
            f"{args.tenant}: no sealer memory: what the old segment signed after this backup is "
            "not known, and the statement says it lost nothing"
        )
    elif stated.lost or stated.forked:
        out.line(
            f"{args.tenant}: the old segment had signed {stated.previous_size} entries; "
            f"{stated.lost} are not in the restored log. Operations whose events they were may "
            "have reached their destinations: reconcile them there before the worker runs again"
        )
    else:
        out.line(f"{args.tenant}: the restored log holds everything the old segment signed")
    return 0


def _export(args: argparse.Namespace, out: Output) -> int:
    positive(args.batch_size, "--batch-size")
    store = open_existing(args.db)
    try:
        result = export_log(
            store, args.tenant, args.out, exporter_id=args.exporter, batch_size=args.batch_size
        )
    finally:
        store.close()
    if out.json_mode:
        out.json(result)
        return 0
    out.line(
        f"exported {result.events} event(s) and {result.checkpoints} checkpoint(s) of "
        f"{result.tenant_id} to {result.path}; next position {result.position}"
        + (
            f"; resumed, skipped {result.duplicates_skipped} line(s) already written"
            if result.resumed
            else ""
        )
    )
    return 0


def _prove(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(args.db)
    try:
        proved = prove_events(store, args.tenant, args.event_ids, args.out, overwrite=args.force)
    finally:
        store.close()
    if out.json_mode:
        out.json(proved)
        return 0
    out.line(
        f"proved {proved.events} event(s) in {proved.tenant_id}'s log of size "
        f"{proved.size} (checkpoint #{proved.checkpoint_seq}) to {proved.path}"
    )
    return 0
