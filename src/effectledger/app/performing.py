"""How :meth:`~effectledger.EffectLedger.perform` and :meth:`~effectledger.EffectLedger.reconcile`
run, and the ordered domain trace each returns.

A perform admits the proposal on its authority (:meth:`effectledger.authority.Authority.
perform_admission`, one transaction that may also claim) and dispatches through the guarded
executor of the operation's destination. Each call reports an ordered trace (request received,
tenant accepted, reservation result, dispatch result; reconciliation) that tests compare across
callers: the same scenario gives the same outcome and trace whichever caller carried it.
"""

from __future__ import annotations

from effectledger import telemetry
from effectledger.app.access import require_writer
from effectledger.app.declaring import Declarations
from effectledger.authority import Authority
from effectledger.errors import AdmissionDenied, NotFound
from effectledger.model.authority import Proposal
from effectledger.model.operations import (
    Context,
    DispatchResult,
    OperationState,
    validate_identifier,
)
from effectledger.model.results import DenialReason, EffectOutcome, EffectResult, TraceStep
from effectledger.workers.recovery import RecoveryWorker

__all__ = ["perform", "reconcile"]


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

_DISPATCHED = {state: TraceStep("dispatch", state.value) for state in OperationState}
"""The trace step of a dispatch that left its operation in each state, made once."""
_ACCEPTED = (TraceStep("request", "received"), TraceStep("tenant", "accepted"))
"""The trace's first two steps of every call addressed to the caller's own tenant."""
_REJECTED = (TraceStep("request", "received"), TraceStep("tenant", "rejected"))


def perform(
    authority: Authority,
    declarations: Declarations,
    context: Context,
    proposal: Proposal | str,
    *,
    approval_id: str | None,
    recorded_decision: bool,
    tenant_id: str | None,
) -> EffectResult:
    """Admit the proposal on its authority and dispatch it once; report with a trace.

    Authority outcomes are results, never exceptions: a denial (``reason`` holds its stable
    code) and a proposal the context cannot see (``not_found``: an unknown id and another
    tenant's id look the same) come back as ``outcome="denied"``. Malformed arguments raise
    :class:`~effectledger.errors.InvalidInput`. ``outcome`` is ``performed`` only for the call
    whose own claim was submitted, ``released`` only for the call that released it; any other
    call reports the recorded state as ``replayed``; a claim the destination accepted nothing from
    is ``refused`` with its ``rejection``; a context whose roles only read is ``not_permitted``.
    The call is one ``perform`` span, and counted
    by outcome (and denial reason) in :mod:`effectledger.telemetry`.
    """
    if context.roles:  # only a context with roles can hold nothing but read-only ones
        require_writer(context)
    if type(proposal) is str:
        proposal_id = proposal
    elif isinstance(proposal, Proposal):
        proposal_id = proposal.proposal_id
    else:  # a str subclass passes; anything else is refused as a malformed id, naming the field
        proposal_id = validate_identifier(proposal, "proposal_id")
    if telemetry.quiet():  # no provider is set: no span to open, no counter to add
        return _perform(
            authority,
            declarations,
            context,
            proposal_id,
            approval_id=approval_id,
            recorded_decision=recorded_decision,
            tenant_id=tenant_id,
        )
    with telemetry.span("perform", tenant_id=context.tenant_id, proposal_id=proposal_id) as span:
        if isinstance(proposal, Proposal):
            span.set(action=proposal.action)
            telemetry.correlation_attributes(span, proposal.correlation)
        result = _perform(
            authority,
            declarations,
            context,
            proposal_id,
            approval_id=approval_id,
            recorded_decision=recorded_decision,
            tenant_id=tenant_id,
        )
        reason = None if result.reason is None else result.reason.value
        span.set(
            operation_id=result.operation_id,
            outcome=result.outcome.value,
            state=None if result.state is None else result.state.value,
            reason=reason,
            uncertain=result.uncertain,
        )
    telemetry.count("performs", outcome=result.outcome.value)
    if reason is not None:
        telemetry.count("denials", reason=reason)
    return result


