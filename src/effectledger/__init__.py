"""effectledger: authorized, exactly-once-where-possible, auditable effects for AI agent tools.

The agent proposes; trusted code binds approval to the exact action; the ledger commits
responsibility before anything leaves the process; the executor performs the effect once; the
recovery worker asks the destination when a reply is lost. See the README for a tour and
docs/design.md for the vocabulary, the states and the invariants.

Start with :func:`connect` (or :func:`connect_async`): one :class:`EffectLedger` that declares
actions and offers every step. This module holds that object, the records that pass from call
to call, the errors and the destination protocol. The lower layer stays importable from its own
packages for those who need it (docs/design.md, "Layers"): :mod:`effectledger.ledger`,
:mod:`effectledger.authority`, :mod:`effectledger.workers`, :mod:`effectledger.store`,
:mod:`effectledger.actions.registry`, :mod:`effectledger.destinations`.
"""

from importlib import metadata as _metadata

from effectledger.actions import (
    ActionHandle,
    Decision,
    Display,
    Policy,
    Preauthorization,
    RulePolicy,
    Tier,
)
from effectledger.app import AsyncEffectLedger, EffectLedger, connect, connect_async
from effectledger.clock import Clock, ManualClock, SystemClock
from effectledger.destinations import Destination
from effectledger.destinations.simulated import LookupMode, SimulatedReceiver, SubmitMode
from effectledger.errors import (
    AdmissionConflict,
    AdmissionDenied,
    ApprovalRefused,
    AuditVerificationFailed,
    CommitUncertain,
    ConcurrentModification,
    Conflict,
    ConstraintViolation,
    DeliveryUncertain,
    DestinationError,
    DestinationMismatch,
    DestinationUnavailable,
    EffectLedgerError,
    EvidenceRequired,
    ExportCursorMismatch,
    ExportFailed,
    IntegrityError,
    InvalidInput,
    InvalidTransition,
    LedgerNotEmpty,
    LogKeyInvalid,
    LogNotSealed,
    MissingAdmission,
    MissingExtra,
    NoteError,
    NotFound,
    NotPermitted,
    OperationIdTaken,
    ProofError,
    SecretUnavailable,
    StorageBusy,
    StorageError,
    StorageFull,
    StorageReadOnly,
    TamperedCommand,
    TamperedOperation,
    TamperedProposal,
    ToolArgumentsRejected,
)
from effectledger.ledger import LedgerSettings
from effectledger.model import (
    Approval,
    Attempt,
    AuditEvent,
    CapacityUsage,
    Command,
    Context,
    Correlation,
    DenialReason,
    DestinationRef,
    DispatchResult,
    EffectOutcome,
    EffectResult,
    Observation,
    Operation,
    OperationState,
    Outcome,
    Proposal,
    TraceStep,
)
from effectledger.model.review import (
    PendingPage,
    PendingProposal,
    ProposalReview,
    QueueOrder,
    ReviewState,
)
from effectledger.model.views import to_dict
from effectledger.workers import RecoveryReport

try:
    __version__ = _metadata.version("effectledger")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "ActionHandle",
    "AdmissionConflict",
    "AdmissionDenied",
    "Approval",
    "ApprovalRefused",
    "AsyncEffectLedger",
    "Attempt",
    "AuditEvent",
    "AuditVerificationFailed",
    "CapacityUsage",
    "Clock",
    "Command",
    "CommitUncertain",
    "ConcurrentModification",
    "Conflict",
    "ConstraintViolation",
    "Context",
    "Correlation",
    "Decision",
    "DeliveryUncertain",
    "DenialReason",
    "Destination",
    "DestinationError",
    "DestinationMismatch",
    "DestinationRef",
    "DestinationUnavailable",
    "DispatchResult",
    "Display",
    "EffectLedger",
    "EffectLedgerError",
    "EffectOutcome",
    "EffectResult",
    "EvidenceRequired",
    "ExportCursorMismatch",
    "ExportFailed",
    "IntegrityError",
    "InvalidInput",
    "InvalidTransition",
    "LedgerNotEmpty",
    "LedgerSettings",
    "LogKeyInvalid",
    "LogNotSealed",
    "LookupMode",
    "ManualClock",
    "MissingAdmission",
    "MissingExtra",
    "NotFound",
    "NotPermitted",
    "NoteError",
    "Observation",
    "Operation",
    "OperationIdTaken",
    "OperationState",
    "Outcome",
    "PendingPage",
    "PendingProposal",
    "Policy",
    "Preauthorization",
    "ProofError",
    "Proposal",
    "ProposalReview",
    "QueueOrder",
    "RecoveryReport",
    "ReviewState",
    "RulePolicy",
    "SecretUnavailable",
    "SimulatedReceiver",
    "StorageBusy",
    "StorageError",
    "StorageFull",
    "StorageReadOnly",
    "SubmitMode",
    "SystemClock",
    "TamperedCommand",
    "TamperedOperation",
    "TamperedProposal",
    "Tier",
    "ToolArgumentsRejected",
    "TraceStep",
    "__version__",
    "connect",
    "connect_async",
    "to_dict",
]

import logging as _logging

_logging.getLogger("effectledger").addHandler(_logging.NullHandler())
