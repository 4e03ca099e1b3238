"""Actions declared by decorating the function that talks to the real system.

The decorated function is the destination's ``submit``: it receives the validated arguments and
the idempotency key to send with the request, and returns an
:class:`~effectledger.model.Observation`. A second function, decorated with
:meth:`ActionHandle.lookup`, answers what the real system did under a key. The account and
endpoint are declared once, on the decorator, and the resulting :class:`ActionHandle` builds
both the :class:`~effectledger.actions.Action` the authority registers and the
:class:`~effectledger.destinations.Destination` the executor and the recovery worker call.

Arguments come from the function's signature: either one parameter typed with a pydantic model,
or plain typed parameters from which a model is made. Either way validation is strict and
unknown fields are refused. The key is the parameter named ``key``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, create_model

from effectledger.actions.policy import Policy, RulePolicy
from effectledger.actions.presentation import Display
from effectledger.actions.registry import Action
from effectledger.destinations.function import FunctionDestination, LookupFunction, SubmitFunction
from effectledger.errors import InvalidInput
from effectledger.model.operations import (
    Context,
    DestinationRef,
    validate_identifier,
)

__all__ = [
    "DEFAULT_POLICY_VERSION",
    "DEFAULT_PROPOSAL_TTL",
    "ActionHandle",
    "ActionOptions",
    "Declaration",
    "arguments_model",
    "strict_model",
]

DEFAULT_POLICY_VERSION = "approval-required"
"""The version recorded for the default policy: every effect needs an approver's approval."""

DEFAULT_PROPOSAL_TTL = timedelta(minutes=15)
"""How long a proposal may wait for its decision and admission unless the action says otherwise."""

UNVERSIONED = "unversioned"
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


