"""Sealing: the sealer that signs checkpoints, its schedule, its memory outside the database,
and the checkpoints that hand a log on (key rotation, restore from a backup).

See docs/evidence.md and docs/design.md ("The evidence rooms").
"""
