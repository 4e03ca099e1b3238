"""The service beneath the public facade: propose, decide, admit, dispatch, reconcile.

:class:`~effectledger.app.EffectLedger` is built over :class:`EffectService`, and every caller
(function tools, agent frameworks, the MCP server, the HTTP API) is built over that facade, so the
same scenario gives the same outcome and the same audit trail whichever caller carried it. Each call
returns an ordered domain trace (request received, tenant accepted, reservation result, dispatch
result, reconciliation) that tests compare across callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from effectledger.actions import ActionRegistry
from effectledger.authority import Approval, Authority, Correlation, Proposal
from effectledger.destinations import Destination
from effectledger.errors import AdmissionDenied, DestinationMismatch, NotFound
from effectledger.executor import Executor
from effectledger.ledger import Ledger
from effectledger.model import (
    Context,
    DestinationRef,
    DispatchResult,
    OperationState,
    validate_identifier,
)
from effectledger.outcomes import DenialReason, EffectOutcome, EffectResult, TraceStep
from effectledger.recovery import RecoveryWorker

__all__ = ["EffectResult", "EffectService", "TraceStep"]


_REPLAY_TRACES = {
    state: (
        TraceStep("request", "received"),
        TraceStep("tenant", "accepted"),
        TraceStep("reservation", "replayed"),
        TraceStep("dispatch", state.value),
    )
    for state in OperationState
}
"""The trace of an exact replay in each recorded state: the same steps every time, made once."""


@dataclass(slots=True)
class _Trace:
    steps: list[TraceStep] = field(default_factory=list)

    def add(self, step: str, outcome: str) -> None:
        self.steps.append(TraceStep(step, outcome))


class EffectService:
    """Ledger, authority, executors and recovery for one registry of actions."""

    def __init__(
        self,
        ledger: Ledger,
        registry: ActionRegistry,
        destinations: Iterable[Destination],
    ) -> None:
        self.ledger = ledger
        self.registry = registry
        self.authority = Authority(ledger, registry)
        self.destinations = {
            DestinationRef(account_id=d.account_id, endpoint=d.endpoint): d for d in destinations
        }
        self._executors = {
            ref: Executor(ledger, d, guard=self.authority.dispatch_guard)
            for ref, d in self.destinations.items()
        }
        self.recovery = RecoveryWorker(ledger, list(self.destinations.values()))

    # -- the agent's side ----------------------------------------------------------------

    def propose(
        self,
        context: Context,
        action: str,
        arguments: Mapping[str, Any],
        *,
        operation_id: str | None = None,
        correlation: Correlation | None = None,
    ) -> Proposal:
        """Record what the model proposes (validated, normalized, immutable)."""
        return self.authority.propose(
            context, action, arguments, operation_id=operation_id, correlation=correlation
        )

    # -- the reviewer's side -------------------------------------------------------------

    def approve(
        self,
        approver: Context,
        proposal_id: str,
        *,
        digest: str,
        expires_in: timedelta = timedelta(hours=1),
    ) -> Approval:
        """Approve exactly the proposal the approver was shown (by digest)."""
        return self.authority.approve(approver, proposal_id, digest=digest, expires_in=expires_in)

    def deny(self, approver: Context, proposal_id: str, *, digest: str, reason: str) -> Approval:
        """Deny a proposal, recording who and why."""
        return self.authority.deny(approver, proposal_id, digest=digest, reason=reason)

    # -- execution -----------------------------------------------------------------------

    def perform(
        self,
        context: Context,
        proposal_id: str,
        *,
        approval_id: str | None = None,
        recorded_decision: bool = False,
        tenant_id: str | None = None,
    ) -> EffectResult:
        """Admit the proposal on its authority and dispatch it once; report with a trace.

        Authority outcomes are results, never exceptions: a denial (``reason`` holds its stable
        code) and a proposal the context cannot see (``not_found``: an unknown id and another
        tenant's id look the same) come back as ``outcome="denied"``. Malformed arguments raise
        :class:`~effectledger.errors.InvalidInput`. ``outcome`` is ``performed`` only for the call
        whose own claim was submitted, ``released`` only for the call that released it; any
        other call reports the recorded state as ``replayed``. With ``recorded_decision`` and no
        ``approval_id``, the decision recorded on the proposal's trail is presented
        (:meth:`Authority.recorded_decision`).
        """
        trace = _Trace()
        trace.add("request", "received")
        if tenant_id is not None and tenant_id != context.tenant_id:
            trace.add("tenant", "rejected")
            return _denied("tenant_mismatch", trace)
        trace.add("tenant", "accepted")
        try:
            admission = self.authority.perform_admission(
                context,
                proposal_id,
                approval_id=approval_id,
                recorded_decision=recorded_decision,
                tenant_id=tenant_id,
                claim_for=self._executors.keys(),
            )
        except AdmissionDenied as exc:
            trace.add("reservation", f"denied:{exc.reason}")
            return _denied(exc.reason, trace)
        except NotFound:
            trace.add("reservation", "denied:not_found")
            return _denied("not_found", trace)
        if isinstance(admission, DispatchResult):  # the exact replay of a finished call
            return EffectResult(
                outcome=EffectOutcome.REPLAYED,
                operation_id=admission.operation_id,
                state=admission.state,
                reason=None,
                provider_reference=admission.provider_reference,
                trace=_REPLAY_TRACES[admission.state],
            )
        operation = admission.operation
        trace.add("reservation", "replayed" if admission.replayed else "admitted")
        executor = self.executor_for(operation.destination)
        if admission.claim is not None:  # admitted and claimed in one transaction: submit it
            result = executor.execute_claimed(admission.claim)
            trace.add("dispatch", result.state.value)
            return _result("performed", result, trace)
        step = executor.execute_step(context, operation.operation_id)
        trace.add("dispatch", step.result.state.value)
        return _result(step.taken, step.result, trace)

    def reconcile(self, context: Context, operation_id: str) -> EffectResult:
        """Look up this one operation if it is due; report its state with its trace step.

        The context is checked first: an operation of another tenant is ``not_found`` and
        nothing is reserved, looked up or recorded. Only this operation is reconciled, never
        the rest of the due work (that is :meth:`RecoveryWorker.run_once`'s job).
        """
        operation = self.ledger.get(context, operation_id)
        report = self.recovery.recover_operation(operation)
        operation = self.ledger.get(context, operation_id)
        found = any(op == operation_id for _, op, _ in report.resolved)
        return EffectResult(
            outcome=EffectOutcome.RECONCILED if found else EffectOutcome.UNRESOLVED,
            operation_id=operation_id,
            state=operation.state,
            reason=None,
            provider_reference=operation.provider_reference,
            trace=(TraceStep("reconciliation", operation.state.value),),
        )

    def status(self, context: Context, operation_id: str) -> DispatchResult:
        """The recorded state of an operation the context's actor requested (one read).

        An unknown id, another tenant's and another requester's all raise
        :class:`~effectledger.errors.NotFound`; a malformed id raises ``InvalidInput``.
        """
        validate_identifier(operation_id, "operation_id")
        return self.ledger.status(context, operation_id)

    def executor_for(self, destination: DestinationRef) -> Executor:
        """The executor bound to ``destination`` (with the dispatch-time recheck)."""
        try:
            return self._executors[destination]
        except KeyError:
            raise DestinationMismatch(
                "no destination adapter is bound to that account and endpoint"
            ) from None


def _denied(reason: str, trace: _Trace) -> EffectResult:
    return EffectResult(
        outcome=EffectOutcome.DENIED,
        operation_id=None,
        state=None,
        reason=DenialReason(reason),
        provider_reference=None,
        trace=tuple(trace.steps),
    )


def _result(outcome: str, result: DispatchResult, trace: _Trace) -> EffectResult:
    if outcome == "performed" and result.rejection is not None:
        outcome = "refused"  # dispatched, and nothing was accepted: say so, and why
    return EffectResult(
        outcome=EffectOutcome(outcome),
        operation_id=result.operation_id,
        state=result.state,
        reason=None,
        provider_reference=result.provider_reference,
        trace=tuple(trace.steps),
        rejection=result.rejection if outcome == "refused" else None,
    )
