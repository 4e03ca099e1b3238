"""Offline verification of RFC 9162 Merkle proofs: inclusion (§2.1.3.2) and consistency (§2.1.4.2).

Verification needs no tree, only the values an outside reviewer holds (a leaf hash, a proof, a
signed tree head), so it works offline. Both functions implement the RFC's bit-shifting
algorithms exactly, reject proofs with missing or surplus elements, and raise
:class:`~effectledger.errors.ProofError` for every kind of failure. Proofs are made by
:class:`~effectledger.audit.log.merkle.MerkleTree` and :mod:`effectledger.audit.log.frontier`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from effectledger.audit.log.merkle import EMPTY_ROOT, HASH_SIZE
from effectledger.errors import ProofError

__all__ = ["verify_consistency", "verify_inclusion"]

_sha256 = hashlib.sha256
_NODE_PREFIX: Final = b"\x01"


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    Implements RFC 9162 §2.1.3.2 exactly. Returns ``None`` on success and raises
    :class:`ProofError` otherwise: if ``index >= size``, any hash is not 32 bytes, the path is
    too short or has surplus elements, or the recomputed root differs from ``root``. Note that
    ``size`` must come from the same trusted tree head as ``root``.
    """
    _check_proof_int(index, "index")
    _check_proof_int(size, "size")
    _check_proof_hash(leaf_hash, "leaf hash")
    _check_proof_hash(root, "root")
    path = _check_proof_path(proof)
    if index >= size:
        raise ProofError(f"leaf index {index} is not below tree size {size}")
    fn, sn, result = index, size - 1, leaf_hash
    for element in path:
        if sn == 0:
            raise ProofError("inclusion proof has surplus elements")
        if fn & 1 or fn == sn:
            result = _sha256(_NODE_PREFIX + element + result).digest()
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            result = _sha256(_NODE_PREFIX + result + element).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is too short")
    if result != root:
        raise ProofError("inclusion proof does not lead to the given root")


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree (``new_size``, ``new_root``) extends (``old_size``, ``old_root``).

    Implements RFC 9162 §2.1.4.2 exactly for ``0 < old_size < new_size``. The trivial cases the
    RFC's PROOF leaves empty are handled strictly: if ``old_size == new_size`` the proof must be
    empty and the roots equal; if ``old_size == 0`` the proof must be empty and ``old_root`` must
    be EMPTY_ROOT. Returns ``None`` on success and raises :class:`ProofError` otherwise (sizes out
    of order, hashes that are not 32 bytes, a path that is empty, too short or too long, or
    either recomputed root not matching).
    """
    _check_proof_int(old_size, "old_size")
    _check_proof_int(new_size, "new_size")
    _check_proof_hash(old_root, "old root")
    _check_proof_hash(new_root, "new root")
    path = _check_proof_path(proof)
    if old_size > new_size:
        raise ProofError(f"old_size {old_size} is larger than new_size {new_size}")
    if old_size == new_size:
        if path:
            raise ProofError("consistency proof between equal sizes must be empty")
        if old_root != new_root:
            raise ProofError("trees of equal size have different roots")
        if old_size == 0 and old_root != EMPTY_ROOT:
            raise ProofError("root of the empty tree is not EMPTY_ROOT")
        return
    if old_size == 0:
        if path:
            raise ProofError("consistency proof from the empty tree must be empty")
        if old_root != EMPTY_ROOT:
            raise ProofError("root of the empty tree is not EMPTY_ROOT")
        return
    # RFC 9162 §2.1.4.2, steps 1-7.
    if not path:
        raise ProofError("consistency proof is empty")
    if old_size & (old_size - 1) == 0:
        path = [old_root, *path]
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for element in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof has surplus elements")
        if fn & 1 or fn == sn:
            fr = _sha256(_NODE_PREFIX + element + fr).digest()
            sr = _sha256(_NODE_PREFIX + element + sr).digest()
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _sha256(_NODE_PREFIX + sr + element).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is too short")
    if fr != old_root:
        raise ProofError("consistency proof does not lead to the old root")
    if sr != new_root:
        raise ProofError("consistency proof does not lead to the new root")


def _check_proof_int(value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProofError(f"{what} must be a non-negative int")


def _check_proof_hash(value: object, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise ProofError(f"{what} must be a {HASH_SIZE}-byte hash")


def _check_proof_path(proof: Sequence[bytes]) -> list[bytes]:
    if isinstance(proof, (bytes, bytearray, str)):
        raise ProofError("proof must be a sequence of hashes, not a single string of bytes")
    path = list(proof)
    for index, element in enumerate(path):
        _check_proof_hash(element, f"proof[{index}]")
    return path
