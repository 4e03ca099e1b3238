"""The HTTP API's rules for a JSON body, the same as the function tools' rules for arguments.

A body is refused with ``400 malformed_request`` before FastAPI parses it when it is not sent as
JSON (its ``Content-Type``), repeats a key in an object (a reviewer could be shown one value and
the ledger act on another), holds ``NaN`` or ``Infinity``, nests deeper than
:data:`MAX_JSON_DEPTH`, holds an integer longer than Python parses, or is not JSON at all. As for
every body error, the caller's key is judged first: a caller without a valid key learns nothing
about what the body would have needed. An empty body is left to the route (a perform takes one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from effectledger.errors import MalformedRequest

__all__ = ["MAX_JSON_DEPTH", "json_body_problem", "strict_json_route"]

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a body may have."""

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class _Refused(ValueError):
    """A body broke one of the rules; the message says which."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(f"the body repeats the key {key[:64]!r}")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"the body contains {name}, which is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)


def _depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def json_body_problem(content_type: str, body: bytes) -> str | None:
    """Why ``body`` sent as ``content_type`` breaks the rules (module docstring), or ``None``."""
    if not body.strip():
        return None
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return "the body must be JSON, sent with Content-Type: application/json"
    try:
        parsed = _DECODER.decode(body.decode("utf-8"))
    except _Refused as refused:
        return str(refused)
    except RecursionError:
        return f"the body nests deeper than {MAX_JSON_DEPTH} levels"
    except ValueError as exc:
        if "digits" in str(exc):
            return "the body holds an integer too long to be a number"
        return "the body is not valid JSON"
    if _depth(parsed) > MAX_JSON_DEPTH:
        return f"the body nests deeper than {MAX_JSON_DEPTH} levels"
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
