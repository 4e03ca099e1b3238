"""Thin callers of the service: the dispatch tool, function tools for any model, an MCP server."""
