"""Scanning a large log bundle in several processes, to the serial scan's result exactly.

:func:`scan_in_parts` returns what :func:`~effectledger.audit.bundles.scan.scan_bundle` returns.
For a log bundle file of at least :data:`PARALLEL_MIN_BYTES` (or when ``jobs`` asks for it) the
event lines after the header are cut at line starts into one byte range per process; each range
is scanned by the same fast path (:data:`~effectledger.audit.bundles.reader.SCAN_PATTERN`, two
SHA-256 per event) and yields its leaf hashes, each operation's first link and last head within
the range, the position of its first event, and its other lines parsed. The calling process scans
the first range itself, then joins the ranges in order: every range's first event must sit where
the ranges before it end, every operation's first link in a range must follow its head in the
ranges before, and the other lines are taken as the serial scan takes them, at their line
numbers. Anything else — a line the fast path does not take, a broken link or position, a torn
last line, a blob whose content does not match — makes the split scan decline, and the bundle is
scanned serially: so a tampered bundle gets the serial scan's findings, in the serial order.

Workers are forked when the process runs a single thread on Linux, else forked from a fork
server (this module preloaded) or spawned; an automatic split (``jobs=None``) happens only where
forking is safe.
"""

from __future__ import annotations

import binascii
import concurrent.futures
import hashlib
import itertools
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Final

from effectledger.audit.bundles.format import ENTRY_START, LINE_LIMIT
from effectledger.audit.bundles.reader import (
    ENTRY_END,
    EVENT_START,
    REFERENCE_KEY,
    SCAN_PATTERN,
    parse_line,
)
from effectledger.audit.bundles.scan import BundleScan, Source, _blob, _other, _owner, scan_bundle
from effectledger.errors import InvalidInput
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import EVENT_DOMAINS

__all__ = ["PARALLEL_MIN_BYTES", "PART_MIN_BYTES", "scan_in_parts", "split_scan"]

PARALLEL_MIN_BYTES: Final = 16 << 20
"""A bundle file at least this large is scanned in several processes by default."""
PART_MIN_BYTES: Final = 8 << 20
"""By default each process takes at least this many bytes of the bundle."""
_CHUNK: Final = 1 << 22
_OTHER: Final = frozenset(("checkpoint", "consistency", "inclusion"))


@dataclass(slots=True)
class _Part:
    """What one byte range of event lines yields (see the module docstring)."""

    odd: bool = False
    lines: int = 0
    leaves: list[bytes] = field(default_factory=list)
    base: int | None = None
    first: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    last: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    cited: dict[str, int] = field(default_factory=dict)
    others: list[tuple[int, int, str, Any]] = field(default_factory=list)


