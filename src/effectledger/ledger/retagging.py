"""Re-tagging: the trails still in flight, vouched for under the current trail key.

After a trail-key rotation the old key stays in the key file, retired (it verifies events
recorded before its retirement, nothing newer: :mod:`effectledger.events.authentication`).
:func:`retag_trails` (``effectledger audit retag``) then walks every trail that may still be
dispatched or recovered (operations not yet final, unexpired proposals not yet admitted) and,
for each one that relies on a key other than the current one, in one transaction holding that
trail:

1. reads the trail and checks it as a claim would: an unbroken chain, every sealed event as
   sealed, every tag authentic under the keys held (a retired key only for what it tagged
   before its retirement; an untagged event is never vouched for, whatever
   ``accept_untagged`` says);
2. appends one ``TrailRetagged`` event, tagged by the current key, naming the keys it replaces
   and the last sequence it covers. Its hash commits to everything before it, so from then on
   that one tag authenticates the whole trail before it (:meth:`~effectledger.events.
   authentication.TrailKeys.trail_problem`), and the old key can be destroyed.

A trail already covered (its last event by a key other than the current one is followed by a
``TrailRetagged`` of the current key) is left alone, so running it twice, or in many processes
at once, re-tags each trail once. A trail that fails a check is not vouched for: it is reported
with its reason, and its claim keeps refusing it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from effectledger.errors import ChainBreak, ConcurrentModification, InvalidInput
from effectledger.events.authentication import TAG_VERSION, TrailKeys
from effectledger.events.chain import sealed_edit, verify_stored_chain
from effectledger.ledger.settings import LedgerParts
from effectledger.ledger.trail import append_event, key, lock_trail, now_us
from effectledger.model.operations import Row
from effectledger.model.states import HOLDING, EventType, implied_state
from effectledger.store import Transaction

__all__ = [
    "RETAG_ACTOR",
    "RetagReport",
    "retag_trail",
    "retag_trails",
    "trails_needing_retag",
]

RETAG_ACTOR = "key-rotation"
"""The actor of a ``TrailRetagged`` event."""

RETAGGED, CURRENT, FINAL = "retagged", "current", "final"
"""What :func:`retag_trail` did with a trail that passed its checks."""

_PAGE = 200


@dataclass(frozen=True, slots=True)
class RetagReport:
    """What :func:`retag_trails` did: trails looked at, re-tagged, left as they were, refused."""

    trails: int = 0
    retagged: tuple[tuple[str, str], ...] = ()
    current: int = 0
    final: int = 0
    refused: tuple[tuple[str, str, str], ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether every trail looked at is now authenticated by the current key alone."""
        return not self.refused


def _strict(keys: TrailKeys) -> TrailKeys:
    """The same keys, never accepting an untagged event (a re-tag must not launder one)."""
    if not keys.accept_untagged:
        return keys
    return TrailKeys(keys.current, retired=keys.keys[1:])


def _retag_in(
    tx: Transaction, ledger: LedgerParts, keys: TrailKeys, tenant_id: str, operation_id: str
) -> str:
    lock_trail(tx, tenant_id, operation_id)
    events = tx.all("events_for_operation", key(tenant_id, operation_id))
    if not events or not keys.needs_retag(events):
        return CURRENT
    try:
        verify_stored_chain(events)
    except ChainBreak:
        return "chain_broken"
    if sealed_edit(events) is not None:
        return "sealed_event_edited"
    found = keys.trail_problem(events)
    if found is not None:
        return found[1]
    try:
        state = implied_state(event["event_type"] for event in events)
    except ValueError:
        return "state_not_in_trail"
    if state is not None and state not in HOLDING:
        return FINAL
    prefix = f"{TAG_VERSION}:{keys.current.key_id}:"
    replaced = sorted(
        {
            str(event["trail_tag"]).split(":")[1]
            for event in events
            if not str(event["trail_tag"]).startswith(prefix)
        }
    )
    append_event(
        tx,
        ledger,
        tenant_id=tenant_id,
        operation_id=operation_id,
        actor=RETAG_ACTOR,
        event_type=EventType.TRAIL_RETAGGED,
        details={
            "key_id": keys.current.key_id,
            "replaces": ", ".join(replaced),
            "through": int(events[-1]["sequence"]),
        },
    )
    return RETAGGED


