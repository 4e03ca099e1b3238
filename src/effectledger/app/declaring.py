"""The actions an application declares, and the one destination adapter for each endpoint.

:class:`Declarations` is a part :class:`~effectledger.EffectLedger` has: it holds the
:class:`~effectledger.actions.ActionRegistry`, one adapter per account and endpoint, and one
guarded :class:`~effectledger.workers.Executor` per adapter (the dispatch-time recheck of the
authority is its guard). :meth:`~effectledger.EffectLedger.action` and
:meth:`~effectledger.EffectLedger.register` are its front.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Unpack, overload

from pydantic import BaseModel

from effectledger.actions.functions import (
    ActionHandle,
    ActionOptions,
    Declaration,
    strict_model,
)
from effectledger.actions.registry import Action, ActionRegistry
from effectledger.authority import Authority
from effectledger.authority.rechecks import dispatch_rechecks
from effectledger.destinations import Destination
from effectledger.destinations.function import SubmitFunction
from effectledger.errors import DestinationMismatch, InvalidInput
from effectledger.model.operations import DestinationRef
from effectledger.workers.executor import Executor

__all__ = ["Declarations"]


class Declarations:
    """Declared actions, their adapters and the executors bound to them (see the module doc)."""

    def __init__(self, registry: ActionRegistry, authority: Authority) -> None:
        self.registry = registry
        self._authority = authority
        self.destinations: dict[DestinationRef, Destination] = {}
        self.executors: dict[DestinationRef, Executor] = {}

    @overload
    def action(
        self,
        *,
        contract: str,
        account: str,
        endpoint: str,
        name: str | None = None,
        arguments: type[BaseModel] | None = None,
        **options: Unpack[ActionOptions],
    ) -> Callable[[SubmitFunction], ActionHandle]: ...

    @overload
    def action(
        self,
        *,
        contract: str,
        destination: Destination,
        name: str,
        arguments: type[BaseModel],
        **options: Unpack[ActionOptions],
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
        **options: Unpack[ActionOptions],
    ) -> Callable[[SubmitFunction], ActionHandle] | ActionHandle:
        """Declare a consequential action; ``options`` are :class:`~effectledger.actions.
        functions.ActionOptions` (capacity, target and version, policy, a proposal's ``ttl``).

        With ``account`` and ``endpoint`` it decorates the function that performs the effect
        (``fn(arguments..., key) -> Observation``; decorate its lookup with ``@handle.lookup``).
        With ``destination`` (an adapter such as a ``SimulatedReceiver``) it returns the handle.
        ``ttl`` defaults to the ledger's ``LedgerSettings.proposal_ttl`` (15 minutes); past it
        the proposal is denied ``expired`` and needs a new one.
        """
        ttl = options.get("ttl") or self._authority.ledger.settings.proposal_ttl
        declaration = Declaration(
            contract=contract,
            pool=options.get("pool"),
            units=options.get("units"),
            target=options.get("target"),
            version=options.get("version"),
            policy=options.get("policy"),
            ttl=ttl,
            description=options.get("description", ""),
            display=options.get("display"),
        )
        if destination is not None:
            if account is not None or endpoint is not None or name is None or arguments is None:
                raise InvalidInput(
                    "an action bound to a destination object needs a name and "
                    "arguments, and takes no account or endpoint"
                )
            ref = DestinationRef(account_id=destination.account_id, endpoint=destination.endpoint)
            built = declaration.build(name, strict_model(arguments), ref)
            return self.register(ActionHandle(built, destination))
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
        adapter = handle.destination or self.destinations.get(ref)
        if adapter is None:
            raise InvalidInput(f"no destination adapter is bound to {handle.name}'s endpoint")
        if DestinationRef(account_id=adapter.account_id, endpoint=adapter.endpoint) != ref:
            raise InvalidInput(f"the adapter given for {handle.name} serves another endpoint")
        bound = self.destinations.get(ref)
        if bound is not None and bound is not adapter:
            raise InvalidInput(
                f"{ref.account_id} at {ref.endpoint} is already bound to another adapter",
                action=handle.name,
            )
        check = getattr(adapter, "check_action", None)
        if callable(check):  # an adapter that maps actions refuses one it cannot send
            check(handle.name)
        check = getattr(adapter, "check_action", None)
        if callable(check):  # an adapter that maps actions refuses one it cannot send
            check(handle.name)
        self.registry.register(handle.action)
        self.bind(adapter)
        handle.destination = adapter
        return handle

    def bind(self, destination: Destination) -> None:
        """Bind an adapter (once per account and endpoint) and its guarded executor."""
        ref = DestinationRef(account_id=destination.account_id, endpoint=destination.endpoint)
        bound = self.destinations.get(ref)
        if bound is destination:
            return
        if bound is not None:
            raise InvalidInput(f"{ref.account_id} at {ref.endpoint} already has an adapter")
        self.destinations[ref] = destination
        self.executors[ref] = Executor(
            self._authority.ledger,
            destination,
            guard=self._authority.dispatch_guard,
            batch_guard=functools.partial(
                dispatch_rechecks, self._authority.ledger, self._authority.registry
            ),
        )

    def bind_all(self, destinations: Iterable[Destination]) -> None:
        """:meth:`bind` each adapter in turn."""
        for destination in destinations:
            self.bind(destination)

    def executor_for(self, destination: DestinationRef) -> Executor:
        """The guarded executor bound to ``destination``; ``DestinationMismatch`` if none."""
        try:
            return self.executors[destination]
        except KeyError:
            raise DestinationMismatch(
                "no destination adapter is bound to that account and endpoint"
            ) from None
