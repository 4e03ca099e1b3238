"""The canonical encoding: one byte string per value, refusing what cannot be compared exactly."""

from __future__ import annotations

import hashlib
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectledger.errors import InvalidInput
from effectledger.model.canonical import (
    MAX_SAFE_INTEGER,
    canonical_bytes,
    decode_canonical,
    digest,
    digest_matches,
    digest_version,
    encode,
    fingerprint,
)
from effectledger.model.operations import Command

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


def test_keys_sort_by_utf16_units_in_v2_and_utf8_bytes_in_v1() -> None:
    """Where the orders differ (U+E000 against U+1F600), v2 follows RFC 8785, v1 UTF-8 bytes."""
    value = {"\U0001f600": 1, "\ue000": 2, "z": 3, "é": 4}
    # UTF-16: 0x007A < 0x00E9 < 0xD83D (the surrogate of U+1F600) < 0xE000.
    assert encode(value) == '{"z":3,"é":4,"\U0001f600":1,"\ue000":2}'
    # UTF-8: 7A < C3 A9 < EE 80 80 (U+E000) < F0 9F 98 80 (U+1F600).
    assert encode(value, version=1) == '{"z":3,"é":4,"\ue000":2,"\U0001f600":1}'
    assert canonical_bytes(value) == encode(value).encode()
    assert canonical_bytes(value, version=1) == encode(value, version=1).encode()


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


def test_v1_integer_range_is_signed_64_bit() -> None:
    """In v1 the largest and smallest 64-bit integers encode; one beyond either is refused."""
    assert encode(2**63 - 1, version=1) == "9223372036854775807"
    assert encode(-(2**63), version=1) == "-9223372036854775808"
    for too_big in (2**63, -(2**63) - 1, 10**30):
        with pytest.raises(InvalidInput, match="64-bit"):
            encode(too_big, version=1)


def test_v2_integer_range_is_what_every_json_reader_reads_exactly() -> None:
    """In v2 integers within ±(2^53-1) encode; one beyond either bound is refused, fast or not."""
    assert encode(MAX_SAFE_INTEGER) == "9007199254740991"
    assert canonical_bytes({"n": -MAX_SAFE_INTEGER}) == b'{"n":-9007199254740991}'
    for too_big in (MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**63 - 1):
        with pytest.raises(InvalidInput, match=r"2\^53"):
            encode(too_big)
        with pytest.raises(InvalidInput, match=r"\$\.n is outside"):
            canonical_bytes({"n": too_big})


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
    v2 = hashlib.sha256(b'effectledger/proposal/v2\n{"amount":30}').hexdigest()
    v1 = hashlib.sha256(b'effectledger/proposal/v1\n{"amount":30}').hexdigest()
    assert digest("proposal", {"amount": 30}) == "v2:" + v2
    assert digest("proposal", {"amount": 30}, version=1) == v1
    assert digest("proposal", {"amount": 30}) != digest("command", {"amount": 30})


def test_a_digest_string_names_its_version_and_is_checked_under_it() -> None:
    """``v2:`` digests recompute under v2, bare hex under v1; anything else never matches."""
    value = {"amount": 30, "\U0001f600": 1, "\ue000": 2}
    current, old = digest("proposal", value), digest("proposal", value, version=1)
    assert (digest_version(current), digest_version(old)) == (2, 1)
    assert digest_matches("proposal", value, current)
    assert digest_matches("proposal", value, old)
    assert not digest_matches("proposal", {**value, "amount": 31}, current)
    assert not digest_matches("proposal", value, "v2:" + old)  # v1 hash under a v2 label
    assert not digest_matches("proposal", value, "v3:" + old)
    assert not digest_matches(
        "proposal", {"n": 2**60}, digest("proposal", {"n": 2**60}, version=1)[:-1]
    )
    assert digest_matches("proposal", {"n": 2**60}, digest("proposal", {"n": 2**60}, version=1))
    with pytest.raises(InvalidInput):
        digest_version("not a digest")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"a":1,"a":2}', "duplicate key"),
        (b'{"a":1, "b":2}', "canonical"),
        (b'{"b":1,"a":2}', "canonical"),
        (b'{"a":1}\r', "canonical"),
        (b'\xef\xbb\xbf{"a":1}', "not JSON"),
        (b'{"a":1.0}', "not JSON"),
        (b'{"a":NaN}', "not JSON"),
        (b'"\\u0041"', "canonical"),
        (b'{"a":"\xff"}', "not JSON"),
    ],
)
def test_decode_canonical_refuses_every_other_spelling(data: bytes, why: str) -> None:
    """Only the canonical bytes of a value decode: duplicates, spacing, BOM, CR, floats refused."""
    with pytest.raises(InvalidInput, match=why):
        decode_canonical(data)


def test_decode_canonical_returns_the_value_of_canonical_bytes() -> None:
    """Canonical bytes decode to the value they encode, under the version asked for."""
    assert decode_canonical(b'{"a":[1,null,"x\\n"],"b":true}') == {"a": [1, None, "x\n"], "b": True}
    assert decode_canonical(b'{"n":9223372036854775807}', version=1) == {"n": 2**63 - 1}
    with pytest.raises(InvalidInput):
        decode_canonical(b'{"n":9223372036854775807}')


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

    for version in (1, 2):
        try:
            text = encode(value, version=version)
        except InvalidInput:
            assert version == 2  # an integer beyond ±(2^53-1)
            continue
        assert encode(json.loads(text), version=version) == text


@given(json_values)
def test_an_outside_verifier_can_recompute_v1_with_plain_json(value: object) -> None:
    """v1 equals sorted, compact, non-ASCII JSON: a verifier of old records can redo it."""
    import json

    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encode(value, version=1) == text
    expected = hashlib.sha256(b"effectledger/proposal/v1\n" + text.encode()).hexdigest()
    assert digest("proposal", value, version=1) == expected


# Keys and strings from every plane (lone surrogates excluded: both refuse them), integers
# across and beyond the v2 bound.
jcs_text = st.text(st.characters(codec="utf-8"), max_size=8)
jcs_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**54), 2**54)
    | jcs_text
    | st.sampled_from(["\ue000", "\U0001f600", "\uffff", "\U00010000"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            jcs_text | st.sampled_from(["\ue000", "\U0001f600", "\uffff", "\U00010000"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=24,
)


@given(jcs_values)
def test_v2_is_exactly_rfc8785(value: object) -> None:
    """v2 bytes equal the rfc8785 package's for every value; both refuse the same integers."""
    import rfc8785

    try:
        expected: bytes | None = rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        expected = None
    if expected is None:
        with pytest.raises(InvalidInput, match=r"2\^53"):
            canonical_bytes(value, limit=1 << 20)
        return
    assert canonical_bytes(value, limit=1 << 20) == expected
    assert encode(value).encode() == expected
    assert decode_canonical(expected, limit=1 << 20) == value
    assert (
        digest("proposal", value)
        == "v2:" + hashlib.sha256(b"effectledger/proposal/v2\n" + expected).hexdigest()
    )
