"""The published OpenAPI document, with each registered action's arguments in it.

FastAPI describes ``POST /v1/proposals`` from its request model, where ``arguments`` can only be
"an object": the action named decides what it takes. The document served at ``/openapi.json``
says exactly that: ``ProposeRequest`` is one of ``ProposeRequest_<action>`` per registered
action (a discriminator on ``action``), each carrying the JSON Schema of that action's argument
model, so a client, a generated SDK or a conformance checker knows what each action accepts.
The document is rebuilt when the registered actions change.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from effectledger.app.ledger import EffectLedger

__all__ = ["publish_actions"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
"""Characters a component name may not hold (OpenAPI: ``^[a-zA-Z0-9.\\-_]+$``)."""


def publish_actions(app: FastAPI, ledger: EffectLedger) -> None:
    """Serve ``app``'s document with the arguments of ``ledger``'s actions (module docstring)."""
    built: dict[tuple[str, ...], dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        actions = tuple(sorted(action.name for action in ledger.registry))
        if actions not in built:
            document = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=app.routes,
            )
            _describe_actions(document, ledger)
            built.clear()
            built[actions] = document
        app.openapi_schema = built[actions]
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _describe_actions(document: dict[str, Any], ledger: EffectLedger) -> None:
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    generic = schemas.get("ProposeRequest")
    if generic is None or len(ledger.registry) == 0:
        return
    variants: dict[str, str] = {}
    for action in sorted(ledger.registry, key=lambda action: action.name):
        name = f"ProposeRequest_{_UNSAFE.sub('_', action.name)}"
        prefix = f"{name}_"
        arguments = action.arguments.model_json_schema(
            ref_template=f"#/components/schemas/{prefix}{{model}}"
        )
        for nested, schema in arguments.pop("$defs", {}).items():
            schemas[prefix + nested] = schema
        variant = copy.deepcopy(generic)
        variant["title"] = f"Propose {action.name}"
        variant["properties"]["action"] = {"type": "string", "const": action.name}
        arguments.setdefault("title", f"Arguments of {action.name}")
        variant["properties"]["arguments"] = arguments
        schemas[name] = variant
        variants[action.name] = f"#/components/schemas/{name}"
    schemas["ProposeRequest"] = {
        "title": "ProposeRequest",
        "description": generic.get("description", ""),
        "oneOf": [{"$ref": ref} for ref in variants.values()],
        "discriminator": {"propertyName": "action", "mapping": variants},
    }
