"""Function tools: definitions checked against the provider SDKs' own types, and the host call.

The ``openai`` and ``anthropic`` packages are used only for their type definitions (no network):
every definition and every answer must be a value of the SDK's parameter types, and the SDKs'
tool-call objects must be answerable with one call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from anthropic.types import ToolParam, ToolResultBlockParam, ToolUseBlock
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall
from openai.types.responses.response_input_param import FunctionCallOutput
from openai.types.shared_params import FunctionDefinition
from pydantic import BaseModel, ConfigDict, TypeAdapter

from effectledger import Context, InvalidInput, OperationState, SubmitMode, connect
from effectledger.actions.policy import RulePolicy
from effectledger.actions.registry import Action
from effectledger.callers.tools.function_tools import (
    IDENTITY_FIELDS,
    MAX_ARGUMENTS_BYTES,
    FunctionTools,
    anthropic_tools,
    openai_chat_tools,
    openai_responses_tools,
)
from effectledger.callers.tools.guidance import UNCERTAIN, result_guidance
from tests.callers.scenarios import AGENT, OUTSIDER, REFUND_30, REVIEWER, World, fresh_world
from tests.conftest import count_rows


def conforms(kind: Any, value: dict[str, Any]) -> None:
    """``value`` is a valid ``kind`` (an SDK TypedDict): right types, no keys it does not know."""
    TypeAdapter(kind).validate_python(value)
    hints = typing.get_type_hints(kind)
    assert set(value) <= set(hints), set(value) - set(hints)
    assert kind.__required_keys__ <= set(value)


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action registered."""
    with fresh_world(store_url, tmp_path) as made:
        yield made


@pytest.fixture
def tools(world: World) -> FunctionTools:
    """The function tools of the world's ledger."""
    return FunctionTools(world.app)


def offline_tools(tmp_path: Path) -> FunctionTools:
    """Tools over a SQLite world, for checks of the definitions alone."""
    from effectledger import ManualClock
    from tests.callers.scenarios import build_world

    world = build_world(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path, ManualClock())
    world.close()
    return FunctionTools(world.app)


def test_definitions_are_openai_chat_completions_tools(tmp_path: Path) -> None:
    """Every definition is a ChatCompletionFunctionToolParam with a FunctionDefinition inside."""
    rendered = openai_chat_tools(offline_tools(tmp_path).definitions())
    assert [tool["function"]["name"] for tool in rendered] == [
        "propose_refund_order",
        "perform_proposal",
        "operation_status",
    ]
    for tool in rendered:
        conforms(ChatCompletionFunctionToolParam, tool)
        conforms(FunctionDefinition, tool["function"])
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])


def test_definitions_are_openai_responses_tools(tmp_path: Path) -> None:
    """Every definition is a Responses API FunctionToolParam."""
    for tool in openai_responses_tools(offline_tools(tmp_path).definitions()):
        conforms(FunctionToolParam, tool)


def test_definitions_are_anthropic_tools(tmp_path: Path) -> None:
    """Every definition is an Anthropic ToolParam with an object input schema."""
    for tool in anthropic_tools(offline_tools(tmp_path).definitions()):
        conforms(ToolParam, tool)
        assert tool["input_schema"]["type"] == "object"


def test_propose_tool_takes_only_the_action_arguments(tmp_path: Path) -> None:
    """propose_<action> lists the action's fields with their descriptions and, optional and
    not required, the model's ``stated_reason``; nothing else."""
    definition = offline_tools(tmp_path).definitions()[0]
    schema = dict(definition.parameters)
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "order_id", "amount_minor", "currency", "reason", "stated_reason"
    }  # fmt: skip
    assert "stated_reason" not in schema["required"]
    assert definition.takes_reason
    assert not IDENTITY_FIELDS & set(schema["properties"])
    assert all(field["description"] for field in schema["properties"].values())
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(REFUND_30)
    assert not validator.is_valid({**REFUND_30, "tenant_id": "globex"})
    assert not validator.is_valid({**REFUND_30, "amount_minor": "30"})
    assert (definition.read_only, definition.destructive, definition.idempotent) == (
        False,
        False,
        False,
    )


