"""Authority: immutable proposals, digest-bound single-use approvals, admission that spends them.

The model proposes; trusted code decides. A :class:`Proposal` is the canonical record of one
concrete intended effect, stored immutably with its digest (recomputed on every read). An
:class:`Approval` binds one approver's decision to that digest. :meth:`Authority.admit` is the
one transaction that turns authority into an operation: it rechecks the actor, expiry, resource
version, policy, approval binding and capacity, then inserts the operation, consumes the approval
and holds the units together. A denial writes an ``AdmissionDenied`` event and nothing else.

The proposal digest is ``digest("proposal", ...)`` (see :mod:`effectledger.model.canonical`) over::

    {"action", "arguments", "contract_version", "destination": {"account_id", "endpoint"},
     "expires_us", "operation_id", "policy_version", "pool", "proposer_id", "resource_version",
     "target", "tenant_id", "units"}

Modules: :mod:`~effectledger.authority.proposing` (proposals),
:mod:`~effectledger.authority.decisions` (approvals and denials),
:mod:`~effectledger.authority.running` (admission and its dispatch-time recheck),
:mod:`~effectledger.authority.rechecks` (that recheck, of one operation or of a batch),
:mod:`~effectledger.authority.capacity` (pool limits), behind the :class:`Authority` facade.
"""

from effectledger.authority.admission import Admission
from effectledger.authority.authority import Authority
from effectledger.authority.capacity import CAPACITY_ACTOR, capacity_trail
from effectledger.authority.decisions import MAX_APPROVAL_LIFETIME, MAX_REASON_LENGTH
from effectledger.authority.proposing import MAX_UNITS
from effectledger.model.authority import Approval, CapacityUsage, Correlation, Proposal

__all__ = [
    "CAPACITY_ACTOR",
    "MAX_APPROVAL_LIFETIME",
    "MAX_REASON_LENGTH",
    "MAX_UNITS",
    "Admission",
    "Approval",
    "Authority",
    "CapacityUsage",
    "Correlation",
    "Proposal",
    "capacity_trail",
]
