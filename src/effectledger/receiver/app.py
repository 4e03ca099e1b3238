"""The reference receiver: a small ASGI app that implements the HTTP destination contract.

Routes (``{collection}`` is any lower-case name, e.g. ``effects``, ``refunds``, ``messages``):

* ``POST /v1/{collection}`` performs the JSON body once per ``Idempotency-Key`` (or, without the
  header, per the body's ``message_id``). A repeat with the same body replays the first answer
  (``Idempotent-Replayed: true``); a repeat with another body is refused, 422 ``key_reused`` (the
  IETF httpapi draft); a repeat while the first is still processing gets 409 ``key_in_flight``.
  A missing key is 400, and so is a body that is not one JSON object (too deeply nested
  included).
* ``GET /v1/{collection}/{key}`` answers 200 with the effect's reference, or 404.
* ``GET /_receiver/stats`` returns the counts; ``PUT /_receiver/faults`` sets fault switches, and
  only exists when the receiver was made with ``allow_faults=True`` (``--allow-faults``).

With a token configured, every route (stats and faults included) answers 401 and does nothing to
a request without ``Authorization: Bearer <token>``.

Fault switches (:class:`ReceiverFaults`) make the hard cases reproducible over real sockets:
commit then drop the connection, slow reply past a deadline, 5xx after commit, 409 on key reuse
with a different body, lookup lag, 429 with Retry-After, a hold in ``processing``, a slow lookup.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from effectledger.receiver.store import ReceiverStore

__all__ = ["ConnectionDropped", "FaultRefused", "ReceiverFaults", "create_app"]

_COLLECTION = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_KEY = re.compile(r"[\x21-\x7e]{1,255}")


class FaultRefused(ValueError):
    """A fault switch change the receiver refuses: ``field`` names the switch."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class ConnectionDropped(Exception):
    """Raised inside the app to make the server drop a connection mid-answer (a fault)."""


@dataclass(slots=True)
class ReceiverFaults:
    """Fault switches; counts apply to the next that many submissions, then run out.

    ``drop_after_commit``: perform, then drop the connection before the body is sent.
    ``error_after_commit``: perform, then answer 503. ``slow_reply_s``: perform, then wait that
    long before answering. ``conflict_status``: the status for a key reused with another body
    (422 by the draft; 409 for APIs that use it). ``lookup_lag_s``: lookups do not see an effect
    younger than this. ``throttle``: answer 429 with ``Retry-After: retry_after_s`` before doing
    anything. ``hold_s``: keep a new effect ``processing`` for that long before answering.
    ``slow_lookup_s``: wait that long before answering a lookup.
    """

    drop_after_commit: int = 0
    error_after_commit: int = 0
    slow_reply_s: float = 0.0
    conflict_status: int = 422
    lookup_lag_s: float = 0.0
    throttle: int = 0
    retry_after_s: int = 1
    hold_s: float = 0.0
    slow_lookup_s: float = 0.0

    def update(self, changes: dict[str, Any]) -> None:
        """Set the named switches, all or none: an unknown name or a value of the wrong kind
        raises :class:`FaultRefused` naming the switch and what it takes."""
        fields = {f.name for f in dataclasses.fields(self)}
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in fields:
                raise FaultRefused(
                    str(name)[:64],
                    f"no switch {str(name)[:64]!r}; the switches: " + ", ".join(sorted(fields)),
                )
            current = getattr(self, name)
            if isinstance(current, float):
                ok = type(value) in (int, float) and value >= 0
                wants = "a number of seconds, 0 or more"
            else:
                ok = type(value) is int and value >= 0
                wants = "a whole number (a count, or an HTTP status), 0 or more"
            if not ok:
                raise FaultRefused(name, f"{name} must be {wants}")
            checked[name] = type(current)(value)
        for name, value in checked.items():
            setattr(self, name, value)

    def take(self, name: str) -> bool:
        """Use up one count of switch ``name``; whether it fired."""
        left: int = getattr(self, name)
        if left > 0:
            setattr(self, name, left - 1)
            return True
        return False


