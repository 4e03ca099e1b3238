"""Whether a stored event is authentic: what the sealer and ``explain`` ask the trail keys.

A claim checks the tags of the trail it relies on (:mod:`effectledger.ledger.integrity`); the
sealer checks the tag of every event before it gives it a log position, and ``explain`` from the
database checks the tags of the events it tells. Each asks :func:`unauthentic`, so what makes an
event authentic (which keys, retired or current, vouch for it) is decided in one place:
:class:`~effectledger.events.authentication.TrailKeys`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from effectledger.events.authentication import TrailKeys

__all__ = ["unauthentic"]


def unauthentic(keys: TrailKeys, event: Mapping[str, Any]) -> str | None:
    """Why the stored ``event`` (an ``audit_events`` row) is not authenticated by ``keys``, or
    ``None`` when it is: ``untagged``, ``unknown_key`` or ``tag_invalid``
    (:meth:`TrailKeys.problem <effectledger.events.authentication.TrailKeys.problem>`)."""
    return keys.problem(str(event["event_hash"]), event["trail_tag"])
