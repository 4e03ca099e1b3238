"""Bundles: the export format, writing logs and receipts, reading and scanning them, and
verifying them offline (with the second pass that names what was done).

See docs/evidence.md and docs/design.md ("The evidence rooms").
"""
