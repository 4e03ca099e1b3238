"""The trail key's rotation on the command line: ``audit rotate-trail-key``, ``audit retag``
and ``audit drop-trail-key`` (docs/operating.md, "Rotating the trail key").

Only key ids and retirement times are printed, never a secret.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from effectledger.app.protection import drop_trail_key, find_keys, rotate_trail_key
from effectledger.cli.options import Commands, add_db, add_json, open_existing
from effectledger.cli.output import Output
from effectledger.cli.protection import add_key_dir, configured_key_dir
from effectledger.clock import SystemClock
from effectledger.errors import InvalidInput
from effectledger.events.authentication import TRAIL_KEY_ENV, TrailKeys, retirement_text
from effectledger.keyfiles import key_directory_for
from effectledger.ledger import Ledger, LedgerSettings
from effectledger.ledger.retagging import RetagReport, retag_trails, trails_needing_retag
from effectledger.ledger.trail import now_us

__all__ = ["register"]


def register(actions: Commands) -> None:
    """Add rotate-trail-key, retag and drop-trail-key to the ``audit`` group."""
    rotate = actions.add_parser(
        "rotate-trail-key",
        help="put a new trail key first in the key directory and retire the old one",
        description="Write a new current trail key into the key directory's trail.keys and "
        "retire every previous key at now + --retire-after: a retired key verifies only events "
        "recorded before its retirement. Restart every process of the deployment within that "
        "grace, then run `audit retag`, then `audit drop-trail-key`.",
    )
    add_db(rotate)
    add_key_dir(rotate)
    rotate.add_argument("--key-id", help="the new key's id (default: trail-<next number>)")
    rotate.add_argument(
        "--retire-after",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="seconds the old key still tags-and-verifies new events, while every process is "
        "restarted with the new file (default: 0, retired now)",
    )
    add_json(rotate)
    rotate.set_defaults(handler=_rotate)

    retag = actions.add_parser(
        "retag",
        help="re-tag the trails in flight under the current trail key",
        description="Check every trail that may still be dispatched or recovered (operations "
        "not final, unexpired proposals not admitted) and append to each that relies on a "
        "previous key a TrailRetagged event tagged by the current key, which vouches for the "
        "whole trail before it. Safe to run again and in several processes at once. Exits 1 "
        "when a trail could not be vouched for (it is named, with its reason).",
    )
    add_db(retag)
    add_key_dir(retag)
    retag.add_argument("--tenant", help="only this tenant's trails (default: every tenant)")
    add_json(retag)
    retag.set_defaults(handler=_retag)

    drop = actions.add_parser(
        "drop-trail-key",
        help="destroy a retired trail key once no trail in flight needs it",
        description="Remove a retired trail key from the key directory's trail.keys. Refused "
        "while a trail in flight still relies on a previous key (run `audit retag` first), "
        "unless --force.",
    )
    add_db(drop)
    add_key_dir(drop)
    drop.add_argument("key_id", help="the retired key's id")
    drop.add_argument(
        "--force",
        action="store_true",
        help="drop it even though trails in flight still rely on it (their claims are refused)",
    )
    add_json(drop)
    drop.set_defaults(handler=_drop)


def _directory(args: argparse.Namespace) -> Path:
    if os.environ.get(TRAIL_KEY_ENV, "").strip():
        raise InvalidInput(
            f"the trail keys come from ${TRAIL_KEY_ENV}: rotate them where that variable is "
            "set (a new first line, the old one with retired=<time>), or unset it to use the "
            "key directory",
            field="key_dir",
        )
    return key_directory_for(args.db, configured_key_dir(args))


def _key_document(keys: TrailKeys) -> list[dict[str, Any]]:
    return [
        {
            "key_id": key.key_id,
            "current": key is keys.current,
            "retired": None if key.retired_us is None else retirement_text(key.retired_us),
        }
        for key in keys.keys
    ]


def _print_keys(out: Output, keys: TrailKeys) -> None:
    for key in keys.keys:
        if key is keys.current:
            out.line(f"  {key.key_id}: current (tags new events)")
        elif key.retired_us is None:
            out.line(f"  {key.key_id}: previous, not retired (verifies every event it tagged)")
        else:
            out.line(
                f"  {key.key_id}: retired at {retirement_text(key.retired_us)} (verifies only "
                "events recorded before)"
            )


def _rotate(args: argparse.Namespace, out: Output) -> int:
    if not args.retire_after >= 0:
        raise InvalidInput("--retire-after must be 0 or more", field="retire_after")
    directory = _directory(args)
    open_existing(args.db).close()  # the ledger exists: a typo in --db changes no key
    _, after = rotate_trail_key(
        directory,
        now_us=now_us(SystemClock()),
        retire_after_us=int(args.retire_after * 1_000_000),
        key_id=args.key_id,
    )
    if out.json_mode:
        out.json({"key_dir": str(directory), "keys": _key_document(after)})
        return 0
    out.line(f"trail keys in {directory / 'trail.keys'} (back the directory up):")
    _print_keys(out, after)
    out.line(
        "next: restart every process of the deployment, then `effectledger audit retag`, then "
        "`effectledger audit drop-trail-key <old id>`"
    )
    return 0


def _retag_report(args: argparse.Namespace, out: Output) -> RetagReport:
    store = open_existing(args.db)
    try:
        found = find_keys(store, args.db, key_dir=configured_key_dir(args))
        if found.trail_keys is None:
            raise InvalidInput(
                "the ledger has no trail key: there is nothing to re-tag with",
                field="key_dir",
            )
        ledger = Ledger(store, settings=LedgerSettings(trail_keys=found.trail_keys))

        def progress(done: int, total: int) -> None:
            if not out.json_mode:
                out.line(f"retag: {done:,} of {total:,} trails checked", err=True)

        return retag_trails(ledger, tenant_id=args.tenant, progress=progress)
    finally:
        store.close()


def _retag(args: argparse.Namespace, out: Output) -> int:
    report = _retag_report(args, out)
    if out.json_mode:
        out.json(
            {
                "trails": report.trails,
                "retagged": len(report.retagged),
                "current": report.current,
                "final": report.final,
                "refused": [
                    {"tenant_id": tenant, "operation_id": op, "reason": reason}
                    for tenant, op, reason in report.refused
                ],
            }
        )
    else:
        out.line(
            f"retag: {report.trails} trails in flight, {len(report.retagged)} re-tagged, "
            f"{report.current} already under the current key, {report.final} finished, "
            f"{len(report.refused)} refused"
        )
        for tenant, op, reason in report.refused:
            out.line(f"refused: {tenant}/{op} [{reason}]")
    return 0 if report.ok else 1


def _drop(args: argparse.Namespace, out: Output) -> int:
    directory = _directory(args)
    if not args.force:
        store = open_existing(args.db)
        try:
            found = find_keys(store, args.db, key_dir=configured_key_dir(args))
            keys = found.trail_keys
            if keys is not None:
                pending = trails_needing_retag(
                    Ledger(store, settings=LedgerSettings(trail_keys=keys))
                )
                if pending:
                    raise InvalidInput(
                        f"{pending} trail(s) in flight still rely on a previous trail key: run "
                        "`effectledger audit retag` first (or --force)",
                        field="key_id",
                    )
        finally:
            store.close()
    after = drop_trail_key(directory, args.key_id)
    if out.json_mode:
        out.json({"key_dir": str(directory), "dropped": args.key_id, "keys": _key_document(after)})
        return 0
    out.line(f"dropped the trail key {args.key_id}; the keys left:")
    _print_keys(out, after)
    return 0
