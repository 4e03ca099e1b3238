"""Destinations: the adapters through which an approved effect leaves the process.

A destination is bound to one authenticated account and endpoint. The executor and the
recovery worker call :func:`ensure_matches` before every submit and every lookup, so an adapter
reconfigured to another account or endpoint blocks both paths instead of sending elsewhere.

An adapter may declare ``concurrent_sends``, how many submissions it takes at once (a whole
number from 1 to :data:`MAX_CONCURRENT_SENDS`): a worker that claims in batches sends at most
that many of a batch together (:func:`concurrent_sends`). An adapter that declares nothing gets
one submission at a time, as every adapter had before batches: only its author knows whether it
may be called from several threads and what the system behind it allows.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from effectledger.errors import (
    DeliveryUncertain,
    DestinationMismatch,
    DestinationUnavailable,
    InvalidInput,
)
from effectledger.model.operations import Command, DestinationRef, Observation

__all__ = [
    "MAX_CONCURRENT_SENDS",
    "BoundDestination",
    "DeliveryUncertain",
    "Destination",
    "DestinationUnavailable",
    "concurrent_sends",
    "ensure_matches",
]

MAX_CONCURRENT_SENDS = 256
"""The most submissions an adapter may declare it takes at once."""


@runtime_checkable
class Destination(Protocol):
    """An external system that performs effects and can be asked about them by key.

    ``account_id`` and ``endpoint`` must describe the adapter's authenticated client, read-only.
    ``submit`` returns an :class:`Observation` when the destination answered; it raises
    :class:`DeliveryUncertain` (or any exception) when it cannot tell. ``lookup`` answers
    ``Unknown`` for "not found" or stale information: absence is never proof.
    """

    @property
    def account_id(self) -> str:
        """The authenticated account this adapter acts as."""
        ...

    @property
    def endpoint(self) -> str:
        """The endpoint this adapter sends to."""
        ...

    def submit(self, command: Command, key: str) -> Observation:
        """Ask the destination to perform ``command`` under idempotency key ``key``."""
        ...

    def lookup(self, key: str) -> Observation:
        """Ask the destination what it did under ``key``."""
        ...


class BoundDestination:
    """Base for adapters bound to one account and endpoint, fixed when the adapter is made.

    Subclasses set ``_account_id`` and ``_endpoint`` in ``__init__``; both are read-only after.
    """

    _account_id: str
    _endpoint: str

    @property
    def account_id(self) -> str:
        """The authenticated account this adapter acts as (read-only)."""
        return self._account_id

    @property
    def endpoint(self) -> str:
        """The endpoint this adapter sends to (read-only)."""
        return self._endpoint


def ensure_matches(destination: Destination, expected: DestinationRef) -> None:
    """Raise :class:`DestinationMismatch` unless account and endpoint are exactly equal."""
    if destination.account_id != expected.account_id or destination.endpoint != expected.endpoint:
        raise DestinationMismatch(
            "the destination adapter is not bound to the operation's account and endpoint",
            expected_account=expected.account_id,
            expected_endpoint=expected.endpoint,
        )


def concurrent_sends(destination: object) -> int:
    """How many submissions ``destination`` takes at once: its ``concurrent_sends``, else 1.

    Raises :class:`InvalidInput` (field ``concurrent_sends``) for a declaration that is not a
    whole number from 1 to :data:`MAX_CONCURRENT_SENDS`.
    """
    value = getattr(destination, "concurrent_sends", 1)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_CONCURRENT_SENDS
    ):
        raise InvalidInput(
            f"a destination's concurrent_sends must be a whole number from 1 to "
            f"{MAX_CONCURRENT_SENDS}",
            field="concurrent_sends",
        )
    return value
