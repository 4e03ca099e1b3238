"""Trail authentication: a key the database does not hold vouches for every event it wrote.

The hash chain makes an edit *visible*, but anyone who can write the database can also recompute
the hashes. A **trail key** closes that: when a ledger holds one, every event it writes carries a
**trail tag** beside its hash (the ``audit_events.trail_tag`` column)::

    t1:<key id>:hex(HMAC-SHA256(secret, "effectledger/trail/v1\\n" ‖ event_hash))

The event hash commits to the whole chain body (tenant, operation, sequence, the previous hash,
the details), so the tag authenticates the event *and its place in the trail*. A claim checks the
tag of every event its trail relies on (:func:`effectledger.ledger.integrity.
check_dispatchable`); an administrator without the key cannot make a forged or re-hashed event
pass, nor move a genuine tag to another event. The tag is not part of the chain body, so Merkle
leaves, bundles and their independent checks are unchanged. An event with no tag was written
before the ledger had a key (or by a writer without one): the empty column says so.

A key string is ``TRAIL+<key id>+<base64 of 32 random bytes>``. A key file or the environment
variable :data:`TRAIL_KEY_ENV` holds one key string per line: the first is the **current** key,
which tags new events; the others are **retired** keys, which still verify the events they
tagged. Rotating is putting a new key on the first line. A callable (a KMS or a secret
manager's client) may supply the same text instead (:func:`load_trail_keys`).

Why a keyed MAC and not an Ed25519 signature: measured in ``benchmarks/trail_keys.py``, an HMAC
tag costs about a microsecond to write and to check, a signature tens of microseconds to write
and more to verify, several per perform; the tag is checked by the ledger itself, which holds
the key, while outside reviewers rely on the signed checkpoints (``docs/evidence.md``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from effectledger.errors import TrailKeyInvalid
from effectledger.keyfiles import read_private_file

__all__ = [
    "TAG_VERSION",
    "TRAIL_KEY_ENV",
    "TrailKey",
    "TrailKeys",
    "load_trail_keys",
    "new_trail_key",
    "trail_keys_from_environment",
]

TRAIL_KEY_ENV: Final = "EFFECTLEDGER_TRAIL_KEY"
"""The environment variable that may hold the trail key strings (one per line)."""

TAG_VERSION: Final = "t1"
"""The first field of every trail tag this version writes."""

_DOMAIN: Final = b"effectledger/trail/v1\n"
_PREFIX: Final = "TRAIL+"
_KEY_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SECRET_BYTES: Final = 32


@dataclass(frozen=True, slots=True)
class TrailKey:
    """One trail key: its public id (stored in each tag) and its secret (never stored)."""

    key_id: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not _KEY_ID.fullmatch(self.key_id):
            raise TrailKeyInvalid("a trail key id is 1 to 64 letters, digits, '.', '_' or '-'")
        if len(self.secret) < _SECRET_BYTES:
            raise TrailKeyInvalid(f"a trail key secret has at least {_SECRET_BYTES} bytes")

    @classmethod
    def from_key_string(cls, text: str) -> TrailKey:
        """Parse ``TRAIL+<key id>+<base64 secret>``; the error never contains the secret."""
        parts = text.strip().split("+", 2)  # base64 may hold "+": the secret is last
        if len(parts) != 3 or f"{parts[0]}+" != _PREFIX:
            raise TrailKeyInvalid("not a trail key string (TRAIL+<key id>+<base64 secret>)")
        try:
            secret = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise TrailKeyInvalid("the secret of a trail key string is not base64") from exc
        return cls(parts[1], secret)

    def key_string(self) -> str:
        """The key string that :meth:`from_key_string` reads back."""
        return f"{_PREFIX}{self.key_id}+{base64.b64encode(self.secret).decode()}"

    def tag(self, event_hash: str) -> str:
        """The trail tag of the event whose hash string is ``event_hash``."""
        mac = _keyed(self.secret).copy()  # the keyed state is computed once per key
        mac.update(event_hash.encode())
        return f"{TAG_VERSION}:{self.key_id}:{mac.hexdigest()}"


@functools.lru_cache(maxsize=16)
def _keyed(secret: bytes) -> hmac.HMAC:
    """HMAC-SHA256 under ``secret``, already fed the domain prefix (copied for each tag)."""
    return hmac.new(secret, _DOMAIN, hashlib.sha256)


def new_trail_key(key_id: str = "trail-1") -> str:
    """A fresh trail key string with ``key_id`` and 32 random bytes."""
    return TrailKey(key_id, os.urandom(_SECRET_BYTES)).key_string()


class TrailKeys:
    """The keys a ledger authenticates its trail with: one current key, and retired ones.

    ``accept_untagged`` lets a claim rely on events that carry no tag (a ledger that held no
    key when they were written). It re-opens what the key closes, for as long as it is on, so
    it is meant for draining operations admitted before the key was introduced; by default an
    untagged event in a claim's trail refuses the claim.
    """

    __slots__ = ("_by_id", "accept_untagged", "current")

    def __init__(
        self,
        current: TrailKey,
        *,
        retired: Sequence[TrailKey] = (),
        accept_untagged: bool = False,
    ) -> None:
        self.current = current
        self.accept_untagged = accept_untagged
        self._by_id: dict[str, TrailKey] = {}
        for key in (current, *retired):
            if key.key_id in self._by_id:
                raise TrailKeyInvalid(f"two trail keys share the id {key.key_id!r}")
            self._by_id[key.key_id] = key

    def __repr__(self) -> str:
        return f"TrailKeys(current={self.current.key_id!r}, keys={sorted(self._by_id)!r})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key held, the current one first."""
        return tuple(self._by_id)

    def tag(self, event_hash: str) -> str:
        """The trail tag of a new event under the current key."""
        return self.current.tag(event_hash)

    def problem(self, event_hash: str, tag: str | None) -> str | None:
        """Why ``tag`` does not authenticate ``event_hash``, or ``None`` when it does.

        The answers: ``untagged`` (no tag, and untagged events are not accepted),
        ``unknown_key`` (a key id none of these keys has), ``tag_invalid`` (a malformed tag, or
        one the named key did not compute for this hash).
        """
        if tag is None:
            return None if self.accept_untagged else "untagged"
        version, _, rest = tag.partition(":")
        key_id, _, mac = rest.partition(":")
        if version != TAG_VERSION or not mac:
            return "tag_invalid"
        key = self._by_id.get(key_id)
        if key is None:
            return "unknown_key"
        return None if hmac.compare_digest(key.tag(event_hash), tag) else "tag_invalid"


