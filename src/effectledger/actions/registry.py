"""The registry of consequential actions.

An action is registered by trusted application code: its name and contract version, the pydantic
model its arguments must satisfy, the policy that decides it, the destination it is bound to, the
capacity pool it draws from and how many units one operation takes, and a callback that reads the
target resource's current version (so approval and dispatch can tell when the world moved on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError

from effectledger.actions.policy import Policy
from effectledger.actions.presentation import Display
from effectledger.errors import InvalidInput, NotFound
from effectledger.model.operations import Context, DestinationRef, validate_identifier

__all__ = ["Action", "ActionRegistry"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One kind of consequential tool call and everything trusted code decides about it.

    ``target(arguments)`` names the resource acted on; ``units(arguments)`` is the capacity one
    operation takes from ``pool``; ``resource_version(context, target)`` reads the target's
    current version from the application (it is called at proposal, admission and dispatch).
    ``proposal_ttl`` bounds how long a proposal may wait for approval and dispatch.
    ``display`` is the summary a reviewer reads first (its fields must be argument fields).
    """

    name: str
    contract_version: str
    arguments: type[BaseModel]
    policy: Policy
    destination: DestinationRef
    pool: str
    units: Callable[[Any], int]
    target: Callable[[Any], str]
    resource_version: Callable[[Context, str], str]
    description: str = ""
    proposal_ttl: timedelta = timedelta(minutes=15)
    display: Display | None = None
    """How its arguments read to a reviewer (:mod:`effectledger.actions.presentation`)."""

    def __post_init__(self) -> None:
        validate_identifier(self.name, "action")
        validate_identifier(self.contract_version, "contract_version")
        validate_identifier(self.pool, "pool")
        if self.display is not None:
            self.display.check(self.name, self.arguments)

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """The arguments as the action's model, or ``InvalidInput`` listing what is wrong.

        Unknown fields are refused when the model forbids extras (it should: a smuggled
        ``approved_by`` or ``tenant_id`` must never be silently dropped or used).
        """
        if not isinstance(arguments, Mapping):
            raise InvalidInput(f"{self.name} takes an object of arguments")
        try:
            return self.arguments.model_validate(dict(arguments), strict=True)
        except ValidationError as exc:
            problems = [
                {"field": ".".join(str(part) for part in error["loc"]), "problem": error["type"]}
                for error in exc.errors()[:20]
            ]
            raise InvalidInput(
                f"the arguments of {self.name} are invalid: "
                + "; ".join(f"{p['field']} ({p['problem']})" for p in problems),
                action=self.name,
                problems=problems,
            ) from None

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments, for function-calling models."""
        return self.arguments.model_json_schema()


class ActionRegistry:
    """The actions an application allows, by name."""

    def __init__(self, actions: tuple[Action, ...] | list[Action] = ()) -> None:
        self._actions: dict[str, Action] = {}
        for action in actions:
            self.register(action)

    def register(self, action: Action) -> Action:
        """Add ``action``; a second action under the same name is refused."""
        if action.name in self._actions:
            raise InvalidInput(f"action {action.name} is already registered", action=action.name)
        self._actions[action.name] = action
        return action

    def get(self, name: str) -> Action:
        """The action called ``name``, or ``NotFound``."""
        try:
            return self._actions[name]
        except (KeyError, TypeError):
            raise NotFound(f"no action {name!r} is registered", action=str(name)[:64]) from None

    def __iter__(self) -> Iterator[Action]:
        return iter(self._actions.values())

    def __len__(self) -> int:
        return len(self._actions)
