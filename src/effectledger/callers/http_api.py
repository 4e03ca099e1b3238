"""The HTTP API: propose, approve, deny, perform and read, over FastAPI, authenticated by API key.

Build it with :func:`create_app` (tests and ``effectledger serve`` build it the same way) and run
it with any ASGI server. Every request to ``/v1`` carries ``Authorization: Bearer <API key>``; the
key alone says who the caller is (tenant, actor, roles), and nothing in a body or URL can change
that. Every error, from a refused credential to an unknown route, has one JSON shape
``{"code", "message", "details"}`` with a stable ``code`` and the status of the error tree in
:mod:`effectledger.errors`. A body over the limit is refused from its headers (or as soon as its
stream passes the limit) before anything parses it.

``POST /v1/proposals/{id}/perform`` is idempotent: repeating it returns the recorded result
(``replayed``) and sends nothing. A denial is ``403 admission_denied`` (``404 not_found`` for an
unknown or another tenant's proposal) carrying the service's result in ``details.result``.

This module imports FastAPI; ``import effectledger`` does not import it (``pip install
'effectledger[server]'``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from effectledger.audit.explain import explain
from effectledger.authority import Correlation
from effectledger.callers.api_keys import ApiKeys
from effectledger.callers.http_models import (
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
from effectledger.callers.http_service import EffectAPI, ServiceAPI
from effectledger.errors import (
    EffectLedgerError,
    InvalidInput,
    MalformedRequest,
    NotAuthenticated,
    RequestTooLarge,
    StorageError,
)
from effectledger.model import Context
from effectledger.service import EffectService

__all__ = ["DEFAULT_MAX_BODY_BYTES", "HTTP_ONLY_CODES", "BodyLimit", "authenticated", "create_app"]

log = logging.getLogger(__name__)
DEFAULT_MAX_BODY_BYTES = 64 * 1024
HTTP_ONLY_CODES = {
    "route_not_found": 404,
    "method_not_allowed": 405,
    "http_error": 400,
    "store_unreachable": 503,
    "internal_error": 500,
}
"""Codes the HTTP layer answers with that have no class in the error tree."""

PathId = Annotated[str, Path(pattern=ID_PATTERN, max_length=128)]
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 409, 413, 422, 503)
}
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
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _error(status: int, code: str, message: str, **details: Any) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"code": code, "message": message, "details": details}
    )


def _error_of(exc: EffectLedgerError) -> JSONResponse:
    return JSONResponse(status_code=exc.status, content=exc.to_dict())


class BodyLimit:
    """ASGI middleware: refuse a request body over ``max_bytes`` before anything parses it.

    A declared ``Content-Length`` over the limit is refused without reading a byte; a body sent
    without one is read only up to the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None:
            if int(declared) > self.max_bytes:  # the server already refused non-numeric lengths
                await self._refuse(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RequestTooLarge(
            f"the request body is over {self.max_bytes} bytes", limit_bytes=self.max_bytes
        )
        response = _error_of(error)
        response.headers["connection"] = "close"
        await response(scope, receive, send)


def create_app(
    service: EffectService | EffectAPI,
    keys: ApiKeys,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    title: str = "effectledger",
) -> Any:
    """The ASGI application of the HTTP API over ``service``, authenticating with ``keys``.

    ``service`` is an :class:`EffectService` or any :class:`EffectAPI`. Returns the application
    wrapped in the body-size limit (the FastAPI application is its ``.app``).
    """
    api: EffectAPI = ServiceAPI(service) if isinstance(service, EffectService) else service
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
    _add_error_handlers(app, keys)

    @app.get("/livez", tags=["health"], summary="Liveness: the process answers")
    def livez() -> dict[str, str]:
        return {"status": "alive"}

    def _ready() -> JSONResponse:
        try:
            version = api.ping()
        except StorageError as exc:
            return _error(
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
        proposal = api.propose(
            context,
            body.action,
            body.arguments,
            operation_id=body.operation_id,
            correlation=correlation,
        )
        return JSONResponse(proposal_json(proposal), status_code=201)

    @app.get(
        "/v1/proposals/{proposal_id}",
        response_model=ProposalBody,
        responses=_ERRORS,
        tags=["proposals"],
        summary="A proposal as the approver is shown it",
    )
    def get_proposal(context: Caller, proposal_id: PathId) -> JSONResponse:
        return JSONResponse(proposal_json(api.proposal(context, proposal_id)))

    @app.post(
        "/v1/proposals/{proposal_id}/approve",
        status_code=201,
        response_model=ApprovalBody,
        responses=_ERRORS,
        tags=["decisions"],
        summary="Approve exactly the proposal with this digest",
    )
    def approve(context: Caller, proposal_id: PathId, body: ApproveRequest) -> JSONResponse:
        approval = api.approve(context, proposal_id, digest=body.digest, expires_in=body.expires_in)
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
        decision = api.deny(context, proposal_id, digest=body.digest, reason=body.reason)
        return JSONResponse(approval_json(decision), status_code=201)

    @app.post(
        "/v1/proposals/{proposal_id}/perform",
        response_model=EffectResultBody,
        responses=_ERRORS,
        tags=["operations"],
        summary="Admit and perform once; a repeat returns the recorded result",
    )
    def perform(context: Caller, proposal_id: PathId, body: PerformRequest) -> JSONResponse:
        result = api.perform(
            context, proposal_id, approval_id=body.approval_id, tenant_id=body.tenant_id
        )
        if result.outcome != "denied":
            return JSONResponse(result.to_dict())
        if result.reason == "not_found":
            return _error(404, "not_found", "no such proposal", result=result.to_dict())
        return _error(
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
        return JSONResponse([operation_json(op) for op in api.operations(context, limit=limit)])

    @app.get(
        "/v1/operations/{operation_id}",
        response_model=StatusBody,
        responses=_ERRORS,
        tags=["operations"],
        summary="The recorded state of the caller's own operation",
    )
    def status(context: Caller, operation_id: PathId) -> JSONResponse:
        return JSONResponse(api.status(context, operation_id).to_dict())

    @app.get(
        "/v1/operations/{operation_id}/events",
        response_model=list[EventBody],
        responses=_ERRORS,
        tags=["audit"],
        summary="The operation's hash-linked audit trail (approver or auditor)",
    )
    def events(context: Caller, operation_id: PathId) -> JSONResponse:
        return JSONResponse([event_json(e) for e in api.events(context, operation_id)])

    @app.get(
        "/v1/operations/{operation_id}/explanation",
        response_model=ExplanationBody,
        responses=_ERRORS,
        tags=["audit"],
        summary="A plain-language account, every sentence citing its event (approver or auditor)",
    )
    def explanation(context: Caller, operation_id: PathId) -> JSONResponse:
        sentences = explain(api.events(context, operation_id))
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
        return JSONResponse(capacity_json(api.capacity(context, pool)))

    return BodyLimit(app, max_body_bytes)


def _add_error_handlers(app: FastAPI, keys: ApiKeys) -> None:
    async def ledger_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, EffectLedgerError)
        return _error_of(exc)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # FastAPI parses the body before it resolves the key: a caller without a valid key is
        # told that first, and learns nothing about what the body would have needed.
        if request.url.path.startswith("/v1/"):
            try:
                await run_in_threadpool(keys.authenticate, _bearer_token(request))
            except NotAuthenticated as refused:
                return _error_of(refused)
        problems = [
            {
                "location": [str(part) for part in error.get("loc", ())],
                "problem": str(error.get("type", "invalid")),
                "message": str(error.get("msg", "")),
            }
            for error in exc.errors()[:20]
        ]
        malformed = any(
            p["problem"] == "json_invalid"
            or (
                p["problem"] in {"model_attributes_type", "dict_type"} and p["location"] == ["body"]
            )
            for p in problems
        )
        if malformed:
            return _error_of(
                MalformedRequest("the body must be one JSON object", problems=problems)
            )
        return _error_of(InvalidInput("the request does not match the API", problems=problems))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            return _error(404, "route_not_found", "no such route", path=request.url.path)
        if exc.status_code == 405:
            return _error(405, "method_not_allowed", f"{request.method} is not allowed here")
        return _error(exc.status_code, "http_error", str(exc.detail))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal_error", "an unexpected error; it was logged")

    app.add_exception_handler(EffectLedgerError, ledger_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


def _bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
