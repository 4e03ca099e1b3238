"""Thin callers of the public API (EffectLedger), one room each: ``tools`` (function tools, their
definitions and provider formats, the dispatch and reviewer's tools), ``mcp``, ``http`` (the
HTTP API and its queue), ``desk``, ``notify`` and ``frameworks``."""
