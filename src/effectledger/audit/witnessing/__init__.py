"""Witnessing: C2SP cosignatures, the witness and its HTTP front, the sealer's submissions,
and the latest checkpoint read with its cosignatures.

See docs/evidence.md and docs/design.md ("The evidence rooms").
"""
