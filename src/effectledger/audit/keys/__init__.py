"""Log keys: Ed25519 signer and verifier keys (signed-note key strings) and the key files
they are read from. The floor every other room of the evidence stands on.

See docs/evidence.md and docs/design.md ("The evidence rooms").
"""
