"""The splice of a stored row's scalar fields gives the canonical encoder's bytes for every value.

``entry_from_row`` writes common scalars (printable ASCII text, integers within version 2's
bound, ``None``) itself and leaves everything else to :func:`effectledger.model.canonical.encode`;
these tests compare it with the full re-encoding of the same row, value by value, so a stored
row's leaf and hash are the same whichever way they are computed.
"""

from __future__ import annotations

from typing import Any

import pytest

from effectledger.errors import InvalidInput
from effectledger.events.record import body_from_row, entry_bytes, entry_from_row
from effectledger.model.canonical import MAX_SAFE_INTEGER

TEXTS = [
    "",
    "plain-id_0123",
    'a "quoted" word',
    "back\\slash",
    "\x7f",
    "\x00",
    "\x1f tab\t newline\n",
    "é",
    "\u2028",
    "\U0001f600",
    " ~!@#$%^&*()_+{}|:<>?",
]
INTEGERS = [0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]


def _row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "actor": "alice",
        "attempt_id": None,
        "details_json": '{"revision":"rev-1"}',
        "event_id": "e" * 32,
        "event_type": "OperationAdmitted",
        "evidence_reference": "approval/appr-1",
        "observation_id": None,
        "operation_id": "op-1",
        "prev_hash": "0" * 64,
        "recorded_us": 1_767_225_600_000_000,
        "sequence": 1,
        "tenant_id": "acme",
    }
    row.update(changes)
    return row


@pytest.mark.parametrize("text", TEXTS, ids=repr)
@pytest.mark.parametrize("column", ["actor", "evidence_reference", "tenant_id"])
def test_a_text_field_splices_as_the_encoder_writes_it(column: str, text: str) -> None:
    """Every text, escaped or not, gives the bytes of the full canonical encoding."""
    row = _row(**{column: text})
    assert entry_from_row(row) == entry_bytes(body_from_row(row))


@pytest.mark.parametrize("number", INTEGERS)
def test_an_integer_field_splices_as_the_encoder_writes_it(number: int) -> None:
    """Integers up to version 2's bound give the bytes of the full canonical encoding."""
    row = _row(sequence=number, recorded_us=number)
    assert entry_from_row(row) == entry_bytes(body_from_row(row))


@pytest.mark.parametrize("number", [MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1])
def test_an_integer_beyond_the_bound_is_refused_by_both(number: int) -> None:
    """An integer outside ±(2^53-1) is refused by the splice as by the encoder."""
    row = _row(sequence=number)
    with pytest.raises(InvalidInput):
        entry_bytes(body_from_row(row))
    with pytest.raises(InvalidInput):
        entry_from_row(row)


def test_a_lone_surrogate_is_refused_by_the_splice() -> None:
    """Text that cannot be UTF-8 is refused with invalid_input, never spliced."""
    with pytest.raises(InvalidInput):
        entry_from_row(_row(actor="\ud800"))
