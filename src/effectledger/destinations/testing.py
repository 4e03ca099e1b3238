"""A conformance kit for destination adapters: run it from your own tests.

A destination author points :class:`DestinationCheck` at an adapter connected to a system it may
write to (a sandbox, a simulator that counts its own effects) and calls :meth:`DestinationCheck.
run`. Each check asks the system itself, through ``effects``, rather than trusting the adapter's
answers:

- **identity**: ``account_id`` and ``endpoint`` are what the adapter serves, and
  :func:`~effectledger.destinations.ensure_matches` refuses another pair;
- **one effect per key**: the same command sent twice under one key is one effect;
- **lookup after a lost reply**: with ``lose_next_reply``, a submission whose reply is lost is
  reported ``Unknown`` (never done, never failed), and a lookup by the key then finds it;
- **absence is not proof**: a lookup of a key never sent is not ``Accepted``;
- **secrets kept out**: no evidence the adapter returns contains any of ``secrets``.

A failed check raises :class:`ConformanceFailure` naming the check and what was seen.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from effectledger.destinations import Destination, ensure_matches
from effectledger.errors import DeliveryUncertain, DestinationMismatch
from effectledger.model.operations import Command, DestinationRef, Observation, Outcome

__all__ = ["ConformanceFailure", "DestinationCheck"]


class ConformanceFailure(AssertionError):
    """A destination adapter broke one of the kit's rules (the message says which)."""


@dataclass(kw_only=True)
class DestinationCheck:
    """The checks for one adapter (see the module docstring for each rule).

    ``command`` is one the system accepts; ``effects(key)`` is the system's own count of effects
    under ``key``; ``lose_next_reply``, when given, makes the next submission act and then lose
    its reply; ``secrets`` are the credentials the adapter sends (none may be kept).
    """

    destination: Destination
    command: Command
    effects: Callable[[str], int]
    lose_next_reply: Callable[[], None] | None = None
    secrets: Sequence[str] = ()

    def run(self) -> None:
        """Run every check in turn; the first broken rule raises :class:`ConformanceFailure`."""
        self.check_identity()
        self.check_one_effect_per_key()
        self.check_lookup_after_a_lost_reply()
        self.check_absence_is_not_proof()

    def check_identity(self) -> None:
        """The adapter says what it serves, and a different pair is refused before any call."""
        ref = DestinationRef(
            account_id=self.destination.account_id, endpoint=self.destination.endpoint
        )
        ensure_matches(self.destination, ref)
        other = DestinationRef(account_id=ref.account_id + "-other", endpoint=ref.endpoint)
        try:
            ensure_matches(self.destination, other)
        except DestinationMismatch:
            return
        raise ConformanceFailure("identity: another account was accepted as this adapter's")

    def check_one_effect_per_key(self) -> None:
        """Sending the same command twice under one key makes one effect in the system."""
        key = _key()
        first = self._submit(key)
        second = self._submit(key)
        count = self.effects(key)
        if count != 1:
            raise ConformanceFailure(f"one effect per key: {count} effects under one key")
        for seen in (first, second):
            if seen is not None and seen.outcome not in (Outcome.ACCEPTED, Outcome.UNKNOWN):
                raise ConformanceFailure(f"one effect per key: a resend answered {seen.outcome}")

    def check_lookup_after_a_lost_reply(self) -> None:
        """A lost reply reads Unknown; the lookup by key then finds the one effect."""
        if self.lose_next_reply is None:
            return
        key = _key()
        self.lose_next_reply()
        seen = self._submit(key)
        if seen is not None and seen.outcome is not Outcome.UNKNOWN:
            raise ConformanceFailure(f"lost reply: reported {seen.outcome}, not UNKNOWN")
        found = self._lookup(key)
        if found.outcome is not Outcome.ACCEPTED or not found.provider_reference:
            raise ConformanceFailure(f"lost reply: the lookup answered {found.outcome}")
        if self.effects(key) != 1:
            raise ConformanceFailure(f"lost reply: {self.effects(key)} effects, not 1")

    def check_absence_is_not_proof(self) -> None:
        """A key never sent is not found as Accepted (and nothing is made by asking)."""
        key = _key()
        found = self._lookup(key)
        if found.outcome is Outcome.ACCEPTED:
            raise ConformanceFailure("absence: a key never sent was looked up as Accepted")
        if self.effects(key) != 0:
            raise ConformanceFailure("absence: a lookup made an effect")

    def _submit(self, key: str) -> Observation | None:
        try:
            seen = self.destination.submit(self.command, key)
        except DeliveryUncertain:
            return None  # the adapter said it may have acted: the truthful answer
        self._check_secrets(seen)
        return seen

    def _lookup(self, key: str) -> Observation:
        found = self.destination.lookup(key)
        self._check_secrets(found)
        return found

    def _check_secrets(self, seen: Observation) -> None:
        if seen.evidence is None:
            return
        content = seen.evidence.content
        for secret in self.secrets:
            if secret and secret.encode() in content:
                raise ConformanceFailure("secrets: a credential was kept in the evidence")


def _key() -> str:
    return f"conformance-{uuid.uuid4().hex}"
