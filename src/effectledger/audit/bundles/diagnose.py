"""Name what was done to a log bundle that failed verification (the slow, second pass).

The fast pass of :mod:`effectledger.audit.bundles.verify` only knows *that* something is wrong.
This pass keeps every event line and compares four independent records of the same history — each
event's own hash, the hash its successor recorded, the leaf hash sealed for its position, and the
log positions and signed tree sizes — to say *what*:

``event_edited``
    an event's content no longer matches its recorded hash, the leaf sealed for it, or the hash
    its successor in the operation recorded;
``event_deleted``
    an operation's chain skips sequence numbers;
``event_reordered``
    log positions or an operation's sequence numbers go backwards, or an event sits at another
    event's sealed position;
``event_inserted``
    two events claim one position or one sequence number, a chain skips over an event, an event
    of another tenant appears, or an event lies beyond every signed checkpoint;
``operation_deleted``
    sealed positions are missing and no remaining operation's chain has a gap;
``checkpoint_reordered``
    a checkpoint line comes before events it covers (each follows the events it signs).

A tamperer who rewrites the bundle consistently (recomputing every hash) leaves only the signed
roots to disagree; the caller then reports ``log_root_mismatch``.
"""

from __future__ import annotations

from collections.abc import Iterable

from effectledger.audit.bundles.reader import EventLine, parse_line
from effectledger.audit.findings import Finding
from effectledger.events.chain import GENESIS_HASH

__all__ = ["Finding", "diagnose"]


def _finding(code: str, message: str, event: EventLine | None = None) -> Finding:
    if event is None:
        return Finding(code=code, message=message)
    return Finding(
        code=code,
        message=message,
        position=event.position,
        event_id=event.event_id,
        operation_id=event.operation_id,
    )


def _records(lines: Iterable[bytes]) -> tuple[list[EventLine], list[Finding]]:
    """The event lines, and a finding for each checkpoint line placed before events it covers."""
    records: list[EventLine] = []
    moved: list[Finding] = []
    covering: tuple[int, int] | None = None  # (seq, size) of the largest checkpoint so far
    for number, raw in enumerate(lines, start=1):
        if number == 1:
            continue
        try:
            kind, value = parse_line(raw.rstrip(b"\n"))
        except ValueError:
            continue
        if kind == "event":
            records.append(value)
            if covering is not None and value.position < covering[1]:
                moved.append(
                    _finding(
                        "checkpoint_reordered",
                        f"checkpoint #{covering[0]} of {covering[1]} leaves comes before event "
                        f"{value.event_id} at position {value.position}, which it covers",
                        value,
                    )
                )
                covering = None  # named once per misplaced checkpoint
        elif kind == "checkpoint":
            size = _note_size(value.get("note"))
            seq = value.get("seq")
            if size is not None and isinstance(seq, int) and size > (covering or (0, 0))[1]:
                covering = (seq, size)
    return records, moved


def _note_size(note: object) -> int | None:
    """The tree size a checkpoint note states (its second line), if it states one."""
    lines = note.split("\n", 2) if isinstance(note, str) else []
    return int(lines[1]) if len(lines) > 2 and lines[1].isdigit() else None


def diagnose(lines: Iterable[bytes], tenant_id: str, size: int | None) -> list[Finding]:
    """Findings that name the tampering of a ``log`` bundle's events.

    ``lines`` are the bundle's lines (header first); ``size`` is the tree size of the latest
    checkpoint that verified, or ``None``.
    """
    records, moved = _records(lines)
    findings: list[Finding] = []
    add = findings.append
    for event in records:
        if event.tenant_id != tenant_id:
            add(
                _finding(
                    "event_inserted",
                    f"event {event.event_id} belongs to tenant {event.tenant_id}, not this log",
                    event,
                )
            )
        if event.event_hash != event.stated_event_hash:
            add(
                _finding(
                    "event_edited",
                    f"event {event.event_id} no longer matches the hash it was written with",
                    event,
                )
            )
    findings += _positions(records, size)
    findings += _leaves(records, size)
    chain_findings, chain_gap = _chains(records)
    findings += chain_findings
    if size is not None:
        claimed = {event.position for event in records if event.position < size}
        missing = size - len(claimed)
        if missing > 0 and not chain_gap:
            add(
                _finding(
                    "operation_deleted",
                    f"{missing} event(s) sealed below log size {size} are missing and no "
                    "remaining operation's chain has a gap: whole operations (or the latest "
                    "events of one) were removed",
                )
            )
        for event in records:
            if event.position >= size:
                add(
                    _finding(
                        "event_inserted",
                        f"event {event.event_id} at position {event.position} is covered by no "
                        f"signed checkpoint (the log was signed at {size} leaves)",
                        event,
                    )
                )
    return findings + moved


