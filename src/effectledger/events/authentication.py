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
the only one that tags new events; the others are **previous** keys, which still verify the
events they tagged. A previous key's line may end in ``retired=<RFC 3339 UTC time>``
(``TRAIL+old+… retired=2026-12-04T01:00:00Z``): a **retired** key verifies only events
recorded before that time, so someone who holds it after its retirement cannot make a new trail
that a claim accepts. Rotating is putting a new key on the first line and retiring the old one;
``effectledger audit retag`` then re-tags the trails still in flight under the current key
(a ``TrailRetagged`` event, :meth:`TrailKeys.trail_problem`), after which the old key can be
destroyed (``docs/operating.md``, "Rotating the trail key"). A callable (a KMS or a secret
manager's client) may supply the same text instead (:func:`load_trail_keys`).

A ``TrailRetagged`` event whose own tag is authentic vouches for every event before it in its
trail: its hash commits to the previous hash, which commits to the whole chain before it, and
the ledger writes it only after it checked every earlier tag (:mod:`effectledger.ledger.retagging`).

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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from effectledger.errors import TrailKeyInvalid
from effectledger.keyfiles import read_private_file

__all__ = [
    "RETAG_EVENT",
    "TAG_VERSION",
    "TRAIL_KEY_ENV",
    "TrailKey",
    "TrailKeys",
    "load_trail_keys",
    "new_trail_key",
    "retirement_text",
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
_RETIRED: Final = "retired="
RETAG_EVENT: Final = "TrailRetagged"
"""The event type (``EventType.TRAIL_RETAGGED``) that vouches for the events before it."""


def _micros(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def retirement_text(retired_us: int) -> str:
    """The RFC 3339 UTC text of a retirement time in microseconds (``…Z``)."""
    moment = datetime.fromtimestamp(retired_us / 1_000_000, tz=UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse_retired(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise TrailKeyInvalid(f"{_RETIRED}{text!r} is not an RFC 3339 time") from exc
    if moment.tzinfo is None:
        raise TrailKeyInvalid(f"{_RETIRED}{text!r} has no time zone (end it in Z)")
    return _micros(moment)


@dataclass(frozen=True, slots=True)
class TrailKey:
    """One trail key: its public id (stored in each tag) and its secret (never stored).

    ``retired_us``: when the key was retired (microseconds since the epoch), ``None`` while it
    is not. A retired key verifies tags of events recorded before that time, nothing newer.
    """

    key_id: str
    secret: bytes = field(repr=False)
    retired_us: int | None = None

    def __post_init__(self) -> None:
        if not _KEY_ID.fullmatch(self.key_id):
            raise TrailKeyInvalid("a trail key id is 1 to 64 letters, digits, '.', '_' or '-'")
        if len(self.secret) < _SECRET_BYTES:
            raise TrailKeyInvalid(f"a trail key secret has at least {_SECRET_BYTES} bytes")

    @classmethod
    def from_key_line(cls, line: str) -> TrailKey:
        """Parse a key file's line: a key string, optionally followed by ``retired=<time>``."""
        fields = line.split()
        if not fields:
            raise TrailKeyInvalid("an empty trail key line")
        key = cls.from_key_string(fields[0])
        retired: int | None = None
        for extra in fields[1:]:
            if not extra.startswith(_RETIRED) or retired is not None:
                raise TrailKeyInvalid(
                    "after a trail key string a line holds only retired=<RFC 3339 time>"
                )
            retired = _parse_retired(extra[len(_RETIRED) :])
        return key if retired is None else key.retire(retired)

    def key_line(self) -> str:
        """The key file's line for this key (what :meth:`from_key_line` reads back)."""
        if self.retired_us is None:
            return self.key_string()
        return f"{self.key_string()} {_RETIRED}{retirement_text(self.retired_us)}"

    def retire(self, at_us: int) -> TrailKey:
        """This key, retired at ``at_us`` (microseconds since the epoch)."""
        return replace(self, retired_us=int(at_us))

    def verifies_at(self, recorded_us: int | None) -> bool:
        """Whether this key may vouch for an event recorded at ``recorded_us`` (``None``:
        unknown, which only a key that is not retired may vouch for)."""
        if self.retired_us is None:
            return True
        return recorded_us is not None and int(recorded_us) < self.retired_us

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
    """The keys a ledger authenticates its trail with: one current key, and previous ones.

    Only the current key tags; a previous key verifies what it tagged, and a retired one
    (:attr:`TrailKey.retired_us`) only what was recorded before its retirement.

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
        if current.retired_us is not None:
            raise TrailKeyInvalid(
                f"the current trail key {current.key_id!r} is retired: put an active key first"
            )
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

    @property
    def keys(self) -> tuple[TrailKey, ...]:
        """Every key held, the current one first."""
        return tuple(self._by_id.values())

    def tag(self, event_hash: str) -> str:
        """The trail tag of a new event under the current key."""
        return self.current.tag(event_hash)

    def problem(
        self, event_hash: str, tag: str | None, *, recorded_us: int | None = None
    ) -> str | None:
        """Why ``tag`` does not authenticate ``event_hash``, or ``None`` when it does.

        ``recorded_us``: when the event says it was recorded (part of its hash); a retired key
        vouches only for events recorded before its retirement (unknown: not at all).

        The answers: ``untagged`` (no tag, and untagged events are not accepted),
        ``unknown_key`` (a key id none of these keys has), ``tag_invalid`` (a malformed tag, or
        one the named key did not compute for this hash), ``retired_key`` (a genuine tag by a
        key retired before the event was recorded).
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
        if not hmac.compare_digest(key.tag(event_hash), tag):
            return "tag_invalid"
        return None if key.verifies_at(recorded_us) else "retired_key"

    def authentic(self, event: Mapping[str, Any]) -> bool:
        """Whether a stored event (``event_hash``, ``trail_tag``, ``recorded_us``) carries its
        own authentic tag (:meth:`problem` says why not)."""
        return self._event_problem(event) is None

    def _event_problem(self, event: Mapping[str, Any]) -> str | None:
        return self.problem(
            event["event_hash"], event["trail_tag"], recorded_us=event["recorded_us"]
        )

    def trail_problem(
        self, events: Sequence[Mapping[str, Any]]
    ) -> tuple[Mapping[str, Any], str] | None:
        """The latest event of a trail (stored rows in sequence order, their chain already
        verified) that is not authenticated, with why (:meth:`problem`); ``None`` when all are.

        An event is authenticated by its own tag, or by a later ``TrailRetagged`` event of the
        same trail whose own tag is authentic: that re-tag vouches for every event before it,
        which is how an operation admitted under a key since destroyed still dispatches.
        """
        for event in reversed(events):
            problem = self._event_problem(event)
            if problem is not None:
                return event, problem
            if event["event_type"] == RETAG_EVENT:
                return None  # it vouches for everything before it
        return None

    def needs_retag(self, events: Sequence[Mapping[str, Any]]) -> bool:
        """Whether some event of the trail relies on a key other than the current one: its own
        tag is not the current key's and no later ``TrailRetagged`` of the current key covers
        it (an authentic trail that does not is left as it is by ``audit retag``)."""
        prefix = f"{TAG_VERSION}:{self.current.key_id}:"
        for event in reversed(events):
            tag = event["trail_tag"]
            if event["event_type"] == RETAG_EVENT and tag is not None and tag.startswith(prefix):
                return False
            if tag is None or not tag.startswith(prefix):
                return True
        return False

    def key_lines(self) -> str:
        """The key file's text for these keys, the current one first (:func:`load_trail_keys`)."""
        return "".join(f"{key.key_line()}\n" for key in self._by_id.values())


def _keys_from_text(text: str, source: str, accept_untagged: bool) -> TrailKeys:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise TrailKeyInvalid(f"no trail key in {source}")
    try:
        keys = [TrailKey.from_key_line(line) for line in lines]
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
