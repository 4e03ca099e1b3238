"""Every benchmark script still starts (its imports resolve, it prints its usage), and the
deterministic counts the benchmarks report stay within their targets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import in_ci

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks"
CALLS_PER_REPLAY_TARGET = 40
"""Issue 31's target, the same figure as ``benchmarks/api_replay.py``'s (which is not a
package this test may import)."""
CALLS_PER_PERFORM_CEILING = 461
"""What a first-time perform makes now (450 calls, from 1,203, then 707 and 600), kept from
growing back; issue 31's target, 500 (``benchmarks/profile_perform.py``'s, which the report
prints), is met."""
STATEMENTS_OVER_FLOOR = 2
"""Issue 31's bound: a perform's statements at most the 4-commit floor's plus two."""
BENCHMARKS = sorted(path for path in FOLDER.glob("*.py") if path.name != "allocation.py")
"""Every script; ``allocation.py`` is the helper they import, not a benchmark."""


def _run(tmp_path: Path, script: str, *arguments: str, timeout: float = 120) -> str:
    """What ``benchmarks/<script> arguments`` prints, run from outside the repository in a
    process of its own with no OpenTelemetry provider set (as in a benchmark, whatever this
    test process's other tests set); it must exit 0."""
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("OTEL_")
    }
    done = subprocess.run(
        [sys.executable, str(FOLDER / script), *arguments],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_benchmarks_were_found() -> None:
    """The folder holds the benchmarks the README names (else the test below checks nothing)."""
    assert {"ledger_sqlite.py", "api_replay.py"} <= {path.name for path in BENCHMARKS}


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.stem)
def test_a_benchmark_starts(script: Path, tmp_path: Path) -> None:
    """``python benchmarks/<name>.py --help`` exits 0 from outside the repository."""
    assert "usage" in _run(tmp_path, script.name, "--help")


def _calls_per_replay(tmp_path: Path) -> dict[str, float]:
    """``api_replay.py --calls``: the Python calls of each replay path."""
    counts: dict[str, float] = {}
    for line in _run(tmp_path, "api_replay.py", "--calls", "--dir", str(tmp_path)).splitlines():
        name, _, figure = line.partition(": ")
        counts[name] = float(figure.removesuffix(" calls"))
    return counts


def test_a_replay_makes_at_most_forty_python_calls(tmp_path: Path) -> None:
    """A repeated ``EffectLedger.perform`` of a SUCCEEDED operation, through the service call
    and the facade, makes at most 40 Python function calls as cProfile counts them (a count,
    not a time: the same on every machine), and no more than the executor's own replay."""
    counts = _calls_per_replay(tmp_path)
    assert set(counts) == {"raw point read", "executor replay", "service perform", "facade perform"}
    for path in ("service perform", "facade perform"):
        assert counts[path] <= CALLS_PER_REPLAY_TARGET, counts
        assert counts[path] <= counts["executor replay"], counts


def _run_counts(script: str, tmp_path: Path) -> dict[str, float]:
    """The ``name: figure`` lines a benchmark's count mode prints."""
    counts: dict[str, float] = {}
    for line in _run(tmp_path, script, "--counts", timeout=300).splitlines():
        name, _, figure = line.partition(": ")
        counts[name] = float(figure)
    return counts


@pytest.mark.slow
def test_a_first_perform_counts_stay_within_their_bounds(tmp_path: Path) -> None:
    """A first-time ``EffectLedger.perform`` (admission, claim, the simulated receiver's submit,
    record) sends at most the 4-commit floor's statements plus two to the ledger's and the
    receiver's files, and makes no more Python calls than it does now (cProfile's count)."""
    counts = _run_counts("profile_perform.py", tmp_path)
    assert set(counts) == {"calls per perform", "statements per perform", "floor statements"}
    assert counts["floor statements"] >= 20, counts  # the floor was measured, not skipped
    assert counts["statements per perform"] <= counts["floor statements"] + STATEMENTS_OVER_FLOOR
    assert counts["calls per perform"] <= CALLS_PER_PERFORM_CEILING, counts


INSTRUCTIONS_OVER_FLOOR_CEILING = 4.0
"""A first-time perform executes 3.6 times the 4-commit floor's instructions now (3.76 before
this bound was set), kept from growing back; issue 31's goal is 1.5 (``instructions.py``)."""


@pytest.mark.slow
def test_a_first_perform_executes_at_most_four_times_the_floors_instructions(
    tmp_path: Path,
) -> None:
    """``instructions.py`` counts both sides under callgrind (a count that the machine's load
    does not move): the perform's instructions are more than the floor's and at most four
    times as many, and nearly all of them are put down to a library it names."""
    if shutil.which("valgrind") is None:
        if in_ci():
            pytest.fail("valgrind must be installed in CI")
        pytest.skip("valgrind is not installed")
    printed = _run(tmp_path, "instructions.py", "--performs", "40", timeout=600)
    lines = dict(line.partition(": ")[::2] for line in printed.splitlines() if ": " in line)
    perform = float(lines["perform"].removesuffix(" M"))
    floor = float(lines["floor"].removesuffix(" M"))
    assert 0 < floor < perform <= INSTRUCTIONS_OVER_FLOOR_CEILING * floor, printed
    parts = [line.split() for line in printed.splitlines()[5:]]
    assert [part[0] for part in parts] == ["interpreter", "SQLite", "C", "OpenSSL", "other"]
    by_library = {part[0]: float(part[-2].removesuffix("M")) for part in parts}
    assert by_library["interpreter"] > by_library["SQLite"] > 0, printed
    assert by_library["other"] < 0.1 * perform, printed  # the annotation was read


@pytest.mark.slow
def test_the_history_counts_the_bytes_of_a_sealed_log(tmp_path: Path) -> None:
    """``history.py`` builds its history as a running ledger holds it: every copied log entry
    names its event's trail position and leaf, as the sealer writes it (the script refuses a
    history that does not), and the bytes it prints are those of that history."""
    printed = _run(
        tmp_path,
        "history.py",
        "--sizes",
        "60",
        "--timed",
        "3",
        "--replays",
        "3",
        "--caches",
        "2000",
        "--dir",
        str(tmp_path),
    )
    rows = {line.split()[0]: line.split()[1:] for line in printed.splitlines() if line.strip()}
    assert "log_entries" in rows, printed
    assert "audit_events" in rows, printed
    assert float(rows["total"][0]) > float(rows["log_entries"][0]) > 0, printed
