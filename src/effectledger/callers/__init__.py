"""Thin callers of the ledger: the model-facing tool today; frameworks, MCP and HTTP build on it."""
