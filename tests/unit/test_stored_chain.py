"""The claim's chain check over stored rows accepts and refuses exactly what the full check does.

``verify_stored_chain`` hashes each row's stored bytes as they are and re-encodes only when that
misses; ``verify_chain`` decodes every row into an event and re-encodes it. A claim relies on the
fast one, so the two are run side by side on a trail and on every kind of edit a database user
could make to it: reformatted details (both accept), changed values, a dropped, swapped or
relinked event, a type edited from a number to text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from effectledger.errors import ChainBreak
from effectledger.events.chain import (
    GENESIS_HASH,
    event_body,
    hash_event,
    verify_chain,
    verify_stored_chain,
)
from effectledger.events.record import event_from_row

Rows = list[dict[str, Any]]


def _trail() -> Rows:
    rows: Rows = []
    previous = GENESIS_HASH
    for sequence, (event_type, details) in enumerate(
        [
            ("ProposalRecorded", {"digest": "d" * 64, "note": "é\u2028"}),
            ("ApprovalGranted", {"approval_id": "a1", "digest": "d" * 64}),
            ("OperationAdmitted", {"fingerprint": "f" * 64, "revision": "r1"}),
        ],
        start=1,
    ):
        body = event_body(
            event_id=f"{sequence:032x}",
            tenant_id="acme",
            operation_id="op-1",
            attempt_id=None,
            sequence=sequence,
            actor="rita",
            event_type=event_type,
            recorded_us=1_767_225_600_000_000 + sequence,
            evidence_reference=None,
            details=details,
            observation_id=None,
            prev_hash=previous,
        )
        body["event_hash"], body["details_json"] = hash_event(body)
        del body["details"]
        rows.append(body)
        previous = body["event_hash"]
    return rows


def _edit(column: str, value: Any, at: int = 1) -> Callable[[Rows], Rows]:
    def apply(rows: Rows) -> Rows:
        rows[at] = {**rows[at], column: value}
        return rows

    return apply


def _reformat(rows: Rows) -> Rows:
    rows[1] = {**rows[1], "details_json": json.dumps(json.loads(rows[1]["details_json"]), indent=2)}
    return rows


EDITS: dict[str, Callable[[Rows], Rows]] = {
    "untouched": lambda rows: rows,
    "details reformatted": _reformat,
    "details value changed": _edit(
        "details_json", '{"approval_id":"a2","digest":"' + "d" * 64 + '"}'
    ),
    "details not json": _edit("details_json", "{"),
    "actor changed": _edit("actor", "mallory"),
    "type changed": _edit("event_type", "ApprovalDenied"),
    "sequence as text": _edit("sequence", "2"),
    "time as text": _edit("recorded_us", str(1_767_225_600_000_002)),
    "relinked": _edit("prev_hash", GENESIS_HASH),
    "hash replaced": _edit("event_hash", "0" * 64, at=2),
    "dropped": lambda rows: [rows[0], rows[2]],
    "swapped": lambda rows: [rows[1], rows[0], rows[2]],
}


def _verdict(check: Callable[[], None]) -> str:
    try:
        check()
    except ChainBreak as exc:
        return f"broken: {exc.message}"
    except (ValueError, TypeError) as exc:  # a row too broken to read as an event
        return f"unreadable: {type(exc).__name__}"
    return "ok"


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_stored_rows_check_agrees_with_the_full_check(edit: str) -> None:
    """Both checks accept the same trails; where the full one refuses, the fast one refuses too."""
    rows = EDITS[edit](_trail())
    fast = _verdict(lambda: verify_stored_chain(rows, head=rows[-1]["event_hash"]))
    full = _verdict(lambda: verify_chain([event_from_row(row) for row in rows]))
    if full == "ok":
        assert fast == "ok"
    else:
        assert fast.startswith("broken"), (fast, full)
    assert (fast == "ok") == (
        edit in {"untouched", "details reformatted", "sequence as text", "time as text"}
    )
