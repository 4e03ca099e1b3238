"""The ground floor: frozen records, enums and encodings, importing nothing above the errors.

- :mod:`~effectledger.model.operations`: contexts, commands, observations, operations, attempts,
  audit events and the identifier and time helpers;
- :mod:`~effectledger.model.authority`: proposals, approvals, correlation ids, capacity usage;
- :mod:`~effectledger.model.results`: what a call reports (outcome, denial reason, trace);
- :mod:`~effectledger.model.states`: event types and the one transition table;
- :mod:`~effectledger.model.canonical`: the canonical encoding and digests;
- :mod:`~effectledger.model.evidence`: evidence records and their redaction;
- :mod:`~effectledger.model.views`: any record as JSON-ready data.

The records are re-exported here; the rest is imported from its own module.
"""

from effectledger.model.authority import Approval, CapacityUsage, Correlation, Proposal
from effectledger.model.operations import (
    Attempt,
    AuditEvent,
    Command,
    Context,
    DestinationRef,
    DispatchResult,
    Observation,
    Operation,
    OperationState,
    Outcome,
    PreparedAttempt,
    Row,
)
from effectledger.model.results import (
    DenialReason,
    EffectOutcome,
    EffectResult,
    TraceStep,
)

__all__ = [
    "Approval",
    "Attempt",
    "AuditEvent",
    "CapacityUsage",
    "Command",
    "Context",
    "Correlation",
    "DenialReason",
    "DestinationRef",
    "DispatchResult",
    "EffectOutcome",
    "EffectResult",
    "Observation",
    "Operation",
    "OperationState",
    "Outcome",
    "PreparedAttempt",
    "Proposal",
    "Row",
    "TraceStep",
]
