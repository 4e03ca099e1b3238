"""The log: RFC 9162 Merkle trees and proofs, the frontier, C2SP signed notes and checkpoints,
origins and what checkpoint extension lines state, and the stored log head.

See docs/evidence.md and docs/design.md ("The evidence rooms").
"""