def test_operation_tools_take_only_ids(tmp_path: Path) -> None:
    """perform_proposal and operation_status take ids and nothing else, and say what they do."""
    _, perform, status = offline_tools(tmp_path).definitions()
    assert set(perform.parameters["properties"]) == {"proposal_id", "approval_id"}
    assert perform.parameters["required"] == ["proposal_id"]
    assert set(status.parameters["properties"]) == {"operation_id"}
    for definition in (perform, status):
        assert definition.parameters["additionalProperties"] is False
        assert all(p["type"] == "string" for p in definition.parameters["properties"].values())
    assert (perform.read_only, perform.destructive, perform.idempotent) == (False, True, True)
    assert (status.read_only, status.destructive, status.idempotent) == (True, False, True)


def test_an_action_declaring_identity_fields_gets_no_tool(world: World) -> None:
    """An action whose arguments name a tenant or an approver is refused a tool definition."""

    class Smuggling(BaseModel):
        model_config = ConfigDict(extra="forbid")
        order_id: str
        approved_by: str

    action = Action(
        name="smuggle",
        contract_version="v1",
        arguments=Smuggling,
        policy=RulePolicy(version="p1"),
        destination=next(iter(world.service.destinations)),
        pool="refunds",
        units=lambda arguments: 1,
        target=lambda arguments: arguments.order_id,
        resource_version=lambda context, target: "v1",
    )
    world.app.registry.register(action)
    with pytest.raises(InvalidInput, match="identity fields"):
        FunctionTools(world.app)


@pytest.mark.parametrize("name", ["refund.order", "refunds/v2", "r" * 60])
def test_an_action_name_no_provider_accepts_gets_no_tool(world: World, name: str) -> None:
    """Tool names must suit every provider ([A-Za-z0-9_-], 64 at most): others are refused."""
    original = world.app.registry.get("refund_order")
    world.app.registry.register(
        Action(
            name=name,
            contract_version="v1",
            arguments=original.arguments,
            policy=original.policy,
            destination=original.destination,
            pool="refunds",
            units=original.units,
            target=original.target,
            resource_version=original.resource_version,
        )
    )
    with pytest.raises(InvalidInput, match="cannot be a tool name"):
        FunctionTools(world.app)


def test_an_unknown_tool_call_format_is_refused(tools: FunctionTools) -> None:
    """answer() refuses an object that is no provider's tool call, before any dispatch."""
    with pytest.raises(InvalidInput, match="not a tool call"):
        tools.answer(AGENT, {"type": "text", "text": "perform_proposal"})


def _approved(world: World, tools: FunctionTools) -> tuple[dict[str, Any], str]:
    proposal = tools.call(AGENT, "propose_refund_order", json.dumps(REFUND_30)).data
    approval = world.service.approve(REVIEWER, proposal["proposal_id"], digest=proposal["digest"])
    return proposal, approval.approval_id


def test_each_provider_tool_call_is_answered_in_one_call(
    world: World, tools: FunctionTools
) -> None:
    """Anthropic, Responses and Chat Completions tool calls get answers of the SDKs' own types."""
    use = ToolUseBlock(type="tool_use", id="toolu_1", name="propose_refund_order", input=REFUND_30)
    block = tools.answer(AGENT, use)
    conforms(ToolResultBlockParam, block)
    proposal = json.loads(block["content"].split("\n", 1)[0])
    stored = world.service.authority.get_proposal(AGENT, proposal["proposal_id"])
    assert stored.correlation == {"tool_call_id": "toolu_1", "framework": "anthropic"}
    approval = world.service.approve(REVIEWER, proposal["proposal_id"], digest=proposal["digest"])

    call = ResponseFunctionToolCall(
        type="function_call",
        call_id="call_2",
        name="perform_proposal",
        arguments=json.dumps(
            {"proposal_id": proposal["proposal_id"], "approval_id": approval.approval_id}
        ),
    )
    item = tools.answer(AGENT, call)
    conforms(FunctionCallOutput, item)
    performed = json.loads(item["output"].split("\n", 1)[0])
    assert (performed["outcome"], performed["state"]) == ("performed", "SUCCEEDED")

    chat_call = ChatCompletionMessageFunctionToolCall.model_validate(
        {
            "id": "call_3",
            "type": "function",
            "function": {
                "name": "operation_status",
                "arguments": json.dumps({"operation_id": performed["operation_id"]}),
            },
        }
    )
    message = tools.answer(AGENT, chat_call)
    conforms(ChatCompletionToolMessageParam, message)
    assert json.loads(message["content"].split("\n", 1)[0])["state"] == "SUCCEEDED"
    assert world.receiver.counts().effects == 1


