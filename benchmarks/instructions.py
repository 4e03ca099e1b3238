"""Instructions per operation of a first-time perform and of the 4-commit floor, by callgrind.

Run it from the repository root::

    .venv/bin/python benchmarks/instructions.py [--performs N]

CPU time on a shared machine moves with whatever else runs on it; the instructions a process
executes do not. Each side runs twice under valgrind's callgrind, which counts the instructions
the process executes in user space (the kernel's work, a ``fsync`` say, is left out): once doing
its setup only, once doing the same setup and then ``--performs`` operations. The difference,
divided by the operations, is the side's instructions per operation.

* **perform**: approved refunds performed once each through ``EffectLedger.perform``, the ledger
  and the simulated receiver on SQLite files at ``synchronous=OFF`` (``profile_perform.py``'s
  service: admission, claim, the receiver's commit, record);
* **floor**: ``ledger_sqlite.py``'s four commits per operation in raw ``sqlite3`` into the same
  schema, at the same ``synchronous``.

It prints both, their ratio (issue 31's CPU goal for a perform is at most 1.5 times the floor's),
and where each side's instructions go, by library: the Python interpreter, SQLite, the C library
(memory, locks), OpenSSL (hashing) and the rest. ``PYTHONHASHSEED`` is fixed, so two runs agree
within a fraction of a percent. It needs valgrind (``apt install valgrind``); without it, it
says so and exits 2. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

WARM = 30
"""Operations each side runs first, in both of its runs: caches filled on first use are full."""
TARGET = 1.5
"""Issue 31's goal: a perform's CPU at most this many times the 4-commit floor's."""
LIBRARIES = (
    ("interpreter", "libpython"),
    ("interpreter", "/Python-3."),  # a line naming the interpreter's source file, not its library
    ("SQLite", "libsqlite3"),
    ("C library", "libc.so"),
    ("OpenSSL", "libcrypto"),
)
"""The libraries counted apart, by a part of their file name; the rest is counted together."""
_TOTALS = re.compile(r"^(?:totals|summary): (\d+)", re.MULTILINE)
_LINE = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+(.*)$")


@dataclass(frozen=True)
class Side:
    """One side's instructions per operation, in all and by library."""

    total: float
    libraries: dict[str, float]


def _perform(folder: Path, operations: int, counted: int) -> None:
    from profile_perform import Bench

    bench = Bench(f"sqlite:///{folder / 'ledger.db'}?synchronous=OFF", folder / "r.db", "OFF")
    try:
        bench.perform(bench.approved(WARM))
        ready = bench.approved(operations)  # the same setup whatever is counted
        bench.perform(ready[:counted])
    finally:
        bench.close()


def _floor(folder: Path, operations: int, counted: int) -> None:
    from ledger_sqlite import Floor

    floor = Floor(folder, 0, WARM + operations)
    try:
        for connection in (floor.ledger, floor.receiver):
            connection.execute("PRAGMA synchronous = OFF")
        floor.run(range(WARM))
        floor.run(range(WARM, WARM + counted))
    finally:
        floor.close()


CHILDREN = {"perform": _perform, "floor": _floor}


def _child(side: str, operations: int, counted: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="effectledger-instructions-"))
    try:
        CHILDREN[side](folder, operations, counted)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _by_library(out: Path) -> dict[str, int]:
    """Instructions per library file in a callgrind output (``callgrind_annotate``'s lines)."""
    done = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, int] = {}
    for line in done.stdout.splitlines():
        matched = _LINE.match(line)
        if matched is None or "PROGRAM TOTALS" in line:
            continue
        # The function's file and, in brackets, its library (the annotation leaves the library
        # out of some lines: then the file names it).
        count, where = int(matched.group(1).replace(",", "")), matched.group(2)
        name = next((label for label, part in LIBRARIES if part in where), None)
        if name is not None:
            found[name] = found.get(name, 0) + count
    return found


def _counted(side: str, operations: int, counted: int, folder: Path) -> tuple[int, dict[str, int]]:
    """The instructions of one run of ``side`` under callgrind, in all and by library."""
    out = folder / f"{side}-{counted}.callgrind"
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    environment.pop("OTEL_TRACES_EXPORTER", None)
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        side,
        str(operations),
        str(counted),
    ]
    subprocess.run(command, capture_output=True, text=True, check=True, env=environment)
    matched = _TOTALS.search(out.read_text(errors="replace"))
    if matched is None:  # pragma: no cover - a callgrind that wrote no totals
        raise SystemExit(f"no totals in {out}")
    return int(matched.group(1)), _by_library(out)


def measure(operations: int) -> dict[str, Side]:
    """Each side's instructions per operation (two callgrind runs a side)."""
    folder = Path(tempfile.mkdtemp(prefix="effectledger-callgrind-"))
    sides: dict[str, Side] = {}
    try:
        for side in CHILDREN:
            sys.stderr.write(f"  {side}: setup alone, then setup and {operations} operations\n")
            base, base_libraries = _counted(side, operations, 0, folder)
            full, full_libraries = _counted(side, operations, operations, folder)
            total = (full - base) / operations
            libraries = {
                label: (full_libraries.get(label, 0) - base_libraries.get(label, 0)) / operations
                for label, _ in LIBRARIES
            }  # two parts may name one label: the dictionary holds it once
            # What no named library ran (other libraries, and lines the annotation leaves out).
            libraries["other"] = total - sum(libraries.values())
            sides[side] = Side(total, libraries)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sides


def available() -> str | None:
    """Why the instructions cannot be counted here, or ``None`` if they can."""
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt install valgrind)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Count both sides and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--performs", type=int, default=200, help="operations counted (200)")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "OPERATIONS", "COUNTED"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args(argv)
    if args.child:
        side, operations, counted = args.child
        _child(side, int(operations), int(counted))
        return 0
    if args.performs < 1:
        parser.error("--performs must be at least 1")
    missing = available()
    if missing is not None:
        sys.stderr.write(f"not run: {missing}\n")
        return 2
    sides = measure(args.performs)
    perform, floor = sides["perform"], sides["floor"]
    print(f"instructions per operation, callgrind, {args.performs} operations a side")
    print(f"perform: {perform.total / 1e6:.2f} M")
    print(f"floor: {floor.total / 1e6:.2f} M")
    print(f"perform / floor: {perform.total / floor.total:.2f} x (goal <= {TARGET} x)")
    names = [*dict.fromkeys(label for label, _ in LIBRARIES), "other"]
    print(f"{'by library':<12} {'perform':>9} {'floor':>9}")
    for name in names:
        mine, theirs = perform.libraries.get(name, 0.0), floor.libraries.get(name, 0.0)
        # A library a side barely runs can come out a few instructions below zero.
        print(f"{name:<12} {max(mine, 0.0) / 1e6:>8.2f}M {max(theirs, 0.0) / 1e6:>8.2f}M")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
