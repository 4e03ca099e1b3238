"""An event is encoded once: the hash and the stored details text must equal separate encodings.

``hash_event`` cuts the details text out of the body's canonical text instead of encoding the
details a second time. A wrong cut would store details that no longer match the hashed body, so
the cut is compared with the two separate encodings on arbitrary bodies, including strings that
spell out the very keys the cut looks for. A body whose shape its fast path does not take is
left to the canonical encoder, and is hashed or refused as that encoder does.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectledger.errors import InvalidInput
from effectledger.events.chain import GENESIS_HASH, event_body, event_hash, hash_event
from effectledger.events.record import EVENT_FIELDS
from effectledger.ledger.trail import write_event
from effectledger.model.canonical import MAX_CANONICAL_BYTES, canonical_bytes
from effectledger.model.states import EventType

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


def test_write_event_builds_the_body_event_body_would() -> None:
    """``write_event`` writes the chain body out itself (no call to build it): its fields are
    ``event_body``'s, in ``EVENT_FIELDS`` order, so a field added there must be added here."""
    written = write_event(
        None,  # type: ignore[arg-type]  # not inserted: the transaction is not used
        tenant_id="tenant",
        operation_id="op-1",
        sequence=2,
        prev_hash=GENESIS_HASH,
        actor="alice",
        event_type=EventType.OPERATION_RELEASED,
        now_us=1_767_225_600_000_000,
        details={"reason": "stale"},
        insert=False,
        keys=None,
    )
    names = [field.name for field in EVENT_FIELDS]
    assert list(written)[: len(names)] == names
    body = event_body(**{name: written[name] for name in names})
    assert body == {name: written[name] for name in names}
    assert (written["event_hash"], written["details_json"]) == hash_event(body)
    assert written["stored_hash"] == b"\x02" + bytes.fromhex(written["event_hash"][3:])


@pytest.mark.parametrize(
    "changes",
    [
        {"actor": "\ud800"},  # a lone surrogate
        {"details": {"amount": 1.5}},  # a float
        {"sequence": 2**53},  # beyond version 2's bound
        {"details": {"note": "x" * MAX_CANONICAL_BYTES}},  # too large
    ],
    ids=["surrogate", "float", "integer", "size"],
)
def test_a_body_the_fast_path_refuses_is_refused_as_the_encoder_refuses_it(
    changes: dict[str, Any],
) -> None:
    """What the shape check leaves to ``canonical_bytes`` is refused there, with its error."""
    body = {**_body("alice", None, {}), **changes}
    with pytest.raises(InvalidInput):
        canonical_bytes(body)
    with pytest.raises(InvalidInput):
        hash_event(body)


def test_a_body_the_fast_path_leaves_is_hashed_as_the_encoder_encodes_it() -> None:
    """A scalar of another type (a bool here) goes through ``canonical_bytes``: the same hash."""
    body = {**_body("alice", None, {"ok": True}), "observation_id": True}
    assert hash_event(body) == (event_hash(body), '{"ok":true}')
