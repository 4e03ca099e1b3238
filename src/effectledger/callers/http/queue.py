"""``GET /v1/proposals?state=pending``: the reviewer's queue over the HTTP API.

One route over :meth:`~effectledger.app.EffectLedger.pending`, added by
:func:`~effectledger.callers.http.app.create_app`; the caller is the API key's actor, and only a
reviewer (approver or auditor) may read the queue. Each entry carries the digest to approve,
why it waits and when it expires.
"""

# No ``from __future__ import annotations``: FastAPI reads the route's annotations, and the
# dependency they name is this function's argument, not a module global.

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, BeforeValidator, Field

from effectledger.app import EffectLedger
from effectledger.callers.http.models import ID_PATTERN, ErrorBody
from effectledger.model import Context
from effectledger.model.review import CURSOR_PATTERN

__all__ = ["PendingBody", "QueueBody", "add_queue_route"]

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 422, 503)
}
Filter = Annotated[str | None, Query(pattern=ID_PATTERN, max_length=128)]
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _rfc3339(value: object) -> object:
    """Only an RFC 3339 time (the ``date-time`` format the document declares): pydantic alone
    would also read ``0.5`` as seconds since 1970."""
    if isinstance(value, str) and _RFC3339.fullmatch(value) is None:
        raise ValueError("expiring_before must be an RFC 3339 time, such as 2026-01-01T09:00:00Z")
    return value


class PendingBody(BaseModel):
    """A proposal waiting for the caller's decision, with why it waits and when it expires."""

    proposal_id: str
    operation_id: str
    action: str
    contract_version: str
    proposer_id: str
    target: str
    arguments: dict[str, Any]
    units: int
    pool: str
    digest: str
    created_at: str
    expires_at: str
    expires_in_seconds: int
    expires: str
    policy_version: str
    approvals_required: int
    approvals_granted: int
    approvals_remaining: int
    waits_for: str
    summary: str | None = Field(
        default=None,
        description="the action's declared summary of the arguments (money as money), exact; "
        "reveal hidden characters before showing it",
    )
    stated_reason: str | None = Field(
        default=None,
        description="the reason the agent gave, untrusted and exact; show it as the agent's, "
        "hidden characters revealed",
    )


class QueueBody(BaseModel):
    """One page of the queue; pass ``next_cursor`` as ``after`` for the next."""

    state: Literal["pending"]
    order: Literal["expiring", "newest"]
    read_at: str
    next_cursor: str | None
    proposals: list[PendingBody]


def add_queue_route(
    app: FastAPI, ledger: EffectLedger, caller: Callable[..., Context], tags: list[str]
) -> None:
    """Add ``GET /v1/proposals`` to ``app``, authenticating with the ``caller`` dependency."""

    @app.get(
        "/v1/proposals",
        response_model=QueueBody,
        responses=_ERRORS,
        tags=list(tags),
        summary="Proposals waiting for the caller's decision (approver or auditor)",
    )
    def queue(
        context: Annotated[Context, Depends(caller)],
        state: Annotated[Literal["pending"], Query()] = "pending",
        action: Filter = None,
        pool: Filter = None,
        proposer: Filter = None,
        expiring_before: Annotated[
            AwareDatetime | None,
            Query(description="an RFC 3339 time with its offset, such as 2026-01-01T09:00:00Z"),
            BeforeValidator(_rfc3339),
        ] = None,
        order: Annotated[Literal["expiring", "newest"], Query()] = "expiring",
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        after: Annotated[
            str | None,
            Query(max_length=160, pattern=CURSOR_PATTERN, description="a page's next_cursor"),
        ] = None,
    ) -> JSONResponse:
        before: datetime | None = expiring_before
        page = ledger.pending(
            context,
            action=action,
            pool=pool,
            proposer=proposer,
            expiring_before=before,
            order=order,
            limit=limit,
            after=after,
        )
        return JSONResponse(page.to_dict())
