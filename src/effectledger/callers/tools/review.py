"""The reviewer's tool: the queue of proposals waiting for the caller's decision, read-only.

``pending_proposals`` is offered to reviewers over MCP (``build_server(..., review=True)``),
never to an agent's tool list: it answers :meth:`~effectledger.app.EffectLedger.pending` for the
authenticated reviewer with the same entries as the HTTP API and the pages. There is no approve
or deny tool on purpose: a decision is a person's, made on the proposal's page, the command line
or the HTTP API with the digest they were shown, not a model's tool call.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from effectledger.app import EffectLedger
from effectledger.callers.tools.definitions import ToolDefinition
from effectledger.callers.tools.function_tools import ToolResult, parse_arguments
from effectledger.errors import AdmissionDenied, EffectLedgerError, InvalidInput, NotFound
from effectledger.model import Context
from effectledger.model.authority import Correlation

__all__ = ["PENDING_TOOL", "ReviewTools"]

PENDING_TOOL = "pending_proposals"
_TEXT = {"type": "string", "minLength": 1, "maxLength": 128}
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {**_TEXT, "description": "only proposals of this action"},
        "pool": {**_TEXT, "description": "only proposals drawing on this capacity pool"},
        "proposer": {**_TEXT, "description": "only proposals by this actor"},
        "expiring_before": {
            "type": "string",
            "format": "date-time",
            "description": "only proposals expiring before this time (ISO 8601 with offset)",
        },
        "order": {"type": "string", "enum": ["expiring", "newest"], "default": "expiring"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
        "after": {**_TEXT, "description": "the next_cursor of the previous page"},
    },
    "additionalProperties": False,
}
DEFINITION = ToolDefinition(
    name=PENDING_TOOL,
    description=(
        "List the proposals that wait for your decision: each with its target, arguments, "
        "digest, why it waits (policy, approvals still needed) and when it expires. Read-only; "
        "decide on the proposal's page or with the digest shown."
    ),
    parameters=_PARAMETERS,
    read_only=True,
    destructive=False,
    idempotent=True,
    open_world=False,
)


class ReviewTools:
    """The reviewer's read-only tools over one :class:`EffectLedger`, shaped like the agent's."""

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger

    def definitions(self) -> list[ToolDefinition]:
        """The reviewer's tools: ``pending_proposals``."""
        return [DEFINITION]

    def call(
        self,
        context: Context,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None,
        *,
        correlation: Correlation | None = None,
        tenant_id: str | None = None,
    ) -> ToolResult:
        """Answer one call for the authenticated reviewer; refusals come back as errors.

        ``tenant_id``, when the host names the tenant the call is addressed to, is compared
        first with ``context``'s: another one is refused (``admission_denied`` with the reason
        ``tenant_mismatch``) before anything is read, as the agent's tools do.
        """
        try:
            if tenant_id is not None and tenant_id != context.tenant_id:
                raise AdmissionDenied(
                    "the call names another tenant than the caller's", reason="tenant_mismatch"
                )
            if name != PENDING_TOOL:
                raise NotFound(f"no tool {str(name)[:64]!r}", tool=str(name)[:64])
            page = self.ledger.pending(context, **_arguments(arguments))
            return ToolResult(
                tool=PENDING_TOOL,
                data=page.to_dict(),
                guidance="Show each proposal with its expiry; nothing was decided.",
                is_error=False,
            )
        except EffectLedgerError as exc:
            return ToolResult(
                tool=str(name)[:64],
                data={"error": exc.to_dict()},
                guidance="The call was refused and nothing was recorded.",
                is_error=True,
            )


def _arguments(arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    # The same rules as every other tool's: size limit, no repeated key, no NaN, an object.
    arguments = parse_arguments(arguments)
    unknown = sorted(str(key) for key in arguments if key not in _PARAMETERS["properties"])
    if unknown:
        raise InvalidInput(f"unknown arguments {unknown}", field=unknown[0][:64])
    parsed = dict(arguments)
    for key in ("action", "pool", "proposer", "order", "after"):
        if key in parsed and not isinstance(parsed[key], str):
            raise InvalidInput(f"{key} must be text", field=key)
    if "limit" in parsed and (
        not isinstance(parsed["limit"], int) or isinstance(parsed["limit"], bool)
    ):
        raise InvalidInput("limit must be an integer", field="limit")
    if "expiring_before" in parsed:
        parsed["expiring_before"] = _time(parsed["expiring_before"])
    return parsed


def _time(value: object) -> datetime:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidInput(
            "expiring_before must be an ISO 8601 time with an offset", field="expiring_before"
        )
    return parsed
