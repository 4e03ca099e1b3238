"""How :meth:`~effectledger.EffectLedger.propose` runs: the arguments read one way, the proposal
recorded by the authority in one ``propose`` span, then announced to the reviewers' notifiers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from effectledger import telemetry
from effectledger.app import reviewing
from effectledger.app.access import require_writer
from effectledger.authority import Authority
from effectledger.errors import InvalidInput
from effectledger.model.authority import Correlation, Proposal
from effectledger.model.operations import Context

__all__ = ["propose"]


def propose(
    authority: Authority,
    notifiers: Iterable[reviewing.Notify],
    context: Context,
    name: str,
    arguments: Mapping[str, Any] | BaseModel | None,
    fields: Mapping[str, Any],
    *,
    operation_id: str | None,
    correlation: Correlation | None,
    stated_reason: str | None = None,
) -> Proposal:
    """Record what ``context`` proposes: arguments as a mapping, a model, or keywords (one way).

    A context whose roles only read is refused (``not_permitted``). Notifiers hear of the
    proposal after it is committed; a notification never blocks or undoes it.
    """
    require_writer(context)
    if arguments is not None and fields:
        raise InvalidInput("give the arguments as one object or as keywords, not both")
    if isinstance(arguments, BaseModel):
        arguments = arguments.model_dump()
    with telemetry.span("propose", tenant_id=context.tenant_id, action=name) as span:
        made = authority.propose(
            context,
            name,
            fields if arguments is None else arguments,
            operation_id=operation_id,
            correlation=correlation,
            stated_reason=stated_reason,
        )
        span.set(proposal_id=made.proposal_id, operation_id=made.operation_id)
        telemetry.correlation_attributes(span, made.correlation)
    if notifiers:
        reviewing.announce(notifiers, authority.registry, made, authority.ledger.clock.now())
    return made