def _keys(ledger: LedgerParts) -> TrailKeys:
    keys = ledger.settings.trail_keys
    if keys is None:
        raise InvalidInput(
            "re-tagging needs the ledger's trail keys (its key directory, or "
            "$EFFECTLEDGER_TRAIL_KEY)",
            field="trail_keys",
        )
    return _strict(keys)


def retag_trail(ledger: LedgerParts, tenant_id: str, operation_id: str) -> str:
    """Re-tag one trail in its own transaction (see the module docstring).

    Returns ``"retagged"``, ``"current"`` (nothing to do), ``"final"`` (the operation is
    finished: nothing will rely on its tags again), or the reason it was not vouched for
    (``chain_broken``, ``sealed_event_edited``, ``state_not_in_trail``, or a tag problem:
    ``untagged``, ``unknown_key``, ``tag_invalid``, ``retired_key``).
    """
    return _write(ledger, _keys(ledger), tenant_id, operation_id)


def _write(ledger: LedgerParts, keys: TrailKeys, tenant_id: str, operation_id: str) -> str:
    outcome: str = ledger.store.write(
        lambda tx: _retag_in(tx, ledger, keys, tenant_id, operation_id),
        label="retag",
        rerun_on=(ConcurrentModification,),
    )
    return outcome


def _all(tx: Transaction, *, name: str, params: Mapping[str, Any]) -> list[Row]:
    return tx.all(name, params)


def _in_flight(ledger: LedgerParts, tenant: str, now: int) -> Iterator[list[tuple[str, str]]]:
    """The trails in flight, a page at a time, in (tenant, operation) order."""
    after = ("", "")
    while True:
        params = {
            "tenant_id": tenant,
            "now_us": now,
            "after_tenant": after[0],
            "after_operation": after[1],
            "limit": _PAGE,
        }
        rows = ledger.store.read(partial(_all, name="trails_in_flight", params=params))
        page = [(str(row["tenant_id"]), str(row["operation_id"])) for row in rows]
        yield page
        if len(page) < _PAGE:
            return
        after = page[-1]


def trails_needing_retag(ledger: LedgerParts, *, tenant_id: str | None = None) -> int:
    """How many trails in flight still rely on a trail key other than the current one (what
    ``audit drop-trail-key`` refuses to strand)."""
    keys = _keys(ledger)
    found = 0
    for page in _in_flight(ledger, tenant_id or "", now_us(ledger.clock)):
        for tenant, operation_id in page:
            events = ledger.store.read(
                partial(_all, name="events_for_operation", params=key(tenant, operation_id))
            )
            found += bool(events) and keys.needs_retag(events)
    return found


def retag_trails(
    ledger: LedgerParts,
    *,
    tenant_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RetagReport:
    """Re-tag every trail in flight (one tenant's, or every tenant's) under the current key.

    ``progress(done, total)`` is called after each page of trails (and once at the end). Safe to
    run again, and in several processes at once: each trail is re-tagged once.
    """
    keys = _keys(ledger)
    tenant = tenant_id or ""
    now = now_us(ledger.clock)
    counted = ledger.store.one("trails_in_flight_count", {"tenant_id": tenant, "now_us": now})
    total = 0 if counted is None else int(counted["trails"])
    done, current, final = 0, 0, 0
    retagged: list[tuple[str, str]] = []
    refused: list[tuple[str, str, str]] = []
    for page in _in_flight(ledger, tenant, now):
        for trail in page:
            outcome = _write(ledger, keys, *trail)
            if outcome == RETAGGED:
                retagged.append(trail)
            elif outcome == CURRENT:
                current += 1
            elif outcome == FINAL:
                final += 1
            else:
                refused.append((*trail, outcome))
            done += 1
        if progress is not None and (page or done == 0):
            progress(done, max(total, done))
    return RetagReport(
        trails=done,
        retagged=tuple(retagged),
        current=current,
        final=final,
        refused=tuple(refused),
    )
