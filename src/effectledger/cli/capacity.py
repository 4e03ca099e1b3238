"""``capacity check``: recount every pool's running totals from its operations."""

from __future__ import annotations

import argparse

from effectledger.authority.capacity import (
    TotalsMismatch,
    rebuild_totals_in,
    totals_mismatches_in,
)
from effectledger.cli.options import Commands, add_db, add_json, open_existing
from effectledger.cli.output import Output

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Add ``capacity check``."""
    capacity = commands.add_parser(
        "capacity",
        help="check the running capacity totals of every pool",
        description="Capacity pools keep running totals (held, committed, freed units) that "
        "admission reads instead of summing a pool's history.",
    )
    actions = capacity.add_subparsers(dest="capacity_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="recount every pool's totals from its operations and compare",
        description="Recount every pool's held, committed and freed units from its operations "
        "and compare them with the running totals; exit 1 if any pool differs. With --repair, "
        "rebuild the totals from the operations in one transaction that holds off every other "
        "writer (and still exit 1, naming what was wrong).",
    )
    add_db(check)
    check.add_argument(
        "--repair", action="store_true", help="rebuild the totals of every pool that differs"
    )
    add_json(check)
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(args.db)
    try:
        if args.repair:
            found = store.write(rebuild_totals_in, label="capacity repair")
        else:
            found = store.read(totals_mismatches_in)
    finally:
        store.close()
    if out.json_mode:
        out.json({"mismatches": [_document(m) for m in found], "repaired": bool(args.repair)})
    elif not found:
        out.line("capacity totals match the operations of every pool")
    else:
        for mismatch in found:
            stored, recounted = _triple(mismatch.stored), _triple(mismatch.recounted)
            out.line(
                f"tenant {mismatch.tenant_id} pool {mismatch.pool}: totals {stored}, "
                f"operations {recounted}"
            )
        verb = "rebuilt" if args.repair else "differ"
        out.line(f"{len(found)} pool(s) {verb}")
    return 1 if found else 0


def _triple(values: tuple[int, int, int]) -> str:
    held, committed, freed = values
    return f"held {held}, committed {committed}, freed {freed}"


def _document(mismatch: TotalsMismatch) -> dict[str, object]:
    names = ("held", "committed", "freed")
    return {
        "tenant_id": mismatch.tenant_id,
        "pool": mismatch.pool,
        "totals": dict(zip(names, mismatch.stored, strict=True)),
        "operations": dict(zip(names, mismatch.recounted, strict=True)),
    }