def _positions(records: list[EventLine], size: int | None) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[int] = set()
    highest = -1
    for event in records:
        if event.position in seen:
            findings.append(
                _finding(
                    "event_inserted",
                    f"event {event.event_id} claims position {event.position}, which another "
                    "event holds",
                    event,
                )
            )
        elif event.position < highest:
            findings.append(
                _finding(
                    "event_reordered",
                    f"event {event.event_id} at position {event.position} comes after position "
                    f"{highest}",
                    event,
                )
            )
        seen.add(event.position)
        highest = max(highest, event.position)
    return findings


def _leaves(records: list[EventLine], size: int | None) -> list[Finding]:
    findings: list[Finding] = []
    by_leaf = {event.leaf_hash.hex(): event for event in records}
    for event in records:
        if event.event_hash != event.stated_event_hash:
            continue  # already named as edited
        if size is not None and event.position >= size:
            continue  # no checkpoint covers it: named as inserted below
        if event.leaf_hash.hex() == event.stated_leaf_hash:
            continue
        other = by_leaf.get(event.stated_leaf_hash)
        if other is not None and other is not event:
            findings.append(
                _finding(
                    "event_reordered",
                    f"position {event.position} was sealed for event {other.event_id}, but "
                    f"holds event {event.event_id}",
                    event,
                )
            )
        else:
            findings.append(
                _finding(
                    "event_edited",
                    f"event {event.event_id} does not match the leaf sealed at position "
                    f"{event.position}",
                    event,
                )
            )
    return findings


def _chains(records: list[EventLine]) -> tuple[list[Finding], bool]:
    findings: list[Finding] = []
    chains: dict[str, list[EventLine]] = {}
    for event in records:
        chains.setdefault(event.operation_id, []).append(event)
    gap = False
    for operation_id, events in chains.items():
        expected, previous_hash = 1, GENESIS_HASH
        previous: EventLine | None = None
        earlier: set[str] = set()
        sequences: set[int] = set()
        present = {event.sequence for event in events}
        for event in events:
            if event.sequence in sequences:
                findings.append(
                    _finding(
                        "event_inserted",
                        f"event {event.event_id} is a second event with sequence "
                        f"{event.sequence} of operation {operation_id}",
                        event,
                    )
                )
                continue
            sequences.add(event.sequence)
            if event.sequence < expected:
                findings.append(
                    _finding(
                        "event_reordered",
                        f"event {event.event_id} (sequence {event.sequence}) comes after "
                        f"sequence {expected - 1} of operation {operation_id}",
                        event,
                    )
                )
                continue
            if event.sequence > expected:
                missing = [s for s in range(expected, event.sequence) if s not in present]
                if missing:
                    gap = True
                    shown = ", ".join(map(str, missing[:5])) + (", ..." if missing[5:] else "")
                    findings.append(
                        _finding(
                            "event_deleted",
                            f"sequence {shown} of operation {operation_id} is missing before "
                            f"event {event.event_id}",
                            event,
                        )
                    )
                else:
                    findings.append(
                        _finding(
                            "event_reordered",
                            f"event {event.event_id} (sequence {event.sequence}) comes before "
                            f"sequence {expected} of operation {operation_id}",
                            event,
                        )
                    )
            elif event.prev_hash != previous_hash:
                if previous is None:
                    findings.append(
                        _finding(
                            "event_edited",
                            f"event {event.event_id} does not start its chain at the genesis hash",
                            event,
                        )
                    )
                elif event.prev_hash in earlier:
                    findings.append(
                        _finding(
                            "event_inserted",
                            f"event {previous.event_id} sits in operation {operation_id}'s "
                            f"chain, but its successor {event.event_id} links past it",
                            previous,
                        )
                    )
                else:
                    findings.append(
                        _finding(
                            "event_edited",
                            f"event {previous.event_id} no longer matches the hash its "
                            f"successor {event.event_id} recorded",
                            previous,
                        )
                    )
            earlier.add(previous_hash)
            expected, previous_hash, previous = event.sequence + 1, event.event_hash, event
    return findings, gap