def test_perform_result_is_the_service_json(world: World, tools: FunctionTools) -> None:
    """The perform tool's data is EffectResult.to_dict() of the same call, word for word."""
    proposal, approval_id = _approved(world, tools)
    ids = {"proposal_id": proposal["proposal_id"], "approval_id": approval_id}
    tools.call(AGENT, "perform_proposal", ids)
    via_tool = tools.call(AGENT, "perform_proposal", ids)
    direct = world.app.perform(AGENT, proposal["proposal_id"], approval=approval_id)
    assert via_tool.data == direct.to_dict()
    assert not via_tool.is_error
    assert via_tool.text.startswith(json.dumps(direct.to_dict(), separators=(",", ":")))


def test_uncertain_outcome_is_never_worded_as_done_or_failed(
    world: World, tools: FunctionTools
) -> None:
    """A lost reply reads as pending in the result and the status, and tells the model so."""
    world.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    proposal, approval_id = _approved(world, tools)
    ids = {"proposal_id": proposal["proposal_id"], "approval_id": approval_id}
    performed = tools.call(AGENT, "perform_proposal", ids)
    status = tools.call(AGENT, "operation_status", {"operation_id": proposal["operation_id"]})
    for result in (performed, status):
        assert (result.data["state"], result.data["uncertain"]) == ("OUTCOME_UNKNOWN", True)
        assert result.guidance == UNCERTAIN
        assert not result.is_error
    assert world.receiver.counts().effects == 1
    for state in OperationState:
        wording = result_guidance("replayed", state, None)
        assert (wording == UNCERTAIN) is state.uncertain


def _absent(world: World, proposals: int = 0) -> None:
    assert count_rows(world.store_url, "proposals") == proposals
    assert count_rows(world.store_url, "operations") == 0
    assert count_rows(world.store_url, "approval_consumptions") == 0
    assert world.receiver.counts().submissions == 0
    assert world.receiver.counts().effects == 0


BAD_PROPOSALS = [
    pytest.param("{not json", "invalid_input", id="malformed-json"),
    pytest.param("[1, 2]", "invalid_input", id="array"),
    pytest.param('"refund"', "invalid_input", id="string"),
    pytest.param('{"order_id": "ord-1", "order_id": "ord-2"}', "invalid_input", id="dup-key"),
    pytest.param('{"amount_minor": NaN}', "invalid_input", id="nan"),
    pytest.param(" " * (MAX_ARGUMENTS_BYTES + 1), "invalid_input", id="oversize"),
    pytest.param({**REFUND_30, "amount_minor": "30"}, "invalid_input", id="wrong-type"),
    pytest.param({**REFUND_30, "amount_minor": 30.5}, "invalid_input", id="float"),
    pytest.param({**REFUND_30, "currency": "XXX"}, "invalid_input", id="bad-currency"),
    pytest.param({**REFUND_30, "priority": "high"}, "tool_arguments_rejected", id="unknown"),
    pytest.param({**REFUND_30, "tenant_id": "globex"}, "tool_arguments_rejected", id="tenant"),
    pytest.param({**REFUND_30, "approved_by": "admin"}, "tool_arguments_rejected", id="approver"),
    pytest.param({"order_id": "ord-1001"}, "invalid_input", id="missing-fields"),
]


@pytest.mark.parametrize(("arguments", "code"), BAD_PROPOSALS)
def test_bad_proposal_arguments_write_nothing(
    world: World, tools: FunctionTools, arguments: Any, code: str
) -> None:
    """Malformed, mistyped, invented or identity arguments are refused with a stable code."""
    result = tools.call(AGENT, "propose_refund_order", arguments)
    assert result.is_error
    assert result.data["error"]["code"] == code
    assert "nothing was recorded" in result.guidance
    _absent(world)
    assert count_rows(world.store_url, "audit_events") == 0


