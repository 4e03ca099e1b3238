"""One driver per framework: pause a scripted model's refund call, save the state, resume it.

Each driver runs the framework's own agent loop offline (its scripted or test model), keeps the
state a host would store at the pause (a MAF session, an OpenAI Agents ``RunState`` string, a
LangGraph checkpoint, a Pydantic AI message history, an ADK session) and resumes it as a host
would, with the identity and grant the test gives. ``edited`` returns the saved state with the
refund's amount changed wherever the framework keeps it, its own integrity data included;
``edit`` applies any change to the refund's arguments there (a smuggled field, a value of the
wrong type). A batch pauses one model turn making several calls and resumes it approving some
and rejecting others in the framework; ``shown`` is what the scripted model was given back.

The identity a driver is given is the ledger's ``Context`` or an application's own context
object; a driver built with ``context_of=`` hands that reader to its adapter.
"""

from __future__ import annotations

from tests.frameworks.drivers.adk import ADKDriver, scripted_llm, tool_answer
from tests.frameworks.drivers.common import (
    ACTION,
    JSON,
    Answered,
    Call,
    Driver,
    Edit,
    Paused,
    answer_of,
    last_tool_message,
    tool_json,
)
from tests.frameworks.drivers.langgraph import APPROVE, LangGraphDriver, LangGraphHost
from tests.frameworks.drivers.maf import MAFDriver
from tests.frameworks.drivers.openai_agents import OpenAIAgentsDriver
from tests.frameworks.drivers.pydantic_ai import PydanticAIDriver

__all__ = [
    "ACTION",
    "APPROVE",
    "DRIVERS",
    "FRAMEWORKS",
    "JSON",
    "ADKDriver",
    "Answered",
    "Call",
    "Driver",
    "Edit",
    "LangGraphDriver",
    "LangGraphHost",
    "MAFDriver",
    "OpenAIAgentsDriver",
    "Paused",
    "PydanticAIDriver",
    "answer_of",
    "last_tool_message",
    "scripted_llm",
    "tool_answer",
    "tool_json",
]

DRIVERS = {
    driver.name: driver
    for driver in (MAFDriver, OpenAIAgentsDriver, LangGraphDriver, PydanticAIDriver, ADKDriver)
}
FRAMEWORKS = tuple(DRIVERS)
