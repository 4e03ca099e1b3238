"""The stored form of hash columns: the ledger's hash strings as bytes, and back, exactly."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from effectledger.errors import InvalidInput
from effectledger.events.record import GENESIS_HASH, hash_of_entry
from effectledger.store.hashes import (
    HASH_PARAMETERS,
    SQLITE_TYPE,
    pack_hash,
    packed_form,
    storable,
    unpack_hash,
)

V1 = hashlib.sha256(b"one").hexdigest()
V2 = hash_of_entry(b'{"a":1}')


@pytest.mark.parametrize("text", [V1, V2, GENESIS_HASH, "v2:" + "0" * 64])
def test_a_hash_string_packs_to_its_bytes_and_back(text: str) -> None:
    """A version 1 hash packs to its 32 bytes, a version 2 hash to 0x02 and them; both unpack."""
    packed = pack_hash(text)
    assert len(packed) == (33 if text.startswith("v2:") else 32)
    assert packed[-32:] == bytes.fromhex(text.removeprefix("v2:"))
    assert unpack_hash(packed) == text


@pytest.mark.parametrize(
    "text", [V1.upper(), "v3:" + V1, "v2:" + V1[:-1], "x" * 64, "edited", "", "v2:" + V1 + "0"]
)
def test_text_that_is_not_a_ledger_hash_is_kept_as_its_text(text: str) -> None:
    """Upper case, another mark, a short digest or junk is no hash the ledger writes: kept."""
    assert packed_form(text) is None
    assert pack_hash(text) == text.encode()
    if len(text.encode()) not in (32, 33):
        assert unpack_hash(pack_hash(text)) == text


def test_only_hash_parameters_are_packed_and_bad_text_is_still_refused() -> None:
    """storable packs the named hash parameters, leaves the rest, and refuses a NUL as before."""
    params = {"event_hash": V2, "prev_hash": GENESIS_HASH, "operation_id": V1, "n": 3}
    packed = storable(params)
    assert packed == {
        "event_hash": pack_hash(V2),
        "prev_hash": bytes(32),
        "operation_id": V1,
        "n": 3,
    }
    assert storable({"operation_id": V1}) == {"operation_id": V1}
    assert {"event_hash", "prev_hash", "digest", "fingerprint", "leaf_hash"} == HASH_PARAMETERS
    with pytest.raises(InvalidInput, match="NUL"):
        storable({"digest": "a\x00b"})


def test_sqlite_reads_a_digest_column_back_as_its_string() -> None:
    """A DIGEST BLOB column holds bytes and reads back through the store's converter as text."""
    import effectledger.store.sqlite  # noqa: F401 - registers the converter

    connection = sqlite3.connect(":memory:", detect_types=sqlite3.PARSE_DECLTYPES)
    connection.execute(f"CREATE TABLE t (h {SQLITE_TYPE} BLOB NOT NULL)")
    connection.execute("INSERT INTO t VALUES (?)", (pack_hash(V2),))
    assert connection.execute("SELECT typeof(h), length(h) FROM t").fetchone() == ("blob", 33)
    assert connection.execute("SELECT h FROM t").fetchone() == (V2,)
    connection.close()
