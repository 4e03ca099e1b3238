"""One pass over an evidence bundle: what verification needs, kept lean for the common case.

:func:`scan_bundle` reads the bundle line by line. An event line in the canonical shape whose
stated hashes hold (:func:`~effectledger.audit.bundles.reader.scan_event_line`) costs two SHA-256
and a few comparisons; it leaves its leaf hash and its operation's chain head and marks the scan
``suspicious`` if its position, tenant, sequence or link is not the expected one. Any other line
is parsed strictly; checkpoints, consistency and inclusion proofs are collected for the checks of
:mod:`effectledger.audit.bundles.verify`, and malformed lines become ``bundle_malformed`` findings.
The evidence blobs events cite are noted (a canonical event line costs one more byte search for
that), and each ``blob`` line's content is checked against its stated hash
(``evidence_edited``). The file is read a few megabytes at a time and split in C.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from effectledger.audit.bundles.format import ENTRY_START, KIND_RECEIPT
from effectledger.audit.bundles.reader import (
    ENTRY_END,
    EVENT_START,
    REFERENCE_KEY,
    SCAN_PATTERN,
    EventLine,
    cited_blob,
    parse_line,
    text_bytes,
)
from effectledger.audit.findings import Finding
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import EVENT_DOMAINS

__all__ = ["BundleScan", "Source", "bundle_lines", "proof_hashes", "scan_bundle"]

Source = str | os.PathLike[str] | bytes
"""A bundle: a file path, or the bundle's bytes."""


@dataclass
class BundleScan:
    """What one pass over a bundle found (see the module docstring)."""

    header: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    leaves: list[bytes] = field(default_factory=list)
    chains: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    suspicious: bool = False
    notes: list[tuple[int, str]] = field(default_factory=list)
    events_before: list[int] = field(default_factory=list)
    consistency: dict[tuple[int, int], list[bytes] | None] = field(default_factory=dict)
    inclusions: dict[str, dict[str, Any]] = field(default_factory=dict)
    receipt_events: list[EventLine] = field(default_factory=list)
    cited: dict[str, int] = field(default_factory=dict)
    """The SHA-256 of each evidence blob an event cites, with the first citing position."""
    blobs: set[str] = field(default_factory=set)
    """The SHA-256 each well-formed blob line states (its content checked against it)."""


def bundle_lines(source: Source) -> Iterator[bytes]:
    """The bundle's lines, each with its newline (the last may lack one)."""
    for batch, complete in _batches(source):
        for line in batch[:-1]:
            yield line + b"\n"
        if batch:
            yield batch[-1] + (b"\n" if complete else b"")


_CHUNK = 1 << 22


def _batches(source: Source) -> Iterator[tuple[list[bytes], bool]]:
    """The bundle's lines without their newlines, a few megabytes at a time.

    Each batch comes with whether its last line ended in a newline (only the very last line of
    the bundle may not).
    """
    if isinstance(source, bytes):
        lines = source.split(b"\n")
        tail = lines.pop()
        yield lines, True
        if tail:
            yield [tail], False
        return
    with open(source, "rb") as handle:
        carry = b""
        while chunk := handle.read(_CHUNK):
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            yield lines, True
        if carry:
            yield [carry], False


def proof_hashes(value: object) -> list[bytes] | None:
    """A proof line's list of hex hashes as bytes, or ``None`` if it is not one."""
    if not isinstance(value, list) or not all(isinstance(node, str) for node in value):
        return None
    try:
        return [bytes.fromhex(node) for node in value]
    except ValueError:
        return None


def scan_bundle(source: Source) -> BundleScan:
    """Read the bundle once; raises :class:`OSError` if a file cannot be read."""
    scan = BundleScan()
    malformed = scan.findings.append
    tenant: bytes | None = None
    receipt: bool | None = None  # not known before the header: line 1 takes the full parse
    leaves, chains = scan.leaves, scan.chains
    add_leaf = leaves.append
    genesis = GENESIS_HASH.encode()
    match = SCAN_PATTERN.fullmatch
    hexlify = binascii.hexlify
    event_start, reference_key, entry_at = EVENT_START, REFERENCE_KEY, len(ENTRY_START)
    sha256 = hashlib.sha256
    domain_v1, domain_v2 = EVENT_DOMAINS[1], EVENT_DOMAINS[2]
    number = 0
    for batch, complete in _batches(source):
        if not complete:  # the bundle's last line, torn
            malformed(Finding(code="bundle_malformed", message=f"line {number + 1} is incomplete"))
        for line in batch:
            number += 1
            found = (
                match(line, line.rfind(reference_key))
                if receipt is False and line.startswith(event_start)
                else None
            )
            if found is not None:  # the common case, kept lean: scan_event_line, inlined
                entry = line[entry_at : found.start(6) - ENTRY_END]
                cited, operation, prev_hash, sequence, owner, stated, mark, digest, leaf_hex, at = (
                    found.groups()
                )
                leaf = sha256(b"\x00" + entry).digest()
                if (
                    hexlify(sha256((domain_v1 if mark is None else domain_v2) + entry).digest())
                    == digest
                    and hexlify(leaf) == leaf_hex
                ):
                    state = chains.get(operation)
                    step = int(sequence)
                    if (
                        (step != 1 or prev_hash != genesis)
                        if state is None
                        else (step != state[0] + 1 or prev_hash != state[1])
                    ):
                        scan.suspicious = True
                    chains[operation] = (step, stated)
                    if int(at) != len(leaves) or owner != tenant:
                        scan.suspicious = True
                    if cited is not None:
                        scan.cited.setdefault(cited.decode("ascii"), len(leaves))
                    add_leaf(leaf)
                    continue
            if _line(scan, line, number, tenant, receipt):
                return scan
            if number == 1:
                tenant, receipt = _owner(scan.header)
    return scan


