"""Verifying a log bundle in several processes gives the serial scan's result, tampered or not."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
from pathlib import Path

import pytest

from effectledger.audit.bundles.format import (
    blob_line,
    checkpoint_line,
    consistency_line,
    event_line,
    header_line,
)
from effectledger.audit.bundles.scan import scan_bundle
from effectledger.audit.bundles.split import _cuts, scan_in_parts, split_scan
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.cli import main
from effectledger.errors import InvalidInput
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import entry_bytes, hash_of_entry, leaf_of_entry
from tests.support.evidence import SIGNER, VERIFIER_KEY

OPERATIONS = 7
"""Operations interleaved round-robin, so every operation's chain crosses every cut."""


def _body(index: int, prev_hash: str, evidence: str | None) -> dict[str, object]:
    return {
        "actor": "dispatch-worker",
        "attempt_id": None,
        "details": {"n": index},
        "event_id": f"{index:032x}",
        "event_type": "OperationAdmitted",
        "evidence_reference": evidence,
        "observation_id": None,
        "operation_id": f"op-{index % OPERATIONS}",
        "prev_hash": prev_hash,
        "recorded_us": 1_767_225_600_000_000 + index,
        "sequence": index // OPERATIONS + 1,
        "tenant_id": "acme",
    }


def _write(
    path: Path, count: int, every: int, *, relink_at: int | None = None, blobs: bool = True
) -> list[int]:
    """A signed log bundle of ``count`` events, a checkpoint per ``every``, a blob per 50 events.

    With ``relink_at``, the event at that position links to another operation's head, hashed
    consistently (its line keeps its length): only the chain across the lines shows it.
    Returns the byte offset at which each event line starts.
    """
    heads: dict[int, str] = {}
    tree = MerkleTree()
    lines, events, previous, seq = [header_line("acme")], [], 0, 0
    for index in range(count):
        evidence = None
        if blobs and index % 50 == 25:
            content = f"reply {index}".encode()
            digest = hashlib.sha256(content).hexdigest()
            evidence = f"evidence_blobs/sha256:{digest}"
            lines.append(blob_line(digest, content))
        body = _body(index, heads.get(index % OPERATIONS, GENESIS_HASH), evidence)
        if index == relink_at:
            body["prev_hash"] = heads[(index + 1) % OPERATIONS]
        entry = entry_bytes(body)
        heads[index % OPERATIONS] = hash_of_entry(entry)
        tree.append(leaf_of_entry(entry))
        events.append(len(lines))
        lines.append(event_line(entry, hash_of_entry(entry), leaf_of_entry(entry), index))
        if tree.size % every == 0 or tree.size == count:
            if previous:
                proof = tree.consistency_proof(previous, tree.size)
                lines.append(consistency_line(previous, tree.size, proof))
            seq, previous = seq + 1, tree.size
            note = sign_checkpoint(
                Checkpoint("effectledger/acme", tree.size, tree.root()), [SIGNER]
            )
            lines.append(checkpoint_line(seq, note))
    path.write_bytes(b"".join(lines))
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return [starts[i] for i in events]


def _cut(path: Path, jobs: int) -> int:
    """Where the first range after the header's ends when ``path`` is split ``jobs`` ways."""
    with path.open("rb") as handle:
        start = len(handle.readline())
        return _cuts(handle, start, os.path.getsize(path), jobs)[1]


def _same_both_ways(path: Path) -> None:
    serial = verify_bundle(path, [VERIFIER_KEY], jobs=1)
    for jobs in (2, 3, 5):
        assert verify_bundle(path, [VERIFIER_KEY], jobs=jobs) == serial


