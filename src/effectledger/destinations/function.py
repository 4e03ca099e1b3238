"""A destination made of two functions: the one that talks to the real system, and its lookup.

:meth:`effectledger.EffectLedger.action` builds one from the function it decorates (see
:mod:`effectledger.actions.functions`); any application can also build one by hand.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ValidationError

from effectledger.destinations import BoundDestination
from effectledger.model.canonical import canonical_bytes
from effectledger.model.operations import Command, Observation

__all__ = ["FunctionDestination", "LookupFunction", "SubmitFunction"]

SubmitFunction = Callable[..., Observation]
LookupFunction = Callable[[str], Observation]


class FunctionDestination(BoundDestination):
    """A :class:`~effectledger.destinations.Destination` made of an action's two functions.

    ``submit`` rebuilds the arguments from the stored command (the approved one, never the
    model's latest words) and calls the submit function with the key; a command of another
    action, or whose arguments no longer fit the model, is rejected without calling anything.
    ``lookup`` calls the lookup function, or answers ``Unknown`` when there is none: absence
    of an answer is never proof.
    """

    def __init__(
        self,
        *,
        action: str,
        account_id: str,
        endpoint: str,
        model: type[BaseModel],
        whole: bool,
        submit: SubmitFunction,
    ) -> None:
        self.action = action
        self._account_id = account_id
        self._endpoint = endpoint
        self._model = model
        self._whole = whole
        self._submit = submit
        self._lookup: LookupFunction | None = None

    def set_lookup(self, lookup: LookupFunction) -> None:
        """Use ``lookup`` to ask the real system what it did under a key."""
        self._lookup = lookup

    def submit(self, command: Command, key: str) -> Observation:
        """Call the submit function with the command's arguments and ``key``."""
        if command.action != self.action:
            # Nothing was sent: a refusal is the truth, and it is final for this adapter.
            return Observation.rejected(f"effectledger/not-{self.action}")
        try:
            arguments = self._model.model_validate_json(canonical_bytes(command.arguments))
        except ValidationError:
            # The approved arguments no longer fit this code's model: nothing is sent.
            return Observation.rejected(f"effectledger/{self.action}-arguments-invalid")
        if self._whole:
            observation = self._submit(arguments, key=key)
        else:
            observation = self._submit(**dict(arguments), key=key)
        return _checked(observation, self.action)

    def lookup(self, key: str) -> Observation:
        """Call the lookup function, or answer ``Unknown`` without one."""
        if self._lookup is None:
            return Observation.unknown(f"effectledger/{self.action}-has-no-lookup")
        return _checked(self._lookup(key), self.action)


def _checked(observation: object, action: str) -> Observation:
    if not isinstance(observation, Observation):
        # The executor records an exception as Unknown: the call may have had its effect.
        raise TypeError(f"{action} must return an Observation, not {type(observation).__name__}")
    return observation