def scan_in_parts(source: Source, jobs: int | None = None) -> BundleScan:
    """:func:`~effectledger.audit.bundles.scan.scan_bundle` of ``source``, split when worth it.

    ``jobs`` is the number of processes: ``1`` scans serially, ``N > 1`` splits a log bundle
    file into ``N`` ranges whatever its size, and ``None`` splits a file of at least
    :data:`PARALLEL_MIN_BYTES` into up to ``os.cpu_count()`` ranges of at least
    :data:`PART_MIN_BYTES`. Bundle bytes are always scanned serially. Raises
    :class:`InvalidInput` for a ``jobs`` below 1 and :class:`OSError` if the file cannot be read.
    """
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise InvalidInput("jobs must be a positive integer", details={"jobs": jobs})
    if isinstance(source, bytes) or jobs == 1:
        return scan_bundle(source)
    if jobs is None:
        size = os.path.getsize(source)
        jobs = min(os.cpu_count() or 1, size // PART_MIN_BYTES)
        if size < PARALLEL_MIN_BYTES or jobs < 2 or not _forkable():
            return scan_bundle(source)
    scan = split_scan(source, jobs)
    return scan if scan is not None else scan_bundle(source)


def split_scan(path: str | os.PathLike[str], jobs: int) -> BundleScan | None:
    """The scan of a log bundle file by ``jobs`` processes, or ``None`` where it declines."""
    with open(path, "rb") as handle:
        head = handle.read(LINE_LIMIT + 1)
        end = head.find(b"\n")
        if end < 0:
            return None
        try:
            kind, header = parse_line(head[:end])
        except ValueError:
            return None
        tenant, receipt = _owner(header if kind == "bundle" else None)
        if kind != "bundle" or receipt or tenant is None:
            return None
        size = os.fstat(handle.fileno()).st_size
        cuts = _cuts(handle, end + 1, size, jobs)
    ranges = list(itertools.pairwise(cuts))
    try:
        if len(ranges) < 2:
            parts = [_part(path, start, stop, tenant) for start, stop in ranges]
        else:
            with concurrent.futures.ProcessPoolExecutor(
                len(ranges) - 1, mp_context=_context()
            ) as pool:
                pending = [pool.submit(_part, path, a, b, tenant) for a, b in ranges[1:]]
                parts = [_part(path, *ranges[0], tenant)] + [task.result() for task in pending]
    except BrokenProcessPool:
        return None
    return _join(header, parts)


def _forkable() -> bool:
    """Whether this process may fork: Linux (where threads are counted) and one thread running."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1 and threading.active_count() == 1
    except OSError:  # not Linux: forking may be unsafe (macOS), so the split is never automatic
        return False


def _context() -> Any:
    """Fork where safe; else a fork server (started once, this module preloaded), else spawn."""
    if _forkable():
        return multiprocessing.get_context("fork")
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


def _cuts(handle: Any, start: int, size: int, jobs: int) -> list[int]:
    """Offsets of line starts cutting ``[start, size)`` into up to ``jobs`` ranges."""
    cuts = [start]
    for index in range(1, jobs):
        offset = max(cuts[-1], start + (size - start) * index // jobs)
        if offset >= size:
            break
        handle.seek(offset)
        while offset < size:
            piece = handle.read(1 << 16)
            newline = piece.find(b"\n")
            if newline >= 0:
                offset += newline + 1
                break
            offset += len(piece)
        if cuts[-1] < offset < size:
            cuts.append(offset)
    return [*cuts, size] if size > start else cuts


def _lines(path: str | os.PathLike[str], start: int, stop: int) -> Iterator[list[bytes]]:
    """The lines of ``[start, stop)`` without newlines; a torn last line ends in ``None``."""
    with open(path, "rb") as handle:
        handle.seek(start)
        carry, left = b"", stop - start
        while left > 0 and (chunk := handle.read(min(_CHUNK, left))):
            left -= len(chunk)
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            yield lines
        if carry:
            raise EOFError


def _part(path: str | os.PathLike[str], start: int, stop: int, tenant: bytes) -> _Part:
    """Scan the event lines of one byte range (the fast path of ``scan_bundle``, lean)."""
    part = _Part()
    leaves, first, last = part.leaves, part.first, part.last
    add_leaf = leaves.append
    match, sha256, hexlify = SCAN_PATTERN.fullmatch, hashlib.sha256, binascii.hexlify
    event_start, reference_key, entry_at = EVENT_START, REFERENCE_KEY, len(ENTRY_START)
    domain_v1, domain_v2 = EVENT_DOMAINS[1], EVENT_DOMAINS[2]
    number = 0
    try:
        for batch in _lines(path, start, stop):
            for line in batch:
                number += 1
                found = (
                    match(line, line.rfind(reference_key)) if line.startswith(event_start) else None
                )
                if found is None:
                    if not _aside(part, line, number):
                        return _Part(odd=True)
                    continue
                entry = line[entry_at : found.start(6) - ENTRY_END]
                cited, operation, prev_hash, sequence, owner, stated, mark, digest, leaf_hex, at = (
                    found.groups()
                )
                leaf = sha256(b"\x00" + entry).digest()
                if (
                    hexlify(sha256((domain_v1 if mark is None else domain_v2) + entry).digest())
                    != digest
                    or hexlify(leaf) != leaf_hex
                    or owner != tenant
                ):
                    return _Part(odd=True)
                step, state = int(sequence), last.get(operation)
                if state is None:
                    first[operation] = (step, prev_hash)
                elif step != state[0] + 1 or prev_hash != state[1]:
                    return _Part(odd=True)
                last[operation] = (step, stated)
                if part.base is None:
                    part.base = int(at)
                elif int(at) != part.base + len(leaves):
                    return _Part(odd=True)
                if cited is not None:
                    part.cited.setdefault(cited.decode("ascii"), len(leaves))
                add_leaf(leaf)
    except EOFError:  # the bundle's last line, torn
        return _Part(odd=True)
    part.lines = number
    return part


def _aside(part: _Part, line: bytes, number: int) -> bool:
    """Keep a line that is not a fast-path event for the join; ``False`` if it is odd."""
    if line.startswith(ENTRY_START):
        return False
    try:
        kind, value = parse_line(line)
    except ValueError:
        return False
    if kind == "blob":
        trial = BundleScan()
        _blob(trial, value, number)
        if trial.findings:
            return False
        value = next(iter(trial.blobs))
    elif kind not in _OTHER:
        return False
    part.others.append((number, len(part.leaves), kind, value))
    return True


def _join(header: dict[str, Any], parts: list[_Part]) -> BundleScan | None:
    """The serial scan's result from the ranges' parts, or ``None`` if it must be scanned."""
    scan = BundleScan(header=header)
    leaves, chains = scan.leaves, scan.chains
    genesis = GENESIS_HASH.encode()
    lines = 1
    for part in parts:
        if part.odd or part.base not in (None, len(leaves)):
            return None
        for operation, (step, prev_hash) in part.first.items():
            state = chains.get(operation)
            if (
                (step != 1 or prev_hash != genesis)
                if state is None
                else (step != state[0] + 1 or prev_hash != state[1])
            ):
                return None
        chains.update(part.last)
        for digest, at in part.cited.items():
            scan.cited.setdefault(digest, len(leaves) + at)
        taken = 0
        for number, before, kind, value in part.others:
            leaves.extend(part.leaves[taken:before])
            taken = before
            if kind == "blob":
                scan.blobs.add(value)
            else:
                _other(scan, kind, value, lines + number)
        leaves.extend(part.leaves[taken:])
        lines += part.lines
    return scan
