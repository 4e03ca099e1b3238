"""The HTTP API's rules for a JSON body: the same as the function tools' rules for arguments.

A body is refused with ``400 malformed_request`` before FastAPI parses it when it is not sent as
JSON (its ``Content-Type``) or breaks the rules of the one parser every caller uses
(:mod:`effectledger.model.json_text`): a repeated key (a reviewer could be shown one value and
the ledger act on another), ``NaN`` or ``Infinity``, nesting deeper than :data:`MAX_JSON_DEPTH`,
an integer longer than Python parses, or text that is not JSON at all. The body's size is
bounded by the server (``--max-body-bytes``). As for every body error, the caller's key is
judged first: a caller without a valid key learns nothing about what the body would have
needed. An empty body is left to the route (a perform takes one).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from effectledger.errors import InvalidInput, MalformedRequest
from effectledger.model.json_text import MAX_JSON_DEPTH, read_json

__all__ = ["MAX_JSON_DEPTH", "json_body_problem", "strict_json_route"]

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


def json_body_problem(content_type: str, body: bytes) -> str | None:
    """Why ``body`` sent as ``content_type`` breaks the rules (module docstring), or ``None``."""
    if not body.strip():
        return None
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return "the body must be JSON, sent with Content-Type: application/json"
    try:
        read_json(body, what="the body", max_bytes=None)
    except InvalidInput as refused:
        return refused.message
    return None


def strict_json_route(authenticate: Callable[[Request], Any]) -> type[APIRoute]:
    """A route class that checks each request body by :func:`json_body_problem` before FastAPI
    parses it; ``authenticate`` (sync, given the request) runs first when a body is refused, so
    a refused credential is what a caller without a valid key hears."""

    class StrictJsonRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def checked(request: Request) -> Response:
                if request.method in _WITH_BODY:
                    body = await request.body()  # Starlette keeps it for the route's own parse
                    problem = json_body_problem(request.headers.get("content-type", ""), body)
                    if problem is not None:
                        await run_in_threadpool(authenticate, request)
                        raise MalformedRequest(problem)
                return await handler(request)

            return checked

    return StrictJsonRoute
