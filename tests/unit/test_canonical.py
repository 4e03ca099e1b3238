"""The canonical encoding: one byte string per value, refusing what cannot be compared exactly."""

from __future__ import annotations

import hashlib
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectledger.canonical import canonical_bytes, digest, encode, fingerprint
from effectledger.errors import InvalidInput
from effectledger.model import Command

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_key_order_does_not_matter() -> None:
    """Two mappings with the same items in another insertion order encode identically."""
    assert encode({"b": 1, "a": [1, {"y": 2, "x": 3}]}) == encode(
        {"a": [1, {"x": 3, "y": 2}], "b": 1}
    )
    assert encode({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_keys_sort_by_utf8_bytes() -> None:
    """Keys are ordered by their UTF-8 bytes, so a verifier in any language sorts the same way."""
    assert encode({"é": 1, "z": 2, "A": 3}) == '{"A":3,"z":2,"é":1}'


def test_unicode_normalization_forms_stay_distinct() -> None:
    """NFC and NFD spellings are different values: the encoding never normalizes silently."""
    nfc = unicodedata.normalize("NFC", "Zoë")
    nfd = unicodedata.normalize("NFD", "Zoë")
    assert nfc != nfd
    assert digest("command", {"name": nfc}) != digest("command", {"name": nfd})


def test_whitespace_inside_strings_is_significant() -> None:
    """A trailing space or a tab changes the value and therefore the digest."""
    assert digest("t", "refund 30") != digest("t", "refund 30 ")
    assert encode('a\tb\n\u0001"\\') == '"a\\tb\\n\\u0001\\"\\\\"'


def test_zero_and_negative_zero() -> None:
    """Integer -0 is 0; float -0.0 (like every float) is refused."""
    assert encode(-0) == encode(0) == "0"
    with pytest.raises(InvalidInput, match="float"):
        encode(-0.0)
    with pytest.raises(InvalidInput, match="float"):
        encode({"amount": 30.0})


def test_integer_range_is_signed_64_bit() -> None:
    """The largest and smallest 64-bit integers encode; one beyond either is refused."""
    assert encode(2**63 - 1) == "9223372036854775807"
    assert encode(-(2**63)) == "-9223372036854775808"
    for too_big in (2**63, -(2**63) - 1, 10**30):
        with pytest.raises(InvalidInput, match="64-bit"):
            encode(too_big)


def test_booleans_are_not_integers() -> None:
    """True encodes as true, not 1, so a flag cannot collide with a count."""
    assert encode([True, 1, False, 0, None]) == "[true,1,false,0,null]"


def test_nested_values_and_depth_limit() -> None:
    """Nesting is encoded faithfully up to a bound; deeper values are refused with a path."""
    assert encode({"a": [[{"b": []}]]}) == '{"a":[[{"b":[]}]]}'
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    with pytest.raises(InvalidInput, match="deeper"):
        encode(deep)


def test_refused_values_name_their_path() -> None:
    """An unsupported value is refused with the path to it."""
    with pytest.raises(InvalidInput, match=r"\$\.items\[1\]"):
        encode({"items": [1, 2.5]})
    with pytest.raises(InvalidInput, match="non-string key"):
        encode({1: "x"})
    with pytest.raises(InvalidInput, match="surrogate"):
        encode("\ud800")
    with pytest.raises(InvalidInput, match="unsupported type"):
        encode({"when": object()})


def test_size_limit() -> None:
    """Values over the canonical size limit are refused before anything is stored."""
    with pytest.raises(InvalidInput) as caught:
        canonical_bytes({"body": "x" * 70_000})
    assert caught.value.code == "invalid_input"
    assert caught.value.details["size"] > caught.value.details["limit"]


def test_digest_is_domain_separated_and_documented() -> None:
    """A digest is SHA-256 over the documented prefix and the canonical bytes, per domain."""
    expected = hashlib.sha256(b'effectledger/proposal/v1\n{"amount":30}').hexdigest()
    assert digest("proposal", {"amount": 30}) == expected
    assert digest("proposal", {"amount": 30}) != digest("command", {"amount": 30})


def test_fingerprint_covers_contract_version() -> None:
    """A new contract version gives a new fingerprint for the same arguments."""
    arguments = {"recipient": "a@example.com", "body": "hi"}
    v1 = Command(action="send", contract_version="reply-v1", arguments=arguments)
    v2 = Command(action="send", contract_version="reply-v2", arguments=arguments)
    assert fingerprint(v1) != fingerprint(v2)


@given(json_values)
def test_encoding_is_valid_json_that_round_trips(value: object) -> None:
    """Every encodable value is JSON that decodes back to an equal value and re-encodes the same."""
    import json

    text = encode(value)
    assert encode(json.loads(text)) == text


@given(json_values)
def test_an_outside_verifier_can_recompute_with_plain_json(value: object) -> None:
    """The documented encoding equals sorted, compact, non-ASCII JSON: any verifier can redo it."""
    import json

    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encode(value) == text
    expected = hashlib.sha256(b"effectledger/proposal/v1\n" + text.encode()).hexdigest()
    assert digest("proposal", value) == expected