@pytest.mark.parametrize("jobs", [2, 3, 5])
def test_a_genuine_bundle_split_scans_to_the_serial_scan(tmp_path: Path, jobs: int) -> None:
    """A genuine bundle is scanned by the split path (it does not decline), equal to serial."""
    path = tmp_path / "log.jsonl"
    _write(path, 2_000, 100)
    scan = split_scan(path, jobs)
    assert scan is not None
    assert scan == scan_bundle(path)
    assert (len(scan.leaves), len(scan.notes), len(scan.blobs)) == (2_000, 20, 40)
    report = verify_bundle(path, [VERIFIER_KEY], jobs=jobs)
    assert report.ok, report.findings
    assert report == verify_bundle(path, [VERIFIER_KEY], jobs=1)
    assert (report.events, report.operations, report.checkpoints) == (2_000, OPERATIONS, 20)


def test_a_link_broken_right_after_a_cut_is_found_at_the_join(tmp_path: Path) -> None:
    """An event just after a cut that links to another operation's head, hashed consistently,
    passes its range's own checks: the join declines and the serial verify names it."""
    path = tmp_path / "log.jsonl"
    offsets = _write(path, 1_000, 100)
    relink = offsets.index(_cut(path, 2))
    assert offsets == _write(path, 1_000, 100, relink_at=relink)
    assert offsets[relink] == _cut(path, 2)
    assert split_scan(path, 2) is None
    report = verify_bundle(path, [VERIFIER_KEY], jobs=2)
    assert not report.ok
    assert report == verify_bundle(path, [VERIFIER_KEY], jobs=1)
    _same_both_ways(path)


def test_an_event_deleted_at_a_cut_is_found_at_the_join(tmp_path: Path) -> None:
    """Deleting the first event line after a cut leaves both ranges consistent on their own;
    the join sees the second range start at the wrong position and the serial verify names it."""
    path = tmp_path / "log.jsonl"
    offsets = _write(path, 1_000, 100, blobs=False)
    data = path.read_bytes()
    index = next(i for i, offset in enumerate(offsets) if offset >= _cut(path, 2))
    path.write_bytes(data[: offsets[index]] + data[offsets[index + 1] :])
    assert split_scan(path, 2) is None
    report = verify_bundle(path, [VERIFIER_KEY], jobs=2)
    assert "event_deleted" in [finding.code for finding in report.findings]
    assert report == verify_bundle(path, [VERIFIER_KEY], jobs=1)


def test_an_edited_blob_is_named_the_same_both_ways(tmp_path: Path) -> None:
    """A blob line whose content no longer matches its hash makes the split scan decline, and
    both ways report evidence_edited at the same line."""
    path = tmp_path / "log.jsonl"
    _write(path, 300, 100)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"content":"cmVwbHkgMjc1"', b'"content":"cmVwbHkgMjc2"'))
    assert path.read_bytes() != data
    assert split_scan(path, 3) is None
    report = verify_bundle(path, [VERIFIER_KEY], jobs=3)
    assert [finding.code for finding in report.findings] == ["evidence_edited"]
    _same_both_ways(path)


def test_more_jobs_than_lines_and_a_bare_header_are_scanned_alike(tmp_path: Path) -> None:
    """Splitting a bundle into more ranges than it has lines, or one with only its header,
    still gives the serial scan."""
    path = tmp_path / "log.jsonl"
    _write(path, 3, 2)
    assert split_scan(path, 16) == scan_bundle(path)
    _same_both_ways(path)
    path.write_bytes(header_line("acme"))
    assert split_scan(path, 4) == scan_bundle(path)
    _same_both_ways(path)


def test_a_bad_jobs_value_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    """``jobs`` below 1 or not an integer is invalid_input, from the API and the command line."""
    missing = tmp_path / "absent.jsonl"
    for jobs in (0, -2, True):
        with pytest.raises(InvalidInput) as raised:
            scan_in_parts(missing, jobs)
        assert raised.value.code == "invalid_input"
    path = tmp_path / "log.jsonl"
    _write(path, 200, 100)
    verify = ["audit", "verify", "--bundle", str(path), "--key", VERIFIER_KEY]
    assert main([*verify, "--jobs", "0"]) != 0
    assert main([*verify, "--jobs", "3"]) == 0
    assert main([*verify, "--jobs", "1"]) == 0


