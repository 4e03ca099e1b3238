"""The controlled executor: claim, check the destination, submit outside any transaction, record.

A repeated call for an operation that is not READY makes no attempt: it returns the recorded
state, including a success the caller never heard about. Anything that goes wrong after the
claim and before a definite answer (an exception, a timeout, a cancellation) is recorded as
``Unknown``, never as a rejection, because the destination may have acted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from effectledger._failpoints import crash_point
from effectledger.destinations import Destination, ensure_matches
from effectledger.ledger import DISPATCH_WORKER, Ledger, new_id
from effectledger.model import (
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    OperationState,
)

__all__ = ["DispatchGuard", "Executor"]

log = logging.getLogger(__name__)


DispatchGuard = Callable[[Context, Operation], "str | None"]
"""A dispatch-time recheck: returns a reason code to release the operation, or ``None``."""


class Executor:
    """Performs admitted operations through one destination adapter.

    ``guard`` is the dispatch-time recheck (expiry, resource version, permission; see
    :meth:`effectledger.authority.Authority.dispatch_guard`): an operation it objects to is
    RELEASED and the destination is never contacted.
    """

    def __init__(
        self,
        ledger: Ledger,
        destination: Destination,
        *,
        executor_id: str = DISPATCH_WORKER,
        guard: DispatchGuard | None = None,
    ) -> None:
        self.ledger = ledger
        self.destination = destination
        self.executor_id = executor_id
        self.guard = guard

    def execute(self, context: Context, operation_id: str) -> DispatchResult:
        """Perform the operation once, or report what was already recorded for it."""
        status = self.ledger.status(context, operation_id)
        if status.state is not OperationState.READY:
            return status
        expected_version: int | None = None
        if self.guard is not None:
            operation = self.ledger.get(context, operation_id)
            reason = self.guard(context, operation)
            if reason is not None:
                return self.ledger.release(
                    context, operation_id, reason=reason, expected_version=operation.version
                )
            expected_version = operation.version
        attempt_id = new_id()
        bound_to = DestinationRef(
            account_id=self.destination.account_id, endpoint=self.destination.endpoint
        )
        prepared = self.ledger.claim(
            context,
            operation_id,
            attempt_id=attempt_id,
            executor_id=self.executor_id,
            bound_to=bound_to,
            expected_version=expected_version,
        )
        if prepared is None:  # another worker claimed it between the read and the claim
            return self.ledger.status(context, operation_id)
        ensure_matches(self.destination, prepared.destination)
        try:
            observation = self.destination.submit(prepared.command, prepared.idempotency_key)
        except Exception as exc:
            # The destination may have acted: Unknown, never a rejection. Only the exception's
            # type is kept; its text may carry secrets or payload.
            log.warning("submission outcome unknown for %s: %s", operation_id, type(exc).__name__)
            observation = Observation.unknown(f"executor/{type(exc).__name__}")
        except BaseException:
            # Interrupted mid-submission: record the uncertainty before letting go.
            self.ledger.record(
                prepared, Observation.unknown("executor/interrupted"), actor=self.executor_id
            )
            raise
        crash_point("after_reply")
        return self.ledger.record(prepared, observation, actor=self.executor_id)

    async def execute_async(self, context: Context, operation_id: str) -> DispatchResult:
        """:meth:`execute` in a worker thread; the result is recorded even if the caller cancels.

        Cancelling the awaiting task does not cancel the dispatch: the thread goes on, records
        the outcome in the ledger, and the caller can read it with ``status`` later.
        """
        task = asyncio.ensure_future(asyncio.to_thread(self.execute, context, operation_id))
        return await asyncio.shield(task)
