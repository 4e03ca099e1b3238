"""The ledger: every state transition of an operation and its audit event, and nowhere else.

:class:`Ledger` is the public face: each of its methods that writes is one transaction. Behind
it, one module per group of steps, each a set of plain functions over a transaction:

- :mod:`~effectledger.ledger.trail`: ids, locks, and the one way an event joins a trail
  (:func:`write_transition`, :func:`append_event`);
- :mod:`~effectledger.ledger.admission`: validating and inserting an admitted operation;
- :mod:`~effectledger.ledger.reads`: operations, attempts and trails, read without writing;
- :mod:`~effectledger.ledger.claims`: a READY operation becomes one attempt, or is released;
- :mod:`~effectledger.ledger.recording`: what a destination said, recorded;
- :mod:`~effectledger.ledger.reconciliation`: the recovery queue, escalation and retry;
- :mod:`~effectledger.ledger.corrections`: audit corrections, appended.

:func:`insert_operation`, :func:`append_event` and :func:`claim_in` run inside a caller's own
transaction (an admission on a proposal, an approval, a pool's limit).
"""

from effectledger.ledger.admission import (
    TrailHead,
    draft_checked,
    draft_operation,
    insert_operation,
    insert_operation_row,
    trail_head,
)
from effectledger.ledger.claims import claim_admitted, claim_in
from effectledger.ledger.replays import replayed_result
from effectledger.ledger.settings import (
    AUDITOR_ROLE,
    DISPATCH_WORKER,
    RECOVERY_WORKER,
    DueWork,
    LedgerSettings,
)
from effectledger.ledger.trail import (
    RESERVED_PREFIXES,
    append_event,
    lock_scope,
    lock_trail,
    new_id,
    validate_operation_id,
)
from effectledger.ledger.transactions import Ledger
from effectledger.ledger.validation import MAX_REFERENCE_LENGTH

__all__ = [
    "AUDITOR_ROLE",
    "DISPATCH_WORKER",
    "MAX_REFERENCE_LENGTH",
    "RECOVERY_WORKER",
    "RESERVED_PREFIXES",
    "DueWork",
    "Ledger",
    "LedgerSettings",
    "TrailHead",
    "append_event",
    "claim_admitted",
    "claim_in",
    "draft_checked",
    "draft_operation",
    "insert_operation",
    "insert_operation_row",
    "lock_scope",
    "lock_trail",
    "new_id",
    "replayed_result",
    "trail_head",
    "validate_operation_id",
]
