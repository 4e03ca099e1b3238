"""The model-facing dispatch tool: bound to one trusted context and one admitted operation.

The model cannot name a recipient, an amount, a tenant or another operation through this tool:
it takes no arguments at all. Arguments it is given anyway are rejected, never used, and the
rejection leaves the ledger and the destination untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from effectledger.app.ledger import EffectLedger
from effectledger.errors import ToolArgumentsRejected
from effectledger.model.operations import Context, DispatchResult
from effectledger.model.operations import validate_identifier as _validate

__all__ = ["DispatchTool"]


class DispatchTool:
    """Dispatches the stored command authorized for one operation, once.

    ``name``, ``description`` and :meth:`json_schema` describe it to any function-calling model.
    Calling it again returns the recorded state; it never makes a second attempt.
    """

    name = "dispatch_approved_operation"
    description = (
        "Performs the stored action that was authorized for this operation, exactly as approved. "
        "Takes no arguments. Reports the recorded state; OUTCOME_UNKNOWN means the effect may or "
        "may not have happened and is being checked - do not tell the user it failed."
    )

    def __init__(self, ledger: EffectLedger, context: Context, operation_id: str) -> None:
        self._ledger = ledger
        self._context = context
        self._operation_id = _validate(operation_id, "operation_id")
        # The guarded executor of the operation's destination, found on the first call: a
        # replay is then the executor's one read, as the tool's own replay always was.
        self._execute: Callable[[Context, str], DispatchResult] | None = None

    @classmethod
    def for_operation(
        cls, ledger: EffectLedger, context: Context, operation_id: str
    ) -> DispatchTool:
        """The tool bound to one admitted operation ``context`` may see (``NotFound`` if none)."""
        tool = cls(ledger, context, operation_id)
        tool._bind()
        return tool

    def _bind(self) -> Callable[[Context, str], DispatchResult]:
        if self._execute is None:
            operation = self._ledger.operation(self._context, self._operation_id)
            self._execute = self._ledger.executor_for(operation.destination).execute
        return self._execute

    def _run(self) -> DispatchResult:
        return self._bind()(self._context, self._operation_id)

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The JSON schema of the tool's parameters: an empty object, nothing else allowed."""
        return {"type": "object", "properties": {}, "additionalProperties": False}

    def _check(self, arguments: Mapping[str, Any]) -> None:
        if arguments:
            raise ToolArgumentsRejected(
                "this tool takes no arguments; the operation was fixed when it was authorized",
                rejected=sorted(str(name) for name in arguments)[:20],
            )

    def __call__(self, **arguments: Any) -> dict[str, Any]:
        """Dispatch (or report) and return the JSON-ready result."""
        return self.invoke(arguments).to_dict()

    def invoke(self, arguments: Mapping[str, Any] | None = None) -> DispatchResult:
        """Dispatch with the raw argument mapping a framework received from the model."""
        self._check(arguments or {})
        return self._run()

    async def invoke_async(self, arguments: Mapping[str, Any] | None = None) -> DispatchResult:
        """:meth:`invoke` in a worker thread; the outcome is recorded even if the caller cancels."""
        self._check(arguments or {})
        call = asyncio.to_thread(self._run)
        return await asyncio.shield(asyncio.ensure_future(call))
