"""One pass over an evidence bundle: what verification needs, kept lean for the common case.

:func:`scan_bundle` reads the bundle line by line. An event line in the canonical shape whose
stated hashes hold (:func:`~effectledger.audit.bundle_reader.scan_event_line`) costs two SHA-256
and a few comparisons; it leaves its leaf hash and its operation's chain head and marks the scan
``suspicious`` if its position, tenant, sequence or link is not the expected one. Any other line
is parsed strictly; checkpoints, consistency and inclusion proofs are collected for the checks of
:mod:`effectledger.audit.verify`, and malformed lines become ``bundle_malformed`` findings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from effectledger.audit.bundle import KIND_RECEIPT
from effectledger.audit.bundle_reader import EventLine, parse_line, scan_event_line, text_bytes
from effectledger.audit.diagnose import Finding
from effectledger.events.chain import GENESIS_HASH

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


def bundle_lines(source: Source) -> Iterator[bytes]:
    """The bundle's lines, each with its newline (the last may lack one)."""
    if isinstance(source, bytes):
        yield from source.splitlines(keepends=True)
        return
    with open(source, "rb") as handle:
        yield from handle


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
    receipt = False
    leaves, chains = scan.leaves, scan.chains
    add_leaf = leaves.append
    genesis = GENESIS_HASH.encode()
    for number, raw in enumerate(bundle_lines(source), start=1):
        if raw.endswith(b"\n"):
            line = raw[:-1]
        else:
            line = raw
            malformed(Finding(code="bundle_malformed", message=f"line {number} is incomplete"))
        fast = None if number == 1 or receipt else scan_event_line(line)
        if fast is not None:  # the common case, kept lean: one canonical, consistent line
            leaf, event_hash, position, operation, prev_hash, sequence, owner = fast
            state = chains.get(operation)
            expected = (1, genesis) if state is None else (state[0] + 1, state[1])
            if (
                position != len(leaves)
                or owner != tenant
                or sequence != expected[0]
                or prev_hash != expected[1]
            ):
                scan.suspicious = True
            chains[operation] = (sequence, event_hash)
            add_leaf(leaf)
            continue
        try:
            kind, value = parse_line(line)
        except ValueError as exc:
            malformed(Finding(code="bundle_malformed", message=f"line {number}: {exc}"))
            scan.suspicious = True
            continue
        if number == 1:
            if kind != "bundle":
                malformed(Finding(code="bundle_malformed", message="line 1 is not a bundle header"))
                return scan
            scan.header = value
            owner_id = value.get("tenant_id")
            tenant = text_bytes(owner_id) if isinstance(owner_id, str) else None
            receipt = value.get("kind") == KIND_RECEIPT
        elif kind == "event":
            _event(scan, value, tenant, receipt)
        else:
            _other(scan, kind, value, number)
    return scan


def _event(scan: BundleScan, event: EventLine, tenant: bytes | None, receipt: bool) -> None:
    """Account for an event line the fast path could not take."""
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
    """Record a checkpoint, consistency or inclusion line."""
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
    elif kind == "inclusion":
        if isinstance(value.get("event_id"), str):
            scan.inclusions[value["event_id"]] = value
    else:
        malformed(Finding(code="bundle_malformed", message=f"line {number}: a second header"))
