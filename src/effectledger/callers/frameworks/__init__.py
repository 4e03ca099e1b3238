"""Agent frameworks: one module per framework, each an extra imported only when used.

- :mod:`~effectledger.callers.frameworks.maf` — Microsoft Agent Framework (``[maf]``)
- :mod:`~effectledger.callers.frameworks.openai_agents` — OpenAI Agents SDK (``[openai-agents]``)
- :mod:`~effectledger.callers.frameworks.langgraph` — LangGraph / LangChain (``[langgraph]``)
- :mod:`~effectledger.callers.frameworks.pydantic_ai` — Pydantic AI (``[pydantic-ai]``)
- :mod:`~effectledger.callers.frameworks.adk` — Google ADK (``[adk]``)

Each keeps the framework's own approval pause and makes the ledger the gate at execution
(:mod:`~effectledger.callers.frameworks.gate`): the pause carries only a proposal id and its
digest, the identity comes from the host on every resume, and the effect happens only through
``EffectLedger.perform``. The run context stays the application's own object; the ledger's
identity is read from it (:func:`~effectledger.callers.frameworks.gate.ledger_context_of`, or
a ``context_of=`` callable). See ``docs/frameworks.md``.
"""

from effectledger.callers.frameworks.gate import (
    CarriesLedgerContext,
    Grant,
    LedgerGate,
    ledger_context_of,
)

__all__ = ["CarriesLedgerContext", "Grant", "LedgerGate", "ledger_context_of"]
