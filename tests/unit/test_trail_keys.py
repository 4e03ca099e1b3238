"""Trail keys: key strings, loading from a file, a source or the environment, and tag checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from effectledger.errors import TrailKeyInvalid
from effectledger.events.authentication import (
    TRAIL_KEY_ENV,
    TrailKey,
    TrailKeys,
    load_trail_keys,
    new_trail_key,
    trail_keys_from_environment,
)

EVENT_HASH = "v2:" + "ab" * 32


def test_a_key_string_reads_back_to_the_same_key() -> None:
    """A generated key string parses to a key with its id, whose string is the same."""
    text = new_trail_key("trail-7")
    key = TrailKey.from_key_string(text)
    assert key.key_id == "trail-7"
    assert key.key_string() == text
    assert len(key.secret) == 32


@pytest.mark.parametrize(
    "text",
    [
        "",
        "TRAIL+only-two",
        "LOG+k+AAAA",
        "TRAIL+bad id+" + "A" * 44,
        "TRAIL+k+not*base64",
        "TRAIL+k+AAAA",
    ],
)
def test_malformed_key_strings_are_refused_without_echoing_them(text: str) -> None:
    """A malformed key string is ``trail_key_invalid`` and the message does not contain it."""
    with pytest.raises(TrailKeyInvalid) as refused:
        TrailKey.from_key_string(text)
    assert refused.value.code == "trail_key_invalid"
    assert not text or text not in str(refused.value)


def test_the_secret_is_not_shown_by_repr() -> None:
    """Printing a key or a key ring never shows the secret."""
    key = TrailKey.from_key_string(new_trail_key())
    shown = repr(key) + repr(TrailKeys(key))
    assert key.secret.hex() not in shown
    assert key.key_string().split("+", 2)[2] not in shown


def test_a_tag_names_its_key_and_fails_for_another_hash() -> None:
    """A tag passes for its own event hash only, and names the key that made it."""
    keys = TrailKeys(TrailKey.from_key_string(new_trail_key("k1")))
    tag = keys.tag(EVENT_HASH)
    assert tag.startswith("t1:k1:")
    assert keys.problem(EVENT_HASH, tag) is None
    assert keys.problem("v2:" + "cd" * 32, tag) == "tag_invalid"
    assert keys.problem(EVENT_HASH, "t1:k2:" + tag[6:]) == "unknown_key"
    assert keys.problem(EVENT_HASH, "t9:k1:" + tag[6:]) == "tag_invalid"
    assert keys.problem(EVENT_HASH, "garbage") == "tag_invalid"
    assert keys.problem(EVENT_HASH, None) == "untagged"


def test_two_keys_with_one_id_are_refused() -> None:
    """A key ring whose keys share an id is refused (a tag would not say which one made it)."""
    first = TrailKey.from_key_string(new_trail_key("same"))
    second = TrailKey.from_key_string(new_trail_key("same"))
    with pytest.raises(TrailKeyInvalid, match="share the id"):
        TrailKeys(first, retired=[second])


def test_a_key_file_holds_the_current_key_first_then_retired_ones(tmp_path: Path) -> None:
    """The first line of a key file tags; later lines still verify what they tagged."""
    old, new = new_trail_key("old"), new_trail_key("new")
    path = tmp_path / "trail.key"
    path.write_text(f"{new}\n{old}\n", "utf-8")
    path.chmod(0o600)
    keys = load_trail_keys(path)
    assert keys.key_ids == ("new", "old")
    old_tag = TrailKey.from_key_string(old).tag(EVENT_HASH)
    assert keys.problem(EVENT_HASH, old_tag) is None
    assert keys.tag(EVENT_HASH).startswith("t1:new:")


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    """A trail key file that group or others can read is refused, like an SSH key."""
    path = tmp_path / "trail.key"
    path.write_text(new_trail_key() + "\n", "utf-8")
    path.chmod(0o644)
    with pytest.raises(TrailKeyInvalid, match="chmod 600"):
        load_trail_keys(path)


def test_keys_come_from_a_source_or_the_environment() -> None:
    """A callable (a KMS client) or the environment variable supplies the same text."""
    text = new_trail_key("from-kms")
    assert load_trail_keys(source=lambda: text).key_ids == ("from-kms",)
    assert load_trail_keys(environ={TRAIL_KEY_ENV: text}).key_ids == ("from-kms",)
    with pytest.raises(TrailKeyInvalid, match=TRAIL_KEY_ENV):
        load_trail_keys(environ={})
    with pytest.raises(TrailKeyInvalid, match="no trail key"):
        load_trail_keys(source=lambda: "\n")
    assert trail_keys_from_environment({}) is None
    found = trail_keys_from_environment({TRAIL_KEY_ENV: text})
    assert found is not None
    assert found.key_ids == ("from-kms",)
