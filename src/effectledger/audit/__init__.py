"""The audit trail's evidence: Merkle logs, signed checkpoints, bundles, proofs and explanations.

See ``docs/evidence.md``. The event format and the per-operation hash chain the ledger writes are
:mod:`effectledger.events` (re-exported here: :func:`verify_chain`, :func:`event_hash`);
:class:`LogSealer` seals events into per-tenant RFC 9162 logs (:mod:`~.merkle`, :mod:`~.proofs`,
:mod:`~.frontier`) with signed C2SP checkpoints (:mod:`~.signers`, :mod:`~.note`, :mod:`~.tlog`,
:mod:`~.keys`), :func:`export_log` and :func:`prove_events` write bundles (:mod:`~.bundle`),
:func:`verify_bundle` checks them offline, and :func:`explain` tells what an operation's events
say happened.

``import effectledger`` does not import this package: only the paths that seal, export, verify or
explain do.
"""

from effectledger.audit.diagnose import Finding
from effectledger.audit.explain import Sentence, explain
from effectledger.audit.export import ExportReport, export_log
from effectledger.audit.receipt import ProofReport, prove_events
from effectledger.audit.sealer import LogSealer, SealReport
from effectledger.audit.verify import VerificationReport, verify_bundle
from effectledger.events.chain import GENESIS_HASH, ChainBreak, event_hash, verify_chain

__all__ = [
    "GENESIS_HASH",
    "ChainBreak",
    "ExportReport",
    "Finding",
    "LogSealer",
    "ProofReport",
    "SealReport",
    "Sentence",
    "VerificationReport",
    "event_hash",
    "explain",
    "export_log",
    "prove_events",
    "verify_bundle",
    "verify_chain",
]
