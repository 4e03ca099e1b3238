"""The optional extras and the packages each brings: a clear error when one is missing.

A feature that needs an extra calls :func:`require_extra` before importing the module that uses
it. Only the third-party packages are looked for, so a bug inside effectledger's own modules is
never reported as a missing install.
"""

from __future__ import annotations

import importlib.util

from effectledger.errors import MissingExtra

__all__ = ["EXTRAS", "require_extra"]

# extra -> the top-level modules of the packages it installs (see pyproject.toml)
EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg", "psycopg_pool"),
    "cedar": ("cedarpy",),
    "http": ("httpx",),
    "receiver": ("starlette", "uvicorn", "httpx"),
    "server": ("fastapi", "uvicorn", "jinja2", "babel"),
    "sso": ("authlib", "joserfc", "httpx"),
    "mcp": ("mcp",),
    "maf": ("agent_framework",),
    "openai-agents": ("agents",),
    "langgraph": ("langgraph", "langchain"),
    "pydantic-ai": ("pydantic_ai",),
    "adk": ("google.adk",),
}


def require_extra(extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtra` unless every package of ``extra`` can be imported.

    ``purpose`` starts the message: ``"PostgreSQL"`` gives "PostgreSQL needs the postgres
    extra: pip install 'effectledger[postgres]'".
    """
    for module in EXTRAS[extra]:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(
                f"{purpose} needs the {extra} extra: pip install 'effectledger[{extra}]'",
                extra=extra,
                missing=module,
            )