def _line(
    scan: BundleScan, line: bytes, number: int, tenant: bytes | None, receipt: bool | None
) -> bool:
    """Parse a line the fast path did not take; ``True`` if the scan must stop (no header)."""
    try:
        kind, value = parse_line(line)
    except ValueError as exc:
        scan.findings.append(Finding(code="bundle_malformed", message=f"line {number}: {exc}"))
        scan.suspicious = True
        return number == 1
    if number == 1:
        if kind != "bundle":
            scan.findings.append(
                Finding(code="bundle_malformed", message="line 1 is not a bundle header")
            )
            return True
        scan.header = value
    elif kind == "event":
        _event(scan, value, tenant, receipt is True)
    else:
        _other(scan, kind, value, number)
    return False


def _owner(header: dict[str, Any] | None) -> tuple[bytes | None, bool]:
    """The header's tenant as canonical text, and whether the bundle is a receipt."""
    owner_id = None if header is None else header.get("tenant_id")
    tenant = text_bytes(owner_id) if isinstance(owner_id, str) else None
    return tenant, header is not None and header.get("kind") == KIND_RECEIPT


def _cite(scan: BundleScan, entry: bytes, position: int) -> None:
    """Note the evidence blob an event cites, if it cites one (by its first citing position)."""
    blob = cited_blob(entry)
    if blob is not None:
        scan.cited.setdefault(blob, position)


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _blob(scan: BundleScan, value: dict[str, Any], number: int) -> None:
    """Check a blob line: canonical base64 content whose SHA-256 is the stated hash."""
    content, digest = value.get("content"), value.get("sha256")
    if set(value) != {"content", "sha256", "type"} or not (
        isinstance(content, str) and isinstance(digest, str) and _HEX64.fullmatch(digest)
    ):
        scan.findings.append(Finding(code="bundle_malformed", message=f"line {number}: bad blob"))
        return
    try:
        data = base64.b64decode(content, validate=True)
    except ValueError:
        data = None
    if data is None or base64.b64encode(data).decode("ascii") != content:
        scan.findings.append(
            Finding(code="bundle_malformed", message=f"line {number}: a blob is not base64")
        )
        return
    scan.blobs.add(digest)
    if hashlib.sha256(data).hexdigest() != digest:
        scan.findings.append(
            Finding(
                code="evidence_edited",
                message=f"line {number}: the evidence blob sha256:{digest} no longer matches "
                "its hash",
            )
        )


def _event(scan: BundleScan, event: EventLine, tenant: bytes | None, receipt: bool) -> None:
    """Account for an event line the fast path could not take."""
    _cite(scan, event.entry, event.position if receipt else len(scan.leaves))
    if receipt:
        scan.receipt_events.append(event)
        return
    operation = text_bytes(event.operation_id)
    prev_hash = event.prev_hash.encode()
    state = scan.chains.get(operation)
    if (
        event.position != len(scan.leaves)
        or event.event_hash != event.stated_event_hash
        or event.leaf_hash.hex() != event.stated_leaf_hash
        or text_bytes(event.tenant_id) != tenant
        or (
            (event.sequence, prev_hash) != (1, GENESIS_HASH.encode())
            if state is None
            else (event.sequence, prev_hash) != (state[0] + 1, state[1])
        )
    ):
        scan.suspicious = True
    scan.chains[operation] = (event.sequence, event.event_hash.encode())
    scan.leaves.append(event.leaf_hash)


def _other(scan: BundleScan, kind: str, value: dict[str, Any], number: int) -> None:
    """Record a checkpoint, consistency, inclusion or blob line."""
    malformed = scan.findings.append
    if kind == "checkpoint":
        note, seq = value.get("note"), value.get("seq")
        if not isinstance(note, str) or not isinstance(seq, int):
            malformed(Finding(code="bundle_malformed", message=f"line {number}: bad checkpoint"))
            return
        scan.notes.append((seq, note))
        scan.events_before.append(len(scan.leaves))
    elif kind == "consistency":
        old, new = value.get("old_size"), value.get("new_size")
        if isinstance(old, int) and isinstance(new, int):
            scan.consistency[(old, new)] = proof_hashes(value.get("proof"))
        else:
            malformed(Finding(code="bundle_malformed", message=f"line {number}: bad proof"))
    elif kind == "blob":
        _blob(scan, value, number)
    elif kind == "inclusion":
        if isinstance(value.get("event_id"), str):
            scan.inclusions[value["event_id"]] = value
    else:
        malformed(Finding(code="bundle_malformed", message=f"line {number}: a second header"))
