"""How a verb is told which proposal or operation it acts on: a record, or its plain id."""

from __future__ import annotations

from effectledger.actions.functions import ActionHandle
from effectledger.actions.registry import Action
from effectledger.errors import InvalidInput
from effectledger.model.authority import Proposal
from effectledger.model.operations import DispatchResult, Operation
from effectledger.model.results import EffectResult

__all__ = ["ActionRef", "OperationRef", "ProposalRef", "operation_id_of", "shown"]

OperationRef = str | Proposal | Operation | DispatchResult | EffectResult
"""An operation named by its id or by a record that carries it."""

ProposalRef = Proposal | str
"""A proposal named by its record or by its id."""

ActionRef = ActionHandle | Action | str
"""An action named by its handle, its registry entry or its name."""


def shown(proposal: ProposalRef, digest: str | None) -> tuple[str, str]:
    """The proposal id and the digest the decider was shown (a record carries its own)."""
    if isinstance(proposal, Proposal):
        if digest is not None and digest != proposal.digest:
            raise InvalidInput("the digest given is not the record's")
        return proposal.proposal_id, proposal.digest
    if digest is None:
        raise InvalidInput("a decision by proposal id needs the digest the approver was shown")
    return proposal, digest


def operation_id_of(operation: OperationRef) -> str:
    """The operation id ``operation`` names; ``invalid_input`` for a result that admitted none."""
    if isinstance(operation, str):
        return operation
    if operation.operation_id is None:
        raise InvalidInput("this result names no operation: nothing was admitted")
    return operation.operation_id