def _keys_from_text(text: str, source: str, accept_untagged: bool) -> TrailKeys:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise TrailKeyInvalid(f"no trail key in {source}")
    try:
        keys = [TrailKey.from_key_string(line) for line in lines]
    except TrailKeyInvalid as exc:
        raise TrailKeyInvalid(f"the trail keys in {source}: {exc}") from exc
    return TrailKeys(keys[0], retired=keys[1:], accept_untagged=accept_untagged)


def load_trail_keys(
    key_file: str | os.PathLike[str] | None = None,
    *,
    source: Callable[[], str] | None = None,
    environ: Mapping[str, str] | None = None,
    accept_untagged: bool = False,
) -> TrailKeys:
    """The trail keys from ``key_file``, from ``source()``, or else from the environment.

    The environment variable is :data:`TRAIL_KEY_ENV` (``EFFECTLEDGER_TRAIL_KEY``).

    Each holds one key string per line, the current key first. A key file must not be readable
    by group or others. Raises :class:`~effectledger.errors.TrailKeyInvalid` when there is no
    key or one is malformed; the message never contains a secret.
    """
    if key_file is not None:
        path = Path(key_file)
        text = read_private_file(path, "trail key", TrailKeyInvalid)
        return _keys_from_text(text, f"key file {path}", accept_untagged)
    if source is not None:
        return _keys_from_text(source(), "the key source", accept_untagged)
    text = (os.environ if environ is None else environ).get(TRAIL_KEY_ENV, "")
    if not text.strip():
        raise TrailKeyInvalid(f"no trail key: pass a key file or a source, or set {TRAIL_KEY_ENV}")
    return _keys_from_text(text, f"${TRAIL_KEY_ENV}", accept_untagged)


def trail_keys_from_environment(environ: Mapping[str, str] | None = None) -> TrailKeys | None:
    """The trail keys in ``$EFFECTLEDGER_TRAIL_KEY``, or ``None`` when it is unset or empty.

    For the command-line workers: a keyed ledger's workers set the variable, and their events
    are tagged like the application's.
    """
    text = (os.environ if environ is None else environ).get(TRAIL_KEY_ENV, "")
    return _keys_from_text(text, f"${TRAIL_KEY_ENV}", False) if text.strip() else None
