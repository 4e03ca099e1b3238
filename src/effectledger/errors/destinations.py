"""Errors a destination adapter raises, or the binding to a destination refuses."""

from __future__ import annotations

from effectledger.errors.base import EffectLedgerError


class DestinationMismatch(EffectLedgerError):
    """The destination adapter is not bound to the persisted account and endpoint."""

    code = "destination_mismatch"
    status = 409


class DestinationError(EffectLedgerError):
    """A destination adapter could not give an answer; raised by adapters, caught by the executor.

    The executor and the recovery worker never let these reach a caller: they record what they
    mean (an uncertain outcome, a lookup to try again) and return a result.
    """

    code = "destination_error"
    status = 502


class DeliveryUncertain(DestinationError):
    """A submission may have reached the destination: the executor records its outcome Unknown.

    Raise it from a destination's ``submit`` when the request left the process and no answer
    came back (a timeout, a dropped connection); recovery then asks the destination by key.
    """

    code = "delivery_uncertain"


class DestinationUnavailable(DestinationError):
    """The destination could not be reached to answer a lookup; recovery asks again later."""

    code = "destination_unavailable"
    status = 503


class SecretUnavailable(DestinationError):
    """A credential a destination needs could not be read; the request was not sent."""

    code = "secret_unavailable"