def test_bad_operation_arguments_write_nothing(world: World, tools: FunctionTools) -> None:
    """Invented fields, ids of the wrong shape or type, and unknown tools are refused unused."""
    proposal, approval_id = _approved(world, tools)
    events = count_rows(world.store_url, "audit_events")
    pid = proposal["proposal_id"]
    cases = [
        ("perform_proposal", {"proposal_id": pid, "approval_id": approval_id, "actor_id": "rita"},
         "tool_arguments_rejected"),
        ("perform_proposal", {"proposal_id": pid, "tenant_id": "acme"}, "tool_arguments_rejected"),
        ("perform_proposal", {"proposal_id": pid, "amount_minor": 3000}, "tool_arguments_rejected"),
        ("perform_proposal", {"proposal_id": "../../etc"}, "invalid_input"),
        ("perform_proposal", {"proposal_id": 42}, "invalid_input"),
        ("perform_proposal", {}, "invalid_input"),
        ("perform_proposal", {"proposal_id": pid, "approval_id": ["a"]}, "invalid_input"),
        ("operation_status", {"operation_id": "op 1"}, "invalid_input"),
        ("operation_status", {"operation_id": "op-unknown"}, "not_found"),
        ("approve_proposal", {"proposal_id": pid}, "not_found"),
        ("propose_refund_order_v2", REFUND_30, "not_found"),
    ]  # fmt: skip
    for name, arguments, code in cases:
        result = tools.call(AGENT, name, arguments)
        assert (result.is_error, result.data["error"]["code"]) == (True, code), (name, arguments)
    _absent(world, proposals=1)
    assert count_rows(world.store_url, "audit_events") == events
    assert world.service.authority.approval_consumed_by(AGENT, approval_id) is None


def test_another_tenants_ids_read_as_unknown(world: World, tools: FunctionTools) -> None:
    """Another tenant's caller gets not_found for the proposal and the operation, nothing more."""
    proposal, approval_id = _approved(world, tools)
    ids = {"proposal_id": proposal["proposal_id"], "approval_id": approval_id}
    foreign = tools.call(OUTSIDER, "perform_proposal", ids)
    assert (foreign.data["outcome"], foreign.data["reason"]) == ("denied", "not_found")
    assert foreign.is_error
    tools.call(AGENT, "perform_proposal", ids)
    peek = tools.call(OUTSIDER, "operation_status", {"operation_id": proposal["operation_id"]})
    assert peek.data["error"]["code"] == "not_found"
    other_actor = Context(tenant_id="acme", actor_id="mallory")
    assert (
        tools.call(
            other_actor, "operation_status", {"operation_id": proposal["operation_id"]}
        ).data["error"]["code"]
        == "not_found"
    )
    assert world.receiver.counts().effects == 1


def test_the_models_stated_reason_is_kept_with_the_proposal_not_its_arguments(
    world: World, tools: FunctionTools, store_url: str
) -> None:
    """A propose call's ``stated_reason`` becomes the proposal's stated reason, not an
    argument (the digest is the one without it); an empty one is ``invalid_input`` naming
    ``stated_reason`` and no proposal is written."""
    said = "The customer returned the parcel; tracking shows it arrived."
    made = tools.call(AGENT, "propose_refund_order", {**REFUND_30, "stated_reason": said})
    assert not made.is_error, made.data
    proposal = world.app.proposal(REVIEWER, made.data["proposal_id"])
    assert proposal.stated_reason == said
    assert "stated_reason" not in proposal.arguments
    assert made.data["arguments"] == proposal.arguments
    before = count_rows(store_url, "proposals")
    empty = tools.call(AGENT, "propose_refund_order", {**REFUND_30, "stated_reason": ""})
    assert empty.data["error"]["code"] == "invalid_input"
    assert empty.data["error"]["details"]["field"] == "stated_reason"
    assert count_rows(store_url, "proposals") == before


def test_a_call_the_host_addresses_to_another_tenant_stops_at_the_tenant_step(
    world: World, tools: FunctionTools
) -> None:
    """The host names the tenant a call is addressed to: another one than the context's is
    refused first (a perform's denial ``tenant_mismatch`` with the trace ``request``,
    ``tenant``; a propose or a status the error ``admission_denied`` / ``tenant_mismatch``),
    nothing read, written or sent; naming the context's own tenant changes nothing."""
    proposal, approval_id = _approved(world, tools)
    ids = {"proposal_id": proposal["proposal_id"], "approval_id": approval_id}
    events = count_rows(world.store_url, "audit_events")
    denied = tools.call(AGENT, "perform_proposal", ids, tenant_id="globex")
    assert (denied.data["outcome"], denied.data["reason"]) == ("denied", "tenant_mismatch")
    assert [step[0] for step in denied.data["trace"]] == ["request", "tenant"]
    refused = tools.call(AGENT, "propose_refund_order", REFUND_30, tenant_id="globex")
    assert refused.data["error"]["code"] == "admission_denied"
    assert refused.data["error"]["details"]["reason"] == "tenant_mismatch"
    status = tools.call(
        AGENT, "operation_status", {"operation_id": proposal["operation_id"]}, tenant_id="globex"
    )
    assert status.data["error"]["details"]["reason"] == "tenant_mismatch"
    assert count_rows(world.store_url, "audit_events") == events
    assert count_rows(world.store_url, "proposals") == 1
    assert world.receiver.counts().submissions == 0
    use = ToolUseBlock(type="tool_use", id="toolu_9", name="perform_proposal", input=ids)
    block = tools.answer(AGENT, use, tenant_id="globex")  # a provider's call, the same way
    assert block["is_error"] is True
    assert json.loads(block["content"].split("\n", 1)[0])["reason"] == "tenant_mismatch"
    assert count_rows(world.store_url, "audit_events") == events
    assert world.receiver.counts().submissions == 0
    done = tools.call(AGENT, "perform_proposal", ids, tenant_id="acme")
    assert done.data["outcome"] == "performed"
    assert world.receiver.counts().effects == 1


