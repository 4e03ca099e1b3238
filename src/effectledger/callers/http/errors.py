"""The HTTP API's error answers: one JSON shape, stable codes, and the body-size limit.

Every error is ``{"code", "message", "details"}``. Library errors keep the code and status of the
error tree in :mod:`effectledger.errors`; FastAPI's validation errors become ``malformed_request``
(400) or ``invalid_input`` (422); Starlette's routing errors and anything unexpected get the codes
in :data:`HTTP_ONLY_CODES`. A store failure answers its stable code with a fixed message
(:data:`STORAGE_MESSAGES`): the driver's text (SQL, server messages) goes to the log only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from effectledger.app.keys import ApiKeys
from effectledger.errors import (
    EffectLedgerError,
    InvalidInput,
    MalformedRequest,
    NotAuthenticated,
    RequestTooLarge,
    StorageError,
)

__all__ = [
    "HTTP_ONLY_CODES",
    "STORAGE_MESSAGES",
    "BodyLimit",
    "add_error_handlers",
    "bearer_token",
    "error_response",
]

log = logging.getLogger("effectledger.callers.http.app")
HTTP_ONLY_CODES = {
    "route_not_found": 404,
    "method_not_allowed": 405,
    "http_error": 400,
    "store_unreachable": 503,
    "internal_error": 500,
}
"""Codes the HTTP layer answers with that have no class in the error tree."""

STORAGE_MESSAGES = {
    "storage": "the ledger store failed; the transaction rolled back",
    "storage_busy": "the ledger store is busy; nothing was written, try again",
    "constraint_violation": "the ledger store refused the write; nothing was written",
    "commit_uncertain": "the ledger store did not confirm the commit; read the state before "
    "trying again",
    "storage_full": "the ledger store is out of space; nothing was written, try again later",
    "storage_read_only": "the ledger store is read-only; nothing was written, try again later",
}
"""The fixed message a client gets for each store failure (the details stay in the log)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def error_response(status: int, code: str, message: str, **details: Any) -> JSONResponse:
    """The one error shape for a code that has no class in the error tree."""
    return JSONResponse(
        status_code=status, content={"code": code, "message": message, "details": details}
    )


def _error_of(exc: EffectLedgerError) -> JSONResponse:
    if isinstance(exc, StorageError):
        log.warning("store failure answered as %s: %s %s", exc.code, exc.message, exc.details)
        message = STORAGE_MESSAGES.get(exc.code, STORAGE_MESSAGES["storage"])
        return error_response(exc.status, exc.code, message)
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


def add_error_handlers(app: FastAPI, keys: ApiKeys) -> None:
    """Answer every error of ``app`` in the one shape; credentials are judged before bodies."""

    async def ledger_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, EffectLedgerError)
        return _error_of(exc)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # FastAPI parses the body before it resolves the key: a caller without a valid key is
        # told that first, and learns nothing about what the body would have needed.
        if request.url.path.startswith("/v1/"):
            try:
                await run_in_threadpool(keys.authenticate, bearer_token(request))
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

    def _allowed(request: Request) -> str:
        """Every method some route serves at this path (a path served by several routes, one
        per method, would otherwise name only the first route's methods)."""
        methods: set[str] = set()
        for route in request.app.router.routes:
            match, _ = route.matches({**request.scope, "method": "OPTIONS"})
            if match is not Match.NONE:
                methods |= getattr(route, "methods", None) or set()
        return ", ".join(sorted(methods))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            return error_response(404, "route_not_found", "no such route", path=request.url.path)
        if exc.status_code == 405:
            refused = error_response(
                405, "method_not_allowed", f"{request.method} is not allowed here"
            )
            allow = _allowed(request)
            if allow:
                refused.headers["Allow"] = allow
            return refused
        return error_response(exc.status_code, "http_error", str(exc.detail))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal_error", "an unexpected error; it was logged")

    app.add_exception_handler(EffectLedgerError, ledger_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


def bearer_token(request: Request) -> str | None:
    """The request's bearer token, or ``None`` when it carries none."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
