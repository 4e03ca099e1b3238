"""The framework tests run offline: the OpenAI Agents SDK's trace exporter stays off."""

from __future__ import annotations

import os

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
