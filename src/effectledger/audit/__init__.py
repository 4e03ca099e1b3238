"""The audit trail's evidence: per-operation hash chains, Merkle logs, checkpoints and proofs."""

from effectledger.audit.chain import GENESIS_HASH, ChainBreak, event_hash, verify_chain

__all__ = ["GENESIS_HASH", "ChainBreak", "event_hash", "verify_chain"]
