"""What every format module shares: a call read into its parts, and a field of an SDK object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CallParts", "field_of"]


def field_of(item: Any, name: str) -> Any:
    """``item[name]`` of a mapping, or the attribute of an SDK object (``None`` if absent)."""
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


@dataclass(frozen=True, slots=True)
class CallParts:
    """A provider's tool call, read: its id, the tool's name and the raw arguments."""

    call_id: str
    name: Any
    arguments: Any