class _DroppedResponse(Response):
    """Starts a 200 answer, then drops the connection before any byte of its body."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"64")],
            }
        )
        raise ConnectionDropped("fault: connection dropped after commit")


def _error(status: int, code: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": code}, status_code=status, headers=headers or None)


def _effect(collection: str, key: str, reference: str, state: str) -> dict[str, Any]:
    return {"id": reference, "collection": collection, "idempotency_key": key, "state": state}


def create_app(
    db_path: str | Path,
    *,
    token: str | None = None,
    faults: ReceiverFaults | None = None,
    allow_faults: bool = False,
) -> Starlette:
    """The receiver app over its own SQLite file; ``app.state.store`` and ``.faults`` are live.

    ``allow_faults`` adds ``PUT /_receiver/faults`` (fault switches over HTTP); without it the
    switches change only in this process. The caller closes ``app.state.store`` when the server
    has stopped (:func:`serve` does).
    """
    store = ReceiverStore(db_path)
    switches = faults or ReceiverFaults()

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    async def submit(request: Request) -> Response:
        collection = request.path_params["collection"]
        if not _COLLECTION.fullmatch(collection):
            return _error(404, "no_such_collection")
        if not authorized(request):
            return _error(401, "unauthorized", **{"WWW-Authenticate": "Bearer"})
        if switches.take("throttle"):
            return _error(429, "rate_limited", **{"Retry-After": str(switches.retry_after_s)})
        try:
            body = json.loads(await request.body())
        except (ValueError, RecursionError):
            return _error(400, "body_not_json")
        if not isinstance(body, dict):
            return _error(400, "body_not_object")
        key = request.headers.get("idempotency-key") or body.get("message_id")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            return _error(400, "idempotency_key_missing")
        try:
            canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        except RecursionError:
            return _error(400, "body_too_deep")
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        hold = switches.hold_s > 0
        found = store.submit(collection, key, digest, canonical, hold=hold)
        if found.verdict == "conflict":
            return _error(switches.conflict_status, "key_reused")
        if found.verdict == "in_flight":
            return _error(409, "key_in_flight")
        if found.verdict == "performed" and hold:
            await asyncio.sleep(switches.hold_s)
            store.complete(collection, key)
        answer = _effect(collection, key, found.reference, "performed")
        if switches.take("drop_after_commit"):
            return _DroppedResponse()
        if switches.take("error_after_commit"):
            return _error(503, "internal")
        if switches.slow_reply_s > 0:
            await asyncio.sleep(switches.slow_reply_s)
        if found.verdict == "replayed":
            return JSONResponse(answer, status_code=200, headers={"Idempotent-Replayed": "true"})
        return JSONResponse(answer, status_code=201)

    async def lookup(request: Request) -> Response:
        collection, key = request.path_params["collection"], request.path_params["key"]
        if not authorized(request):
            return _error(401, "unauthorized", **{"WWW-Authenticate": "Bearer"})
        row = store.find(collection, key)
        if switches.slow_lookup_s > 0:
            await asyncio.sleep(switches.slow_lookup_s)
        if row is None:
            return _error(404, "not_found")
        age_s = (time.time_ns() - int(row["created_ns"])) / 1e9
        if age_s < switches.lookup_lag_s:
            return _error(404, "not_found")  # the lookup index lags behind the effects
        return JSONResponse(_effect(collection, key, row["provider_reference"], row["state"]))

    async def stats(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "unauthorized", **{"WWW-Authenticate": "Bearer"})
        return JSONResponse(dataclasses.asdict(store.counts()))

    async def set_faults(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "unauthorized", **{"WWW-Authenticate": "Bearer"})
        try:
            changes = json.loads(await request.body())
            if not isinstance(changes, dict):
                raise FaultRefused("body", "the body must be a JSON object of switches")
            switches.update(changes)
        except FaultRefused as refused:
            return JSONResponse(
                {"error": "bad_faults", "field": refused.field, "message": refused.message},
                status_code=400,
            )
        except (ValueError, RecursionError):
            return JSONResponse(
                {"error": "bad_faults", "field": "body", "message": "the body is not JSON"},
                status_code=400,
            )
        return JSONResponse(dataclasses.asdict(switches))

    routes = [
        Route("/v1/{collection}", submit, methods=["POST"]),
        Route("/v1/{collection}/{key:path}", lookup, methods=["GET"]),
        Route("/_receiver/stats", stats, methods=["GET"]),
    ]
    if allow_faults:
        routes.append(Route("/_receiver/faults", set_faults, methods=["PUT"]))
    app = Starlette(routes=routes)
    app.state.store = store
    app.state.faults = switches
    return app
