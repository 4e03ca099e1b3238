"""The audit trail's evidence: per-operation hash chains, Merkle logs, checkpoints and proofs.

See ``docs/evidence.md``: :mod:`~effectledger.events.record` defines an event's canonical bytes,
:class:`LogSealer` seals events into per-tenant RFC 9162 logs with signed checkpoints,
:func:`export_log` and :func:`prove_events` write bundles, :func:`verify_bundle` checks them
offline, and :func:`explain` tells what an operation's events say happened.
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
