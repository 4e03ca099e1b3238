"""Thin callers of the public API (EffectLedger): dispatch tool, function tools, MCP, HTTP API."""
