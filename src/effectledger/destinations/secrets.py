"""Secret header values for HTTP destinations: read when a request is built, never kept.

A :class:`SecretHeader` knows where a credential lives (an environment variable, a file, or a
callable such as a vault client) and how to format it (``"Bearer {secret}"``). The value is read
for each request and goes only into that request's headers: it is not stored on the adapter,
not shown by ``repr``, and never copied into the ledger, the evidence or the audit trail.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from effectledger.errors import SecretUnavailable

__all__ = ["SecretHeader", "SecretUnavailable", "callable_secret", "env_secret", "file_secret"]


@dataclass(frozen=True, slots=True)
class SecretHeader:
    """A header value produced from a secret at request time (see the module docstring)."""

    source: str
    read: Callable[[], str] = field(repr=False, compare=False)
    template: str = "{secret}"

    def value(self) -> str:
        """The formatted header value; raises :class:`SecretUnavailable` if it cannot be read."""
        return self.value_and_secret()[0]

    def value_and_secret(self) -> tuple[str, str]:
        """The formatted header value and the bare secret in it (to scrub echoes of either)."""
        try:
            secret = self.read()
        except SecretUnavailable:
            raise
        except Exception as exc:
            raise SecretUnavailable(f"the secret from {self.source} could not be read") from exc
        if not isinstance(secret, str) or not secret or "\n" in secret or "\r" in secret:
            raise SecretUnavailable(f"the secret from {self.source} is empty or malformed")
        return self.template.format(secret=secret), secret


def env_secret(name: str, template: str = "{secret}") -> SecretHeader:
    """A header value from environment variable ``name``, read at each request."""

    def read() -> str:
        value = os.environ.get(name)
        if value is None:
            raise SecretUnavailable(f"environment variable {name} is not set")
        return value

    return SecretHeader(f"env:{name}", read, template)


def file_secret(path: str | Path, template: str = "{secret}") -> SecretHeader:
    """A header value from the file at ``path`` (surrounding whitespace removed), per request."""
    where = Path(path)

    def read() -> str:
        return where.read_text("utf-8").strip()

    return SecretHeader(f"file:{where}", read, template)


def callable_secret(
    provider: Callable[[], str], template: str = "{secret}", *, name: str = "callable"
) -> SecretHeader:
    """A header value from ``provider()`` (a vault or token client), called per request."""
    return SecretHeader(f"callable:{name}", provider, template)
