"""effectledger: authorized, exactly-once-where-possible, auditable effects for AI agent tools.

The agent proposes; trusted code binds approval to the exact action; the ledger commits
responsibility before anything leaves the process; the executor performs the effect once; the
recovery worker asks the destination when a reply is lost. See the README for a tour.
"""

from effectledger.clock import Clock, ManualClock, SystemClock
from effectledger.destinations import Destination, SubmissionOutcomeUnknown, ensure_matches
from effectledger.destinations.simulated import LookupMode, SimulatedReceiver, SubmitMode
from effectledger.errors import (
    AdmissionConflict,
    CommitUncertain,
    ConcurrentModification,
    Conflict,
    ConstraintViolation,
    DestinationMismatch,
    EffectLedgerError,
    EvidenceRequired,
    IntegrityError,
    InvalidInput,
    InvalidTransition,
    MissingAdmission,
    NotFound,
    StorageBusy,
    StorageError,
    TamperedCommand,
    ToolArgumentsRejected,
)
from effectledger.executor import Executor
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
from effectledger.recovery import RecoveryReport, RecoveryWorker
from effectledger.store import Store, open_store

__all__ = [
    "AdmissionConflict",
    "Attempt",
    "AuditEvent",
    "Clock",
    "Command",
    "CommitUncertain",
    "ConcurrentModification",
    "Conflict",
    "ConstraintViolation",
    "Context",
    "Destination",
    "DestinationMismatch",
    "DestinationRef",
    "DispatchResult",
    "DueWork",
    "EffectLedgerError",
    "EvidenceRequired",
    "Executor",
    "IntegrityError",
    "InvalidInput",
    "InvalidTransition",
    "Ledger",
    "LedgerSettings",
    "LookupMode",
    "ManualClock",
    "MissingAdmission",
    "NotFound",
    "Observation",
    "Operation",
    "OperationState",
    "Outcome",
    "RecoveryReport",
    "RecoveryWorker",
    "SimulatedReceiver",
    "StorageBusy",
    "StorageError",
    "Store",
    "SubmissionOutcomeUnknown",
    "SubmitMode",
    "SystemClock",
    "TamperedCommand",
    "ToolArgumentsRejected",
    "ensure_matches",
    "new_id",
    "open_store",
]

import logging as _logging

_logging.getLogger("effectledger").addHandler(_logging.NullHandler())
