"""JSON-ready views of every record the API returns, as the tools and the HTTP API send them.

Enums become their string values, times ISO 8601 in UTC, sets sorted lists, tuples lists and
nested records objects. Records that define their own ``to_dict`` (results, findings) use it,
so an uncertain outcome always carries its ``uncertain`` flag.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Set
from datetime import datetime, timedelta
from pathlib import PurePath
from typing import Any

__all__ = ["to_dict"]


def to_dict(record: Any) -> Any:
    """``record`` as JSON-ready values (a dict for a record; see the module docstring)."""
    own = getattr(record, "to_dict", None)
    if callable(own) and not isinstance(record, type):
        return own()
    if isinstance(record, enum.Enum):
        return record.value
    if isinstance(record, datetime):
        return record.isoformat()
    if isinstance(record, timedelta):
        return record.total_seconds()
    if isinstance(record, PurePath):
        return str(record)
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        view = {field.name: to_dict(getattr(record, field.name)) for field in _fields(record)}
        uncertain = getattr(record, "uncertain", None)
        if isinstance(uncertain, bool):
            view["uncertain"] = uncertain
        return view
    if isinstance(record, Mapping):
        return {str(key): to_dict(value) for key, value in record.items()}
    if isinstance(record, Set):
        return sorted(to_dict(value) for value in record)
    if isinstance(record, list | tuple):
        return [to_dict(value) for value in record]
    return record


def _fields(record: Any) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(record)
