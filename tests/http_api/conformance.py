"""A schemathesis check of this API's own rule, loaded by ``schemathesis run`` as its hooks.

Every error the server sends is ``{"code", "message", "details"}`` with a stable code from the
error tree (or one of the HTTP layer's own). Each checked error's status and code is appended
to the file ``$EFFECTLEDGER_TEST_CHECKED`` names, so the test knows the check ran.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

import schemathesis

from effectledger import errors
from effectledger.callers.http.app import HTTP_ONLY_CODES

STABLE_CODES = {
    cls.code
    for cls in vars(errors).values()
    if inspect.isclass(cls) and issubclass(cls, errors.EffectLedgerError)
} | set(HTTP_ONLY_CODES)


@schemathesis.check
def error_has_a_stable_code(ctx: Any, response: Any, case: Any) -> None:
    """An error answer is the one JSON shape, its code one of the stable codes."""
    if response.status_code < 400:
        return
    body = json.loads(response.content)
    if set(body) != {"code", "message", "details"}:
        raise AssertionError(f"an error body of another shape: {body}")
    if body["code"] not in STABLE_CODES:
        raise AssertionError(f"an error code that is not a stable one: {body['code']}")
    with open(os.environ["EFFECTLEDGER_TEST_CHECKED"], "a", encoding="utf-8") as checked:
        checked.write(f"{response.status_code} {body['code']}\n")
