"""effectledger: authorized, exactly-once-where-possible, auditable effects for AI agent tools.

The agent proposes; trusted code binds approval to the exact action; the ledger commits
responsibility before anything leaves the process; the executor performs the effect once; the
recovery worker asks the destination when a reply is lost. See the README for a tour.

Start with :func:`connect` (or :func:`connect_async`): one :class:`EffectLedger` that declares
actions with a decorator and offers every step. The objects beneath it (:class:`Ledger`,
:class:`Authority`, :class:`EffectService`, :class:`Executor`, :class:`RecoveryWorker`) stay
public as the lower layer.
"""

from effectledger.actions import Action, ActionRegistry
from effectledger.app import EffectLedger, connect
from effectledger.app_async import AsyncEffectLedger, connect_async
from effectledger.authority import Approval, Authority, CapacityUsage, Correlation, Proposal
from effectledger.clock import Clock, ManualClock, SystemClock
from effectledger.destinations import Destination, ensure_matches
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
    TamperedCommand,
    TamperedOperation,
    TamperedProposal,
    ToolArgumentsRejected,
)
from effectledger.executor import Executor
from effectledger.function_actions import ActionHandle, FunctionDestination
from effectledger.ledger import DueWork, Ledger, LedgerSettings, new_id
from effectledger.model import (
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
)
from effectledger.outcomes import DenialReason, EffectOutcome, EffectResult, TraceStep
from effectledger.policy import Decision, Policy, Preauthorization, RulePolicy, Tier
from effectledger.recovery import RecoveryReport, RecoveryWorker
from effectledger.review_queue import (
    PendingPage,
    PendingProposal,
    ProposalReview,
    QueueOrder,
    ReviewState,
)
from effectledger.serialize import to_dict
from effectledger.service import EffectService
from effectledger.store import Store, open_store

__all__ = [
    "Action",
    "ActionHandle",
    "ActionRegistry",
    "AdmissionConflict",
    "AdmissionDenied",
    "Approval",
    "ApprovalRefused",
    "AsyncEffectLedger",
    "Attempt",
    "AuditEvent",
    "AuditVerificationFailed",
    "Authority",
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
    "DueWork",
    "EffectLedger",
    "EffectLedgerError",
    "EffectOutcome",
    "EffectResult",
    "EffectService",
    "EvidenceRequired",
    "Executor",
    "ExportCursorMismatch",
    "ExportFailed",
    "FunctionDestination",
    "IntegrityError",
    "InvalidInput",
    "InvalidTransition",
    "Ledger",
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
    "RecoveryWorker",
    "ReviewState",
    "RulePolicy",
    "SecretUnavailable",
    "SimulatedReceiver",
    "StorageBusy",
    "StorageError",
    "Store",
    "SubmitMode",
    "SystemClock",
    "TamperedCommand",
    "TamperedOperation",
    "TamperedProposal",
    "Tier",
    "ToolArgumentsRejected",
    "TraceStep",
    "connect",
    "connect_async",
    "ensure_matches",
    "new_id",
    "open_store",
    "to_dict",
]

import logging as _logging

_logging.getLogger("effectledger").addHandler(_logging.NullHandler())
