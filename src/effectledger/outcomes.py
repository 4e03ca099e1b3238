"""What a request to perform an effect came to, and why a refusal was given, as enums.

The string values are the stable codes of the JSON bodies the tools and the HTTP API return;
being :class:`enum.StrEnum` members, they compare equal to those strings.
"""

from __future__ import annotations

import enum

__all__ = ["DenialReason", "EffectOutcome"]


class EffectOutcome(enum.StrEnum):
    """How one call to perform (or reconcile) an effect came out.

    ``PERFORMED``: this call admitted and dispatched it. ``REPLAYED``: it was already admitted;
    the recorded state is reported and nothing was sent. ``RELEASED``: it failed the
    dispatch-time recheck and was never sent. ``DENIED``: authority did not cover it; nothing
    exists and nothing was spent. ``RECONCILED`` / ``UNRESOLVED``: a recovery pass settled it, or
    did not yet.
    """

    PERFORMED = "performed"
    REPLAYED = "replayed"
    RELEASED = "released"
    DENIED = "denied"
    RECONCILED = "reconciled"
    UNRESOLVED = "unresolved"


class DenialReason(enum.StrEnum):
    """The stable reason an admission was refused (see ``docs/authority.md``).

    ``NOT_FOUND``: the proposal does not exist for the caller's tenant; an unknown id and another
    tenant's id give the same answer.
    """

    ACTOR_MISMATCH = "actor_mismatch"
    TENANT_MISMATCH = "tenant_mismatch"
    EXPIRED = "expired"
    STALE_RESOURCE_VERSION = "stale_resource_version"
    DIGEST_MISMATCH = "digest_mismatch"
    APPROVAL_MISSING = "approval_missing"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_CONSUMED = "approval_consumed"
    CAPACITY_EXCEEDED = "capacity_exceeded"
    POLICY_DENIED = "policy_denied"
    NOT_FOUND = "not_found"
