"""The HTTP API: propose, approve, deny, perform and read, over FastAPI, authenticated by API key.

Build it from the application's :class:`~effectledger.EffectLedger` with ``create_app(ledger,
ApiKeys(ledger.store))`` (tests and ``effectledger serve`` build it the same way) and run it with
any ASGI server. Every route calls one method of the ledger and nothing beneath it, so an HTTP
caller gets the same rules as a Python caller: the tenant's wider views (operations, trails,
explanations, capacity, another actor's proposal) need the ``approver`` or ``auditor`` role
(:mod:`effectledger.app.access`). Every request to ``/v1`` carries
``Authorization: Bearer <API key>``;
the key alone says who the caller is (tenant, actor, roles), and nothing in a body or URL can change
that. Every error, from a refused credential to an unknown route, has one JSON shape ``{"code",
"message", "details"}`` with a stable ``code`` and the status of the error tree in
:mod:`effectledger.errors`. A body over the limit is refused from its headers (or as soon as its
stream passes the limit) before anything parses it.

``GET /v1/proposals?state=pending`` is the reviewer's queue
(:mod:`effectledger.callers.http.queue`).
``POST /v1/proposals/{id}/perform`` is idempotent: repeating it returns the recorded result
(``replayed``) and sends nothing. A denial is ``403 admission_denied`` (``404 not_found`` for an
unknown or another tenant's proposal) carrying the ledger's result in ``details.result``.
Without an ``approval_id`` the decision recorded on the proposal is used, as in Python.

This module imports FastAPI; ``import effectledger`` does not import it (``pip install
'effectledger[server]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from effectledger.app.keys import ApiKeys
from effectledger.app.ledger import EffectLedger
from effectledger.callers.http.bodies import strict_json_route
from effectledger.callers.http.errors import (
    HTTP_ONLY_CODES,
    BodyLimit,
    add_error_handlers,
    bearer_token,
    error_response,
)
from effectledger.callers.http.models import (
    ID_PATTERN,
    ApprovalBody,
    ApproveRequest,
    CapacityBody,
    DenyRequest,
    EffectResultBody,
    ErrorBody,
    EventBody,
    ExplanationBody,
    OperationBody,
    PerformRequest,
    ProposalBody,
    ProposeRequest,
    StatusBody,
    approval_json,
    capacity_json,
    event_json,
    operation_json,
    proposal_json,
    sentence_json,
)
from effectledger.callers.http.openapi import publish_actions
from effectledger.callers.http.queue import add_queue_route
from effectledger.errors import InvalidInput, StorageError
from effectledger.model.authority import Correlation
from effectledger.model.json_text import whole_numbers
from effectledger.model.operations import Context
from effectledger.model.results import DenialReason, EffectOutcome

if TYPE_CHECKING:
    from effectledger.callers.desk.sso import SsoSettings

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "HTTP_ONLY_CODES",
    "BodyLimit",
    "authenticated",
    "create_app",
]

DEFAULT_MAX_BODY_BYTES = 64 * 1024
PathId = Annotated[str, Path(pattern=ID_PATTERN, max_length=128)]
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 409, 413, 422, 503)
}
_JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": "An error, as JSON like every other route's",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for status in _ERRORS
}
"""The errors of a route whose success is not JSON (``/metrics``): its errors still are."""
_bearer = HTTPBearer(auto_error=False, description="An API key: `effectledger keys create`")


def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Context:
    """The trusted context of the request's API key: the only source of identity.

    A FastAPI dependency; an application adding its own routes to the API uses it the same way.
    """
    keys: ApiKeys = request.app.state.keys
    return keys.authenticate(None if credentials is None else credentials.credentials)


Caller = Annotated[Context, Depends(authenticated)]


def create_app(
    ledger: EffectLedger,
    keys: ApiKeys,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    title: str = "effectledger",
    desk: bool = False,
    secure_cookies: bool = True,
    sso: SsoSettings | None = None,
) -> BodyLimit:
    """The ASGI application of the HTTP API over ``ledger``, authenticating with ``keys``.

    Returns the application wrapped in the body-size limit (the FastAPI application is its
    ``.app``). The ledger and the keys stay the caller's to close. ``desk`` mounts the
    reviewer's pages at ``/desk`` (:mod:`effectledger.callers.desk`; ``secure_cookies=False``
    only for a desk served on plain HTTP; ``sso`` adds single sign-on,
    :class:`~effectledger.callers.desk.sso.SsoSettings`).
    """
    if not isinstance(ledger, EffectLedger):
        raise InvalidInput("create_app needs the EffectLedger that effectledger.connect returns")
    if not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise InvalidInput("max_body_bytes must be a positive integer", field="max_body_bytes")
    app = FastAPI(
        title=title,
        version="1",
        description="Authorized, exactly-once-where-possible, auditable effects for AI agents.",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.keys = keys
    add_error_handlers(app, keys)
    # Bodies follow the tools' JSON rules; a refused body is judged after the caller's key.
    app.router.route_class = strict_json_route(
        lambda request: keys.authenticate(bearer_token(request))
    )

    @app.get("/livez", tags=["health"], summary="Liveness: the process answers")
    def livez() -> dict[str, str]:
        return {"status": "alive"}

    def _ready() -> JSONResponse:
        try:
            version = ledger.ping()
        except StorageError as exc:
            return error_response(
                503,
                "store_unreachable",
                "the ledger store does not answer",
                live=True,
                store="unreachable",
                cause=exc.code,
            )
        return JSONResponse(
            {"status": "ok", "live": True, "store": "reachable", "schema_version": version}
        )

    ready_responses: dict[int | str, dict[str, Any]] = {503: {"model": ErrorBody}}
    app.get("/readyz", tags=["health"], summary="Readiness", responses=ready_responses)(_ready)
    app.get("/healthz", tags=["health"], summary="Health", responses=ready_responses)(_ready)

    @app.post(
        "/v1/proposals",
        status_code=201,
        response_model=ProposalBody,
        responses=_ERRORS,
        tags=["proposals"],
        summary="Propose an action (the proposer is the key's actor)",
    )
    def propose(context: Caller, body: ProposeRequest) -> JSONResponse:
        correlation = (
            None if body.correlation is None else Correlation(**body.correlation.model_dump())
        )
        proposal = ledger.propose(
            context,
            body.action,
            whole_numbers(body.arguments),  # 30.0 is the integer 30, as in every caller
            operation_id=body.operation_id,
            correlation=correlation,
            stated_reason=body.stated_reason,
        )
        return JSONResponse(proposal_json(proposal), status_code=201)

    add_queue_route(app, ledger, authenticated, ["proposals"])
    if desk:
        from fastapi.responses import RedirectResponse

        from effectledger.callers.desk import DESK_PATH, create_desk

        @app.get("/", include_in_schema=False)
        def front_door() -> RedirectResponse:
            return RedirectResponse(f"{DESK_PATH}/", status_code=307)

        app.mount(DESK_PATH, create_desk(ledger, keys, secure_cookies=secure_cookies, sso=sso))

    @app.get(
        "/v1/proposals/{proposal_id}",
        response_model=ProposalBody,
        responses=_ERRORS,
        tags=["proposals"],
        summary="A proposal as the approver is shown it",
    )
    def get_proposal(context: Caller, proposal_id: PathId) -> JSONResponse:
        return JSONResponse(proposal_json(ledger.proposal(context, proposal_id)))

    @app.post(
        "/v1/proposals/{proposal_id}/approve",
        status_code=201,
        response_model=ApprovalBody,
        responses=_ERRORS,
        tags=["decisions"],
        summary="Approve exactly the proposal with this digest",
    )
    def approve(context: Caller, proposal_id: PathId, body: ApproveRequest) -> JSONResponse:
        approval = ledger.approve(
            context, proposal_id, digest=body.digest, expires_in=body.expires_in
        )
        return JSONResponse(approval_json(approval), status_code=201)

    @app.post(
        "/v1/proposals/{proposal_id}/deny",
        status_code=201,
        response_model=ApprovalBody,
        responses=_ERRORS,
        tags=["decisions"],
        summary="Deny the proposal with this digest (final)",
    )
    def deny(context: Caller, proposal_id: PathId, body: DenyRequest) -> JSONResponse:
        decision = ledger.deny(context, proposal_id, digest=body.digest, reason=body.reason)
        return JSONResponse(approval_json(decision), status_code=201)

    @app.post(
        "/v1/proposals/{proposal_id}/perform",
        response_model=EffectResultBody,
        responses=_ERRORS,
        tags=["operations"],
        summary="Admit and perform once; a repeat returns the recorded result",
    )
    def perform(
        context: Caller, proposal_id: PathId, body: PerformRequest | None = None
    ) -> JSONResponse:
        body = body or PerformRequest()  # every field is optional, so an empty body is too
        result = ledger.perform(
            context, proposal_id, approval=body.approval_id, tenant_id=body.tenant_id
        )
        if result.outcome is not EffectOutcome.DENIED:
            return JSONResponse(result.to_dict())
        if result.reason is DenialReason.NOT_FOUND:
            return error_response(404, "not_found", "no such proposal", result=result.to_dict())
        return error_response(
            403,
            "admission_denied",
            f"the effect was not admitted: {result.reason}",
            reason=result.reason,
            result=result.to_dict(),
        )

    @app.get(
        "/v1/operations",
        response_model=list[OperationBody],
        responses=_ERRORS,
        tags=["operations"],
        summary="The tenant's most recent operations (approver or auditor)",
    )
    def operations(
        context: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> JSONResponse:
        return JSONResponse([operation_json(op) for op in ledger.operations(context, limit=limit)])

    @app.get(
        "/v1/operations/{operation_id}",
        response_model=StatusBody,
        responses=_ERRORS,
        tags=["operations"],
        summary="The recorded state of the caller's own operation",
    )
    def status(context: Caller, operation_id: PathId) -> JSONResponse:
        return JSONResponse(ledger.status(context, operation_id).to_dict())

    @app.get(
        "/v1/operations/{operation_id}/events",
        response_model=list[EventBody],
        responses=_ERRORS,
        tags=["audit"],
        summary="The operation's hash-linked audit trail (approver or auditor)",
    )
    def events(context: Caller, operation_id: PathId) -> JSONResponse:
        return JSONResponse([event_json(e) for e in ledger.events(context, operation_id)])

    @app.get(
        "/v1/operations/{operation_id}/explanation",
        response_model=ExplanationBody,
        responses=_ERRORS,
        tags=["audit"],
        summary="A plain-language account, every sentence citing its event (approver or auditor)",
    )
    def explanation(context: Caller, operation_id: PathId) -> JSONResponse:
        sentences = ledger.explain(context, operation_id)
        return JSONResponse(
            {"operation_id": operation_id, "sentences": [sentence_json(s) for s in sentences]}
        )

    @app.get(
        "/v1/capacity/{pool}",
        response_model=CapacityBody,
        responses=_ERRORS,
        tags=["capacity"],
        summary="Held, committed and freed units of a pool (approver or auditor)",
    )
    def capacity(context: Caller, pool: PathId) -> JSONResponse:
        return JSONResponse(capacity_json(ledger.capacity(context, pool)))

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses=_JSON_ERRORS,
        tags=["health"],
        summary="The key's tenant's figures in the Prometheus text format (approver or auditor)",
    )
    def metrics(context: Caller) -> PlainTextResponse:
        return PlainTextResponse(
            ledger.summary(context).prometheus(), media_type="text/plain; version=0.0.4"
        )

    publish_actions(app, ledger)
    return BodyLimit(app, max_body_bytes)
