"""Agent-framework adapters, one module per framework, each an extra imported lazily.

Each adapter turns an :class:`~effectledger.EffectLedger` action into the framework's own tool,
keeps the framework's approval pause, and makes the ledger the gate at execution time (see
docs/frameworks.md and CONTRIBUTING.md, "Add a caller or a framework adapter").
"""
