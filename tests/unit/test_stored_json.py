"""JSON the ledger wrote is read by one call of the decoder's scanner, with ``json.loads``'s
value and errors for every text."""

from __future__ import annotations

import json

import pytest

from effectledger.model.canonical import canonical_bytes, loads_stored

TEXTS = [
    canonical_bytes(
        {"action": "refund", "arguments": {"amount": 30, "note": 'a "q" \\ é'}}
    ).decode(),
    "{}",
    "[]",
    '"text"',
    "12",
    "null",
    ' {"padded": true} ',
    '{"a": 1}',
    "[1, 2.5, NaN]",
]


@pytest.mark.parametrize("text", TEXTS)
def test_stored_json_reads_as_json_loads_reads_it(text: str) -> None:
    """Canonical text, and text with whitespace or numbers the ledger never writes, read back
    exactly as ``json.loads`` reads them."""
    assert repr(loads_stored(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', "[1,]", '"\x00"'])
def test_text_that_is_not_json_is_refused_as_json_loads_refuses_it(text: str) -> None:
    """Text that is not JSON raises the ``ValueError`` ``json.loads`` raises for it."""
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as raised:
        loads_stored(text)
    assert type(raised.value) is type(expected.value)