def strict_model(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` itself if it refuses unknown fields, else a subclass of it that does."""
    if model.model_config.get("extra") == "forbid":
        return model
    config = ConfigDict(**{**model.model_config, "extra": "forbid"})
    strict: type[BaseModel] = type(model.__name__, (model,), {"model_config": config})
    return strict


def arguments_model(function: Callable[..., Any], name: str) -> tuple[type[BaseModel], bool]:
    """The pydantic model of ``function``'s arguments, and whether it takes the model whole.

    ``function`` must have a parameter named ``key`` (the idempotency key). Its other
    parameters are either exactly one typed with a pydantic model (taken whole), or plain
    typed parameters, each becoming a field (a default makes it optional).
    """
    try:
        hints = typing.get_type_hints(function)
    except Exception as exc:  # a forward reference that cannot be resolved
        raise InvalidInput(f"the annotations of {name} cannot be resolved: {exc}") from None
    parameters = inspect.signature(function).parameters
    if "key" not in parameters:
        raise InvalidInput(
            f"{name} must take the idempotency key as a parameter named 'key'", action=name
        )
    fields = [p for p in parameters.values() if p.name != "key"]
    for parameter in fields:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise InvalidInput(f"{name} cannot take *args or **kwargs", action=name)
        if parameter.name not in hints:
            raise InvalidInput(f"annotate parameter {parameter.name!r} of {name}", action=name)
    if len(fields) == 1:
        hint = hints[fields[0].name]
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            return strict_model(hint), True
    definitions: dict[str, Any] = {
        p.name: (hints[p.name], ... if p.default is p.empty else p.default) for p in fields
    }
    model_name = "".join(part.title() for part in name.split("_")) + "Arguments"
    model: type[BaseModel] = create_model(model_name, __config__=_STRICT, **definitions)
    return model, False


class ActionOptions(TypedDict, total=False):
    """What an action may declare besides its contract, arguments and destination.

    ``pool`` and ``units`` draw capacity (none unless a pool is named); ``target`` and
    ``version`` name the resource acted on and read its current version; ``policy`` defaults to
    approval required for every effect; ``ttl`` bounds how long a proposal may wait
    (``None``: the ledger's ``proposal_ttl``, :data:`DEFAULT_PROPOSAL_TTL` unless set);
    ``description`` is what a model and a reviewer are shown; ``display`` the one-line summary
    of the arguments a reviewer reads first, with its money fields
    (:class:`~effectledger.actions.presentation.Display`).
    """

    pool: str | None
    units: Callable[[Any], int] | None
    target: Callable[[Any], str] | None
    version: Callable[[Context, str], str] | None
    policy: Policy | None
    ttl: timedelta | None
    description: str
    display: Display | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Declaration:
    """What trusted code declares about an action besides its arguments and destination."""

    contract: str
    pool: str | None = None
    units: Callable[[Any], int] | None = None
    target: Callable[[Any], str] | None = None
    version: Callable[[Context, str], str] | None = None
    policy: Policy | None = None
    ttl: timedelta = DEFAULT_PROPOSAL_TTL
    description: str = ""
    display: Display | None = None

    def build(self, name: str, model: type[BaseModel], destination: DestinationRef) -> Action:
        """The registrable action; without a pool the action's own name holds zero units."""
        if self.pool is None and self.units is not None:
            raise InvalidInput(f"{name} counts units but names no capacity pool", action=name)
        units = self.units or (_one if self.pool is not None else _zero)
        return Action(
            name=name,
            contract_version=self.contract,
            arguments=model,
            policy=self.policy or RulePolicy(version=DEFAULT_POLICY_VERSION),
            destination=destination,
            pool=self.pool or name,
            units=units,
            target=self.target or _named(name),
            resource_version=self.version or _unversioned,
            description=self.description,
            proposal_ttl=self.ttl,
            display=self.display,
        )


def _one(arguments: Any) -> int:
    return 1


def _zero(arguments: Any) -> int:
    return 0


def _named(name: str) -> Callable[[Any], str]:
    return lambda arguments: name


def _unversioned(context: Context, target: str) -> str:
    return UNVERSIONED


class ActionHandle:
    """A registered action: pass it to ``propose``; its ``lookup`` decorates the lookup.

    ``action`` is the lower layer's :class:`~effectledger.actions.Action`; ``destination`` the
    adapter bound to its account and endpoint. Calling the handle is not offered: an effect
    happens only through a proposal, its authority and the executor.
    """

    def __init__(self, action: Action, destination: Any) -> None:
        self.action = action
        self.destination = destination

    @classmethod
    def from_function(
        cls,
        function: SubmitFunction,
        declaration: Declaration,
        *,
        name: str | None,
        account: str,
        endpoint: str,
        arguments: type[BaseModel] | None = None,
    ) -> ActionHandle:
        """The handle of an action whose submit is ``function``."""
        action_name = validate_identifier(name or function.__name__, "action")
        if arguments is not None:
            model, whole = strict_model(arguments), True
        else:
            model, whole = arguments_model(function, action_name)
        if not (isinstance(account, str) and account and isinstance(endpoint, str) and endpoint):
            raise InvalidInput(f"{action_name} needs an account and an endpoint")
        ref = DestinationRef(account_id=account, endpoint=endpoint)
        destination = FunctionDestination(
            action=action_name,
            account_id=account,
            endpoint=endpoint,
            model=model,
            whole=whole,
            submit=function,
        )
        handle = cls(declaration.build(action_name, model, ref), destination)
        handle.__doc__ = function.__doc__
        return handle

    @property
    def name(self) -> str:
        """The action's registered name."""
        return self.action.name

    @property
    def arguments(self) -> type[BaseModel]:
        """The pydantic model of the arguments (strict, unknown fields refused)."""
        return self.action.arguments

    def lookup(self, function: LookupFunction) -> LookupFunction:
        """Decorate the function that asks the real system what it did under a key."""
        if not isinstance(self.destination, FunctionDestination):
            raise InvalidInput(f"{self.name} is bound to a destination object with its own lookup")
        self.destination.set_lookup(function)
        return function

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments, for function-calling models."""
        return self.action.json_schema()

    def __repr__(self) -> str:
        return f"<action {self.name} ({self.action.contract_version})>"
