"""Decorated actions: arguments from the signature, strict models, a two-function destination."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import BaseModel

from effectledger import (
    ActionHandle,
    Command,
    DenialReason,
    EffectOutcome,
    EffectResult,
    InvalidInput,
    Observation,
    OperationState,
    Outcome,
    to_dict,
)
from effectledger.actions.functions import (
    DEFAULT_POLICY_VERSION,
    Declaration,
    arguments_model,
)
from effectledger.actions.policy import Tier
from effectledger.destinations.function import FunctionDestination


class Loose(BaseModel):
    """A model that would ignore unknown fields on its own."""

    order_id: str
    amount_minor: int


def _handle(function: object, **options: object) -> ActionHandle:
    return ActionHandle.from_function(
        function,  # type: ignore[arg-type]
        Declaration(contract="c-v1", **options),  # type: ignore[arg-type]
        name=None,
        account="acct",
        endpoint="https://x.invalid",
    )


def test_plain_parameters_become_a_strict_model() -> None:
    """Typed parameters become fields (defaults optional); extra fields and coercion are refused."""

    def pay(order_id: str, amount_minor: int, key: str, note: str = "") -> Observation:
        raise AssertionError("not called")

    handle = _handle(pay)
    schema = handle.json_schema()
    assert schema["required"] == ["order_id", "amount_minor"]
    assert schema["additionalProperties"] is False
    with pytest.raises(InvalidInput):
        handle.action.validate({"order_id": "o", "amount_minor": 1, "approved_by": "me"})
    with pytest.raises(InvalidInput):
        handle.action.validate({"order_id": "o", "amount_minor": "1"})
    assert handle.action.validate({"order_id": "o", "amount_minor": 1}).note == ""  # type: ignore[attr-defined]


def test_a_loose_model_is_made_to_refuse_unknown_fields() -> None:
    """A parameter typed with a model that ignores extras gets a subclass that refuses them."""

    def pay(args: Loose, key: str) -> Observation:
        raise AssertionError("not called")

    model, whole = arguments_model(pay, "pay")
    assert whole
    assert issubclass(model, Loose)
    with pytest.raises(InvalidInput):
        _handle(pay).action.validate({"order_id": "o", "amount_minor": 1, "tenant_id": "x"})


def test_signature_problems_are_clear_errors() -> None:
    """No ``key`` parameter, an unannotated parameter or ``**kwargs`` is refused at declaration."""

    def no_key(order_id: str) -> Observation:
        raise AssertionError

    def untyped(order_id, key: str) -> Observation:  # type: ignore[no-untyped-def]
        raise AssertionError

    def variadic(key: str, **extra: str) -> Observation:
        raise AssertionError

    for function in (no_key, untyped, variadic):
        with pytest.raises(InvalidInput):
            _handle(function)


def test_defaults_need_approval_and_hold_no_capacity() -> None:
    """Without options: approval required, zero units in the action's own pool, unversioned."""

    def pay(order_id: str, key: str) -> Observation:
        raise AssertionError

    action = _handle(pay).action
    assert action.policy.version == DEFAULT_POLICY_VERSION
    assert action.units(None) == 0
    assert action.pool == "pay"
    assert action.target(None) == "pay"
    assert action.proposal_ttl == timedelta(minutes=15)
    with pytest.raises(InvalidInput):
        _handle(pay, units=lambda a: 1)  # units without a pool
    assert _handle(pay, pool="p").action.units(None) == 1


def test_submit_gets_the_stored_arguments_and_the_key() -> None:
    """The stored arguments and the key reach the function; a foreign or unfit command does not."""
    calls: list[tuple[object, str]] = []

    def pay(args: Loose, key: str) -> Observation:
        calls.append((args, key))
        return Observation.accepted("re_1", "pay/re_1")

    destination = _handle(pay).destination
    command = Command(
        action="pay", contract_version="c-v1", arguments={"order_id": "o", "amount_minor": 3}
    )
    assert destination.submit(command, "k-1").outcome is Outcome.ACCEPTED
    ((args, key),) = calls
    assert (args.order_id, args.amount_minor, key) == ("o", 3, "k-1")  # type: ignore[attr-defined]
    other = Command(action="refund", contract_version="c-v1", arguments={})
    assert destination.submit(other, "k-2").outcome is Outcome.PERMANENT_REJECTION
    unfit = Command(action="pay", contract_version="c-v1", arguments={"order_id": "o"})
    assert destination.submit(unfit, "k-3").outcome is Outcome.PERMANENT_REJECTION
    assert len(calls) == 1


def test_lookup_is_unknown_until_declared_and_results_must_be_observations() -> None:
    """No lookup function answers Unknown; a function returning something else raises."""

    def pay(order_id: str, key: str) -> Observation:
        return "done"  # type: ignore[return-value]

    handle = _handle(pay)
    destination = handle.destination
    assert isinstance(destination, FunctionDestination)
    assert destination.lookup("k").outcome is Outcome.UNKNOWN
    handle.lookup(lambda key: Observation.rejected(f"pay/{key}"))
    assert destination.lookup("k").outcome is Outcome.PERMANENT_REJECTION
    with pytest.raises(TypeError):
        destination.submit(
            Command(action="pay", contract_version="c-v1", arguments={"order_id": "o"}), "k"
        )


def test_results_carry_enums_and_serialize_unchanged() -> None:
    """Strings become enums, denials raise on request, and the JSON keeps the string codes."""
    result = EffectResult(
        outcome="denied",  # type: ignore[arg-type]
        operation_id=None,
        state=None,
        reason="capacity_exceeded",  # type: ignore[arg-type]
        provider_reference=None,
        trace=(),
    )
    assert result.outcome is EffectOutcome.DENIED
    assert result.reason is DenialReason.CAPACITY_EXCEEDED
    assert json.loads(json.dumps(result.to_dict()))["reason"] == "capacity_exceeded"
    unknown = EffectResult(
        outcome=EffectOutcome.PERFORMED,
        operation_id="op-1",
        state=OperationState.OUTCOME_UNKNOWN,
        reason=None,
        provider_reference=None,
        trace=(),
    )
    assert unknown.raise_for_denial() is unknown
    assert unknown.uncertain
    assert to_dict(unknown)["uncertain"] is True
    assert to_dict({"tier": Tier.PREAUTHORIZED, "span": timedelta(seconds=2)}) == {
        "tier": "preauthorized",
        "span": 2.0,
    }
