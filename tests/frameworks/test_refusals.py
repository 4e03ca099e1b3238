"""The gate's refusals speak the vocabulary of every other caller, in one order.

Through each framework's own loop, on both backends: arguments the action does not take in the
state a framework is about to run (a smuggled ``approved_by`` or ``tenant_id``, an amount of
the wrong type) are ``invalid_input`` naming the field, with no row written and nothing sent,
before any digest is compared; only valid arguments that differ from the approved ones are
``digest_mismatch``. The gate's own denials carry the trace the direct API gives the same
denial, in the steps every caller uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from effectledger import EffectLedgerError
from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import AGENT, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS, Answered, PydanticAIDriver, tool_json

TRACE_STEPS = frozenset({"request", "tenant", "reservation", "dispatch", "reconciliation"})
"""The steps of the domain trace ``EffectLedger.perform`` and ``reconcile`` report."""


def _add(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(arguments: dict[str, Any]) -> None:
        arguments[field] = value

    return change


INVALID = {
    "approved_by": _add("approved_by", "admin"),
    "tenant_id": _add("tenant_id", "globex"),
    "amount_minor": _add("amount_minor", "30"),  # a string where the action takes an integer
}


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def _direct_denial(world: World, reason: str) -> list[list[str]]:
    """The trace the direct API gives the denial ``reason`` (on a proposal of its own)."""
    proposal = world.app.propose(AGENT, "refund_order", {**REFUND_30, "amount_minor": 7})
    if reason == "digest_mismatch":
        other = world.app.propose(AGENT, "refund_order", {**REFUND_30, "amount_minor": 8})
        approval = world.app.approve(REVIEWER, other)
        result = world.app.perform(AGENT, proposal, approval=approval.approval_id)
    else:
        result = world.app.perform(AGENT, proposal)
    assert result.reason == reason
    trace: list[list[str]] = result.to_dict()["trace"]
    return trace


@pytest.mark.parametrize("field", INVALID)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_invalid_arguments_are_invalid_input(world: World, framework: str, field: str) -> None:
    """An approved call whose saved arguments gain a field the action does not take, or a
    value of the wrong type, is ``invalid_input`` naming that field: no row, no effect."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    events = count_rows(world.store_url, "audit_events")
    answer = driver.resume(driver.edit(paused, INVALID[field]), AGENT, Grant.of(proposal))
    assert answer["error"]["code"] == "invalid_input"
    assert answer["error"]["details"]["field"] == field
    assert count_rows(world.store_url, "audit_events") == events
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().effects == 0


@pytest.mark.parametrize("field", INVALID)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_model_smuggling_a_field_is_invalid_input(world: World, framework: str, field: str) -> None:
    """A model's call with a field the action does not take, or a value of the wrong type, is
    ``invalid_input`` naming that field when it is proposed; no proposal is written."""
    arguments = dict(REFUND_30)
    INVALID[field](arguments)
    driver = DRIVERS[framework](world.app)
    try:
        driver.propose(AGENT, driver.pause(AGENT, arguments, "call-1"))
    except Answered as answered:  # Pydantic AI's tool proposes at the pause and answers
        error = answered.answer["error"]
    except EffectLedgerError as exc:  # the others' host proposes the paused call
        error = exc.to_dict()
    else:
        pytest.fail("the smuggled call was proposed")
    assert (error["code"], error["details"]["field"]) == ("invalid_input", field)
    assert count_rows(world.store_url, "proposals") == 0
    assert count_rows(world.store_url, "audit_events") == 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_invalid_arguments_without_a_grant_are_invalid_input(world: World, framework: str) -> None:
    """Arguments are checked before the grant: a smuggled field resumed without a grant is
    ``invalid_input``, not ``approval_missing``; nothing is written."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    events = count_rows(world.store_url, "audit_events")
    answer = driver.resume(driver.edit(paused, INVALID["approved_by"]), AGENT, None)
    assert (answer["error"]["code"], answer["error"]["details"]["field"]) == (
        "invalid_input",
        "approved_by",
    )
    assert count_rows(world.store_url, "audit_events") == events
    assert world.receiver.counts().effects == 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gate_denials_carry_the_direct_trace(world: World, framework: str) -> None:
    """The gate's ``digest_mismatch`` (valid arguments edited) and ``approval_missing`` (no
    grant) carry the direct API's trace for the same denial, in the callers' steps only."""
    driver = DRIVERS[framework](world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    mismatch = driver.resume(driver.edited(paused, 3000), AGENT, Grant.of(proposal))
    if framework == "langgraph":  # a checkpoint keeps its first resume value: a new pause
        paused = driver.pause(AGENT, REFUND_30, "call-1")
    missing = driver.resume(paused, AGENT, None)
    assert (mismatch["reason"], missing["reason"]) == ("digest_mismatch", "approval_missing")
    for answer in (mismatch, missing):
        assert {step for step, _ in answer["trace"]} <= TRACE_STEPS
    assert mismatch["trace"] == _direct_denial(world, "digest_mismatch")
    assert missing["trace"] == _direct_denial(world, "approval_missing")
    assert world.receiver.counts().effects == 0


def _pydantic_override(world: World, arguments: dict[str, Any], *, grant: bool) -> dict[str, Any]:
    """A Pydantic AI pause of a refund of 30, approved in the ledger, resumed with the
    reviewer's ``ToolApproved(override_args=arguments)`` and the call's grant (or none)."""
    from pydantic_ai import DeferredToolResults, ToolApproved
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

    driver = PydanticAIDriver(world.app)
    paused = driver.pause(AGENT, REFUND_30, "call-1")
    proposal = driver.propose(AGENT, paused)
    world.app.approve(REVIEWER, proposal)
    results = DeferredToolResults(
        approvals={"call-1": ToolApproved(override_args=arguments)},
        metadata={"call-1": Grant.of(proposal).to_dict()} if grant else {},
    )
    out = asyncio.run(
        driver._agent([]).run(
            message_history=ModelMessagesTypeAdapter.validate_json(paused.saved),
            deferred_tool_results=results,
            deps=AGENT,
        )
    )
    (part,) = [p for m in out.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    return tool_json(part.content)


@pytest.mark.parametrize(
    ("grant", "expected"), [(True, "digest_mismatch"), (False, "approval_missing")]
)
def test_pydantic_ai_edit_and_approve(world: World, grant: bool, expected: str) -> None:
    """A Pydantic AI reviewer's edit (``override_args``) presented with the approved call's
    grant is ``digest_mismatch``; presented without one, ``approval_missing``; no effect."""
    answer = _pydantic_override(world, {**REFUND_30, "amount_minor": 25}, grant=grant)
    assert (answer["outcome"], answer["reason"]) == ("denied", expected)
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().effects == 0


def test_pydantic_ai_edit_with_a_smuggled_field_is_invalid_input(world: World) -> None:
    """A reviewer's edit that adds a field the action does not take is ``invalid_input``
    naming it, before any grant or digest is compared; nothing is written."""
    events = count_rows(world.store_url, "audit_events")
    answer = _pydantic_override(world, {**REFUND_30, "approved_by": "admin"}, grant=True)
    assert (answer["error"]["code"], answer["error"]["details"]["field"]) == (
        "invalid_input",
        "approved_by",
    )
    assert count_rows(world.store_url, "audit_events") == events + 2  # proposed, approved
    assert count_rows(world.store_url, "operations") == 0
    assert world.receiver.counts().effects == 0
