"""The actions an application declares and the destination adapters they are bound to.

:class:`ActionCatalog` is the declaring half of :class:`~effectledger.app.EffectLedger`: it holds
the :class:`~effectledger.actions.ActionRegistry`, one adapter per account and endpoint, and the
:class:`~effectledger.service.EffectService` built over them (rebuilt when an adapter is bound).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, overload

from pydantic import BaseModel

from effectledger.actions import Action, ActionRegistry
from effectledger.destinations import Destination
from effectledger.errors import InvalidInput
from effectledger.function_actions import (
    ActionHandle,
    Declaration,
    SubmitFunction,
    strict_model,
)
from effectledger.ledger import Ledger
from effectledger.model import Context, DestinationRef
from effectledger.policy import Policy
from effectledger.service import EffectService

__all__ = ["ActionCatalog"]


class ActionCatalog:
    """Declared actions and their adapters over one ledger; see the module docstring."""

    def __init__(self, ledger: Ledger, destinations: Iterable[Destination] = ()) -> None:
        self.ledger = ledger
        self.registry = ActionRegistry()
        self._destinations: dict[DestinationRef, Destination] = {}
        self.service = EffectService(ledger, self.registry, ())
        for destination in destinations:
            self._bind(destination)

    # -- declaring actions ---------------------------------------------------------------

    @overload
    def action(
        self,
        *,
        contract: str,
        account: str,
        endpoint: str,
        name: str | None = None,
        arguments: type[BaseModel] | None = None,
        pool: str | None = None,
        units: Callable[[Any], int] | None = None,
        target: Callable[[Any], str] | None = None,
        version: Callable[[Context, str], str] | None = None,
        policy: Policy | None = None,
        ttl: timedelta = timedelta(minutes=15),
        description: str = "",
    ) -> Callable[[SubmitFunction], ActionHandle]: ...

    @overload
    def action(
        self,
        *,
        contract: str,
        destination: Destination,
        name: str,
        arguments: type[BaseModel],
        pool: str | None = None,
        units: Callable[[Any], int] | None = None,
        target: Callable[[Any], str] | None = None,
        version: Callable[[Context, str], str] | None = None,
        policy: Policy | None = None,
        ttl: timedelta = timedelta(minutes=15),
        description: str = "",
    ) -> ActionHandle: ...

    def action(
        self,
        *,
        contract: str,
        account: str | None = None,
        endpoint: str | None = None,
        destination: Destination | None = None,
        name: str | None = None,
        arguments: type[BaseModel] | None = None,
        pool: str | None = None,
        units: Callable[[Any], int] | None = None,
        target: Callable[[Any], str] | None = None,
        version: Callable[[Context, str], str] | None = None,
        policy: Policy | None = None,
        ttl: timedelta = timedelta(minutes=15),
        description: str = "",
    ) -> Callable[[SubmitFunction], ActionHandle] | ActionHandle:
        """Declare a consequential action.

        With ``account`` and ``endpoint`` it decorates the function that performs the effect
        (``fn(arguments..., key) -> Observation``); decorate its lookup with
        ``@handle.lookup``. With ``destination`` (an existing adapter, such as a
        :class:`~effectledger.destinations.simulated.SimulatedReceiver`) it returns the handle
        at once. ``pool`` and ``units`` draw capacity (none unless a pool is named);
        ``target`` and ``version`` name the resource acted on and read its current version;
        ``policy`` defaults to approval required for every effect; ``ttl`` bounds how long a
        proposal may wait.
        """
        declaration = Declaration(
            contract=contract,
            pool=pool,
            units=units,
            target=target,
            version=version,
            policy=policy,
            ttl=ttl,
            description=description,
        )
        if destination is not None:
            if account is not None or endpoint is not None or name is None or arguments is None:
                raise InvalidInput(
                    "an action bound to a destination object needs a name and "
                    "arguments, and takes no account or endpoint"
                )
            ref = DestinationRef(account_id=destination.account_id, endpoint=destination.endpoint)
            built = declaration.build(name, strict_model(arguments), ref)
            handle = ActionHandle(built, destination)
            return self.register(handle)
        if account is None or endpoint is None:
            raise InvalidInput("declare the action's account and endpoint, or a destination")

        def decorate(function: SubmitFunction) -> ActionHandle:
            handle = ActionHandle.from_function(
                function,
                declaration,
                name=name,
                account=account,
                endpoint=endpoint,
                arguments=arguments,
            )
            return self.register(handle)

        return decorate

    def register(
        self, action: ActionHandle | Action, destination: Destination | None = None
    ) -> ActionHandle:
        """Register a handle, or a lower-layer :class:`Action` with its destination adapter.

        An account and endpoint are bound to one adapter: a second, different adapter for the
        same pair is refused, as is a second action under the same name, and an adapter that
        maps actions (``check_action``, as :class:`~effectledger.destinations.http.HttpDestination`
        has) refuses an action it has no mapping for.
        """
        handle = action if isinstance(action, ActionHandle) else ActionHandle(action, destination)
        ref = handle.action.destination
        adapter = handle.destination or self._destinations.get(ref)
        if adapter is None:
            raise InvalidInput(f"no destination adapter is bound to {handle.name}'s endpoint")
        if DestinationRef(account_id=adapter.account_id, endpoint=adapter.endpoint) != ref:
            raise InvalidInput(f"the adapter given for {handle.name} serves another endpoint")
        bound = self._destinations.get(ref)
        if bound is not None and bound is not adapter:
            raise InvalidInput(
                f"{ref.account_id} at {ref.endpoint} is already bound to another adapter",
                action=handle.name,
            )
        check = getattr(adapter, "check_action", None)
        if callable(check):  # an adapter that maps actions refuses one it cannot send
            check(handle.name)
        self.registry.register(handle.action)
        self._bind(adapter)
        handle.destination = adapter
        return handle

    def _bind(self, destination: Destination) -> None:
        ref = DestinationRef(account_id=destination.account_id, endpoint=destination.endpoint)
        bound = self._destinations.get(ref)
        if bound is destination:
            return
        if bound is not None:
            raise InvalidInput(f"{ref.account_id} at {ref.endpoint} already has an adapter")
        self._destinations[ref] = destination
        # The service keeps one executor per adapter: rebuilt over the same ledger and registry.
        self.service = EffectService(self.ledger, self.registry, self._destinations.values())