def test_replays_answer_the_json_of_their_own_result(world: World, tools: FunctionTools) -> None:
    """Every replay answers its own result's JSON; a host editing one answer changes no other."""
    proposal, approval_id = _approved(world, tools)
    ids = json.dumps({"proposal_id": proposal["proposal_id"], "approval_id": approval_id})
    assert tools.call(AGENT, "perform_proposal", ids).data["outcome"] == "performed"
    first = tools.call(AGENT, "perform_proposal", ids)
    first.data["state"] = "REJECTED"
    first.data["trace"].append(["edited", "by the host"])
    for _ in range(3):
        again = tools.call(AGENT, "perform_proposal", ids)
        direct = world.app.perform(AGENT, proposal["proposal_id"], approval=approval_id)
        assert again.data == direct.to_dict()
        assert again.data is not first.data
        assert again.text == f"{json.dumps(again.data, separators=(',', ':'))}\n{again.guidance}"
        assert (again.data["outcome"], again.data["state"]) == ("replayed", "SUCCEEDED")
    for _ in range(2):  # a refused text is refused again, never remembered as good
        refused = tools.call(AGENT, "perform_proposal", '{"proposal_id": "no such/../id!"}')
        assert refused.data["error"]["code"] == "invalid_input"
        invented = tools.call(AGENT, "perform_proposal", '{"proposal_id": "p", "amount": 1}')
        assert invented.data["error"]["code"] == "tool_arguments_rejected"
    assert world.receiver.counts().effects == 1
    assert count_rows(world.store_url, "attempts") == 1


def test_importing_effectledger_does_not_import_the_sdks() -> None:
    """The tools, and the package, load without mcp, openai or anthropic being imported."""
    code = (
        "import sys, effectledger, effectledger.callers.tools.function_tools, "
        "effectledger.cli, effectledger.cli.mcp\n"
        "loaded = [m for m in ('mcp', 'openai', 'anthropic') if m in sys.modules]\n"
        "assert not loaded, loaded"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_an_empty_registry_offers_only_the_operation_tools(tmp_path: Path) -> None:
    """An empty registry still offers the operation tools, and only them."""
    with connect(f"sqlite:///{tmp_path / 'empty.db'}") as empty:
        definitions = FunctionTools(empty).definitions()
    assert [d.name for d in definitions] == [
        "perform_proposal",
        "operation_status",
    ]


def test_sixteen_threads_performing_through_the_tools_make_one_effect(
    world: World, tools: FunctionTools
) -> None:
    """Sixteen host threads answering the same perform call make one attempt and one effect."""
    import threading

    proposal, approval_id = _approved(world, tools)
    text = json.dumps({"proposal_id": proposal["proposal_id"], "approval_id": approval_id})
    barrier = threading.Barrier(16)
    outcomes: list[str] = []
    lock = threading.Lock()

    def deliver() -> None:
        barrier.wait(timeout=30)
        result = tools.call(AGENT, "perform_proposal", text)
        with lock:
            outcomes.append(result.data.get("outcome", result.data.get("error", {}).get("code")))

    threads = [threading.Thread(target=deliver) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == 16
    assert outcomes.count("performed") == 1
    assert set(outcomes) == {"performed", "replayed"}
    assert count_rows(world.store_url, "attempts") == 1
    assert world.receiver.counts().effects == 1
    usage = world.service.authority.capacity(AGENT, "refunds")
    assert (usage.held, usage.committed) == (0, 30)