def _perform(
    authority: Authority,
    declarations: Declarations,
    context: Context,
    proposal_id: str,
    *,
    approval_id: str | None,
    recorded_decision: bool,
    tenant_id: str | None,
) -> EffectResult:
    if tenant_id is not None and tenant_id != context.tenant_id:
        return _denied("tenant_mismatch", _REJECTED)
    try:
        admission = authority.perform_admission(
            context,
            proposal_id,
            approval_id=approval_id,
            recorded_decision=recorded_decision,
            claim_for=declarations.executors,
        )
    except AdmissionDenied as exc:
        note = exc.details.get("denial_note") if exc.reason == "approval_denied" else None
        return _denied(
            exc.reason,
            (*_ACCEPTED, TraceStep("reservation", f"denied:{exc.reason}")),
            note=note if isinstance(note, str) and note else None,
        )
    except NotFound:
        return _denied("not_found", (*_ACCEPTED, TraceStep("reservation", "denied:not_found")))
    if isinstance(admission, DispatchResult):  # the exact replay of a finished call: one read
        return EffectResult(
            outcome=EffectOutcome.REPLAYED,
            operation_id=admission.operation_id,
            state=admission.state,
            reason=None,
            provider_reference=admission.provider_reference,
            trace=_REPLAY_TRACES[admission.state],
        )
    operation = admission.operation
    reserved = TraceStep("reservation", "replayed" if admission.replayed else "admitted")
    executor = declarations.executor_for(operation.destination)
    if admission.claim is not None:  # admitted and claimed in one transaction: submit it
        result = executor.execute_claimed(admission.claim)
        return _result("performed", result, (*_ACCEPTED, reserved, _dispatched(result)))
    step = executor.execute_step(context, operation.operation_id)
    return _result(step.taken, step.result, (*_ACCEPTED, reserved, _dispatched(step.result)))


def _dispatched(result: DispatchResult) -> TraceStep:
    return _DISPATCHED[result.state]


def reconcile(
    authority: Authority, declarations: Declarations, context: Context, operation_id: str
) -> EffectResult:
    """Look up this one operation if it is due; report its state with its trace step.

    The context is checked first: an operation of another tenant is ``not_found`` and nothing
    is reserved, looked up or recorded. Only this operation is reconciled, never the rest of
    the due work (that is :meth:`~effectledger.EffectLedger.recover`'s job).
    """
    ledger = authority.ledger
    operation = ledger.get(context, operation_id)
    worker = RecoveryWorker(ledger, declarations.destinations.values())
    report = worker.recover_operation(operation)
    operation = ledger.get(context, operation_id)
    found = any(op == operation_id for _, op, _ in report.resolved)
    return EffectResult(
        outcome=EffectOutcome.RECONCILED if found else EffectOutcome.UNRESOLVED,
        operation_id=operation_id,
        state=operation.state,
        reason=None,
        provider_reference=operation.provider_reference,
        trace=(TraceStep("reconciliation", operation.state.value),),
    )


def _denied(reason: str, trace: tuple[TraceStep, ...], *, note: str | None = None) -> EffectResult:
    return EffectResult(
        outcome=EffectOutcome.DENIED,
        operation_id=None,
        state=None,
        reason=DenialReason(reason),
        provider_reference=None,
        trace=trace,
        note=note,
    )


def _result(outcome: str, result: DispatchResult, trace: tuple[TraceStep, ...]) -> EffectResult:
    if outcome == "performed" and result.rejection is not None:
        outcome = "refused"  # dispatched, and nothing was accepted: say so, and why
    return EffectResult(
        outcome=EffectOutcome(outcome),
        operation_id=result.operation_id,
        state=result.state,
        reason=None,
        provider_reference=result.provider_reference,
        trace=trace,
        rejection=result.rejection if outcome == "refused" else None,
    )