def test_positions_shifted_after_a_cut_are_found_at_the_join(tmp_path: Path) -> None:
    """Event lines after a cut that all state the next position are consistent within their
    range; the join sees the range start at the wrong position and the serial verify names it."""
    path = tmp_path / "log.jsonl"
    _write(path, 1_000, 100, blobs=False)
    cut = _cut(path, 2)
    data = path.read_bytes()
    lines = data[cut:].split(b"\n")
    for index, line in enumerate(lines):
        found = re.search(rb',"position":([0-9]+),"type":"event"}$', line)
        if found is not None:
            shifted = b',"position":%d,"type":"event"}' % (int(found.group(1)) + 1)
            lines[index] = line[: found.start()] + shifted
    path.write_bytes(data[:cut] + b"\n".join(lines))
    assert _cut(path, 2) == cut
    assert split_scan(path, 2) is None
    report = verify_bundle(path, [VERIFIER_KEY], jobs=2)
    assert not report.ok
    assert report == verify_bundle(path, [VERIFIER_KEY], jobs=1)


def test_sixteen_threads_verifying_split_at_once_agree(tmp_path: Path) -> None:
    """Sixteen threads each verifying one bundle split two ways (workers from the fork server,
    since threads run) all get the serial report, and the file is left as it was."""
    path = tmp_path / "log.jsonl"
    _write(path, 600, 100)
    data = path.read_bytes()
    serial = verify_bundle(path, [VERIFIER_KEY], jobs=1)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        reports = list(pool.map(lambda _: verify_bundle(path, [VERIFIER_KEY], jobs=2), range(16)))
    assert reports == [serial] * 16
    assert serial.ok
    assert serial.events == 600
    assert path.read_bytes() == data


def test_the_default_splits_a_large_file_only_where_forking_is_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no ``jobs``, a file below the threshold is scanned serially and one above it is
    split only when this process may fork, the report being the serial one either way.

    Whether the process may fork is pinned each way rather than read from the live thread count,
    which another test's finishing thread (or a parallel runner's own) changes at any moment."""
    from effectledger.audit.bundles import split as bundle_split

    path = tmp_path / "log.jsonl"
    _write(path, 400, 100)
    serial = verify_bundle(path, [VERIFIER_KEY], jobs=1)
    calls: list[int] = []
    real, real_forkable = bundle_split.split_scan, bundle_split._forkable

    def counted(source: Path, jobs: int) -> object:
        calls.append(jobs)
        with monkeypatch.context() as split:  # the pool's start method is the real choice
            split.setattr(bundle_split, "_forkable", real_forkable)
            return real(source, jobs)

    monkeypatch.setattr(bundle_split, "split_scan", counted)
    assert verify_bundle(path, [VERIFIER_KEY]) == serial
    assert calls == []
    size = os.path.getsize(path)
    monkeypatch.setattr(bundle_split, "PARALLEL_MIN_BYTES", size)
    monkeypatch.setattr(bundle_split, "PART_MIN_BYTES", size // 2)
    monkeypatch.setattr(bundle_split, "_forkable", lambda: False)
    assert verify_bundle(path, [VERIFIER_KEY]) == serial
    assert calls == []
    monkeypatch.setattr(bundle_split, "_forkable", lambda: True)
    assert verify_bundle(path, [VERIFIER_KEY]) == serial
    expected = min(os.cpu_count() or 1, 2)
    assert calls == ([expected] if expected > 1 else [])


def test_a_second_running_thread_makes_the_process_unforkable() -> None:
    """While a second thread runs, the process counts as one that may not fork."""
    import threading

    from effectledger.audit.bundles import split as bundle_split

    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="held")
    thread.start()
    try:
        assert not bundle_split._forkable()
    finally:
        release.set()
        thread.join()
