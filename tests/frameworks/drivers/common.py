"""What every framework driver shares: the pause a host keeps, the driver interface, and the
edits a test makes to a saved state wherever a framework keeps the refund's arguments."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from effectledger import Context, Proposal
from effectledger.callers.frameworks.gate import Grant

JSON = dict[str, Any]
ACTION = "refund_order"
Edit = Callable[[dict[str, Any]], None]
"""A change to a refund's arguments, made in place."""


Call = tuple[str, Mapping[str, Any]]
"""One call a scripted model makes: its id and the refund's arguments."""


def adapter_options(context_of: Any) -> dict[str, Any]:
    """The keyword arguments that hand a driver's ``context_of=`` to its adapter."""
    return {} if context_of is None else {"context_of": context_of}


class Answered(Exception):
    """The tool answered without pausing (a refusal the model reads): its JSON."""

    def __init__(self, answer: JSON) -> None:
        super().__init__(answer)
        self.answer = answer


@dataclass
class Paused:
    """What a host keeps at the pause: the saved state, the call id, its handle to resume and
    the conversation the call belongs to (every pause starts a new one)."""

    saved: Any
    call_id: str
    handle: Any = None
    scope: str = ""


class Driver(Protocol):
    """Pause a call of ``refund_order`` and resume the saved state.

    ``pause_batch`` pauses one model turn making several calls; ``propose_batch`` gives the
    proposal of each paused call (the host proposes it, or reads what the pause proposed) and
    ``resume_batch`` resumes with the grants of some and the framework's own rejection (with
    its reason, where the framework carries one) of the others, answering each call's JSON (or
    ``{"text": ...}`` when the framework answers a rejection in words of its own). ``shown``
    holds every ledger tool result the scripted model was given, as text, in order.
    """

    name: str
    shown: list[str]

    def pause(self, context: Any, arguments: Mapping[str, Any], call_id: str) -> Paused: ...

    def propose(self, context: Context, paused: Paused) -> Proposal: ...

    def resume(self, paused: Paused, context: Any, grant: Grant | None) -> JSON: ...

    def edited(self, paused: Paused, amount: int) -> Paused: ...

    def edit(self, paused: Paused, change: Edit) -> Paused: ...

    def pause_batch(self, context: Any, calls: Sequence[Call]) -> Paused: ...

    def propose_batch(self, context: Context, paused: Paused) -> dict[str, Proposal]: ...

    def resume_batch(
        self,
        paused: Paused,
        context: Any,
        grants: Mapping[str, Grant],
        rejected: Mapping[str, str],
        reviewer: Context | None = None,
    ) -> dict[str, JSON]: ...


def last_tool_message(state: Mapping[str, Any]) -> Any:
    """The last tool message of a LangGraph state."""
    return [m for m in state["messages"] if m.type == "tool"][-1]


def tool_json(text: str) -> JSON:
    """The JSON a ledger tool answered."""
    data: JSON = json.loads(text)
    return data


def answer_of(text: Any) -> JSON:
    """A tool result as the test reads it: the ledger tool's JSON, or a framework's own words
    (a rejection it answers itself) as ``{"text": ...}``."""
    try:
        data = json.loads(text) if isinstance(text, str | bytes) else text
    except ValueError:
        return {"text": str(text)}
    return data if isinstance(data, dict) else {"text": str(text)}


def amount_edit(amount: int) -> Edit:
    """The edit that sets the refund's amount."""

    def change(arguments: dict[str, Any]) -> None:
        arguments["amount_minor"] = amount

    return change


def edit_arguments(value: Any, change: Edit, seen: dict[int, Any] | None = None) -> bool:
    """Apply ``change`` to every refund's arguments (a dict with ``order_id`` and
    ``amount_minor``) wherever they sit, in JSON text too."""
    seen = {} if seen is None else seen
    if id(value) in seen:
        return False
    seen[id(value)] = value  # held, so that no id is reused while the walk lasts
    hit = False
    if isinstance(value, dict):
        if "amount_minor" in value and "order_id" in value:
            change(value)
            return True
        for key, item in list(value.items()):
            if isinstance(item, str) and '"amount_minor"' in item:
                try:
                    inner = json.loads(item)
                except ValueError:
                    continue
                if edit_arguments(inner, change, seen):
                    value[key] = json.dumps(inner)
                    hit = True
            else:
                hit |= edit_arguments(item, change, seen)
    elif isinstance(value, list | tuple):
        for item in value:
            hit |= edit_arguments(item, change, seen)
    elif hasattr(value, "__dict__") or hasattr(type(value), "__slots__"):
        attributes = list(getattr(value, "__dict__", {}).values())
        attributes += [getattr(value, a, None) for a in getattr(type(value), "__slots__", ())]
        for item in attributes:
            hit |= edit_arguments(item, change, seen)
    return hit
