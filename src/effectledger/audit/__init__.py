"""The audit trail's evidence: Merkle logs, signed checkpoints, bundles, proofs and explanations.

See ``docs/evidence.md``. The event format and the per-operation hash chain the ledger writes are
:mod:`effectledger.events` (re-exported here: :func:`verify_chain`, :func:`event_hash`). The
evidence has rooms by concern, each importing only the ones below it (docs/design.md, "The
evidence rooms"):

* :mod:`~.keys` and :mod:`~.findings` — signer and verifier keys, key files; what a check finds;
* :mod:`~.log` — RFC 9162 Merkle trees and proofs, the frontier, C2SP signed notes and
  checkpoints, origins, rotations and restores as checkpoints state them, the stored log head;
* :mod:`~.witnessing` — cosignatures, the witness, the sealer's submissions to witnesses;
* :mod:`~.sealing` — :class:`LogSealer`, its schedule and memory, key rotation, restores;
* :mod:`~.bundles` — :func:`export_log` and :func:`prove_events` write bundles,
  :func:`verify_bundle` checks them offline;
* :mod:`~.explain` tells what an operation's events say happened; :mod:`~.moving` moves a whole
  ledger to another store and checks its logs on the way.

``import effectledger`` does not import this package: only the paths that seal, export, verify or
explain do.
"""

from effectledger.audit.bundles.export import ExportReport, export_log
from effectledger.audit.bundles.receipt import ProofReport, prove_events
from effectledger.audit.bundles.verify import VerificationReport, verify_bundle
from effectledger.audit.explain import Sentence, explain
from effectledger.audit.findings import Finding
from effectledger.audit.sealing.sealer import LogSealer, SealReport
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
