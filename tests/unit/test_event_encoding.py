"""An event is encoded once: the hash and the stored details text must equal separate encodings.

``hash_event`` cuts the details text out of the body's canonical text instead of encoding the
details a second time. A wrong cut would store details that no longer match the hashed body, so
the cut is compared with the two separate encodings on arbitrary bodies, including strings that
spell out the very keys the cut looks for.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectledger.events.chain import GENESIS_HASH, event_body, event_hash, hash_event
from effectledger.model.canonical import canonical_bytes

# Characters that get escaped, and fragments of the keys the cut searches for.
_TRICKY = [',"details":', ',"event_id":', '"', "\\", ",", ":", "{", "}", "\x00", "\n", "é"]
texts = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=12),
    st.lists(st.sampled_from(_TRICKY), max_size=4).map("".join),
)
keys = st.one_of(texts, st.sampled_from(["details", "event_id", "actor", "attempt_id"]))
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53 - 1), 2**53 - 1), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)


def _body(actor: str, attempt_id: str | None, details: dict[str, Any]) -> dict[str, Any]:
    return event_body(
        event_id="e" * 32,
        tenant_id="tenant",
        operation_id="op-1",
        attempt_id=attempt_id,
        sequence=3,
        actor=actor,
        event_type="ProviderAcceptanceConfirmed",
        recorded_us=1_767_225_600_000_000,
        evidence_reference='ref,"event_id":x',
        details=details,
        observation_id=None,
        prev_hash=GENESIS_HASH,
    )


@pytest.mark.slow
@settings(max_examples=300)
@given(actor=texts, attempt_id=st.none() | texts, details=st.dictionaries(keys, values))
def test_one_encoding_gives_the_hash_and_the_details_text(
    actor: str, attempt_id: str | None, details: dict[str, Any]
) -> None:
    """The cut details text and the hash equal those of two separate encodings."""
    body = _body(actor, attempt_id, details)
    assert hash_event(body) == (event_hash(body), canonical_bytes(details).decode())


def test_keys_spelled_inside_values_do_not_move_the_cut() -> None:
    """Strings and nested keys that spell the searched keys leave the cut where it belongs."""
    details = {
        "event_id": {"details": ',"details":'},
        "reason": ',"event_id":"',
        "z": [',"event_id":', {"event_id": 1}],
    }
    body = _body(actor='a,"details":{}', attempt_id=',"event_id":', details=details)
    assert hash_event(body) == (event_hash(body), canonical_bytes(details).decode())
