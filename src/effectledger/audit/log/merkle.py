"""RFC 9162 Merkle tree: hashing, the tree and its proofs (verification: :mod:`~.proofs`).

This module is the storage-independent core of the audit log's tamper evidence. It implements the
Merkle Tree Hash of RFC 9162 (Certificate Transparency version 2.0), which is hash-compatible with
RFC 6962, using SHA-256:

* §2.1.1, leaf and node hashing with domain separation::

      MTH({})        = SHA-256()                                  -> EMPTY_ROOT
      leaf hash      = SHA-256(0x00 || entry)                      -> leaf_hash()
      interior node  = SHA-256(0x01 || left || right)              -> node_hash()
      MTH(D[n])      = node(MTH(D[0:k]), MTH(D[k:n]))  for n > 1,
                       k = the largest power of two STRICTLY smaller than n

  The split rule matters: a naive midpoint split gives different roots for most sizes that are
  not powers of two (for example n = 5 or n = 6).
* §2.1.3.1, inclusion proofs ``PATH(m, D[n])``: the sibling hashes from the leaf up to the root,
  deepest first.
* §2.1.4.1, consistency proofs ``PROOF(m, D[n]) = SUBPROOF(m, D[n], true)``.
* §2.1.3.2 and §2.1.4.2, the bit-shifting verification algorithms, are in
  :mod:`effectledger.audit.log.proofs`.

Everything here works on 32-byte leaf hashes; what a leaf *entry* is (its canonical bytes) is up to
the caller, who hashes it with :func:`leaf_hash`. Verification needs no tree at all, only the
values an outside reviewer holds (a leaf hash, a proof, a signed tree head), so it works offline.

:class:`MerkleTree` is an append-only in-memory tree. Besides the leaf hashes it caches the root of
every perfect (complete, power-of-two sized) subtree it contains, so that the root of any prefix
and every proof is assembled from O(log n) cached nodes instead of being recomputed from the
leaves. The cache costs 32 bytes per leaf on top of the leaf list.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MerkleTree",
    "leaf_hash",
    "node_hash",
    "root_hash",
]

HASH_SIZE: Final = 32
"""Size in bytes of every hash in the tree (SHA-256)."""

EMPTY_ROOT: Final[bytes] = hashlib.sha256(b"").digest()
"""MTH({}), the root hash of the empty tree (RFC 9162 §2.1.1)."""

_sha256 = hashlib.sha256
_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"


def leaf_hash(entry: bytes) -> bytes:
    """Return the RFC 9162 leaf hash of ``entry``: SHA-256(0x00 || entry)."""
    return _sha256(_LEAF_PREFIX + bytes(entry)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return the RFC 9162 interior node hash SHA-256(0x01 || left || right).

    Both children must be 32-byte hashes; anything else raises :class:`ValueError`.
    """
    _require_hash(left, "left")
    _require_hash(right, "right")
    return _sha256(_NODE_PREFIX + left + right).digest()


def root_hash(leaf_hashes: Sequence[bytes]) -> bytes:
    """Return MTH(D[n]) for the given leaf hashes (RFC 9162 §2.1.1); EMPTY_ROOT for none.

    The tree is reduced level by level, promoting an unpaired last node unchanged, which yields
    exactly the recursive definition's root (split at the largest power of two below n) in
    n - 1 hash operations and without recursion. Raises :class:`ValueError` if an element is not
    a 32-byte ``bytes`` value.
    """
    level = list(leaf_hashes)
    for index, value in enumerate(level):
        if type(value) is not bytes or len(value) != HASH_SIZE:
            raise ValueError(f"leaf_hashes[{index}] is not a {HASH_SIZE}-byte hash")
    if not level:
        return EMPTY_ROOT
    sha, prefix = _sha256, _NODE_PREFIX
    while len(level) > 1:
        odd = len(level) & 1
        paired = len(level) - odd
        parents = [sha(prefix + level[i] + level[i + 1]).digest() for i in range(0, paired, 2)]
        if odd:
            parents.append(level[-1])
        level = parents
    return level[0]


class MerkleTree:
    """An append-only RFC 9162 Merkle tree over 32-byte leaf hashes.

    The tree keeps every leaf hash (``list[bytes]``) and, for every level ``k >= 1``, the roots of
    the perfect subtrees of ``2**k`` leaves that are complete so far: node ``i`` of level ``k``
    covers leaves ``[i * 2**k, (i + 1) * 2**k)``. Appending costs amortised O(1) hash operations.
    The right edge of the tree (its "frontier", the roots of the perfect subtrees that make up the
    binary decomposition of the size) is read straight from that cache, so :meth:`root`,
    :meth:`root_at`, :meth:`inclusion_proof` and :meth:`consistency_proof` each take O(log n) hash
    operations for any size up to the current one, as every subtree the RFC definitions need is
    either a cached node or a short chain of them.

    Instances are not thread-safe; guard concurrent use with a lock.
    """

    __slots__ = ("_leaves", "_levels")

    def __init__(self, leaf_hashes: Iterable[bytes] = ()) -> None:
        """Create a tree holding ``leaf_hashes`` (in order); an empty tree by default."""
        self._leaves: list[bytes] = []
        # _levels[k - 1] holds level k >= 1 as concatenated 32-byte hashes (compact storage).
        self._levels: list[bytearray] = []
        self.extend(leaf_hashes)

    def __len__(self) -> int:
        """Return the number of leaves (the tree size)."""
        return len(self._leaves)

    def __repr__(self) -> str:
        """Describe the tree by its size and current root."""
        return f"MerkleTree(size={self.size}, root={self.root().hex()})"

    @property
    def size(self) -> int:
        """The number of leaves appended so far."""
        return len(self._leaves)

    def leaf(self, index: int) -> bytes:
        """Return the leaf hash at ``index`` (0-based); :class:`IndexError` if out of range."""
        _require_int(index, "index")
        if not 0 <= index < len(self._leaves):
            raise IndexError(f"leaf index {index} out of range for tree of size {self.size}")
        return self._leaves[index]

    def append(self, leaf_hash: bytes) -> int:
        """Append one 32-byte leaf hash and return its index."""
        _require_hash(leaf_hash, "leaf_hash")
        self._leaves.append(leaf_hash)
        self._grow()
        return len(self._leaves) - 1

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append several leaf hashes in order; all or nothing if one is not a 32-byte hash."""
        batch = list(leaf_hashes)
        for index, value in enumerate(batch):
            _require_hash(value, f"leaf_hashes[{index}]")
        self._leaves.extend(batch)
        self._grow()

    def root(self) -> bytes:
        """Return the root hash of the tree at its current size (EMPTY_ROOT when empty)."""
        return self.root_at(len(self._leaves))

    def root_at(self, size: int) -> bytes:
        """Return MTH(D[0:size]), the root the tree had when it held ``size`` leaves."""
        self._require_size(size, "size")
        if size == 0:
            return EMPTY_ROOT
        return self._range_root(0, size)

    def frontier(self, size: int | None = None) -> list[bytes]:
        """Return the roots of the perfect subtrees that make up the tree of ``size`` leaves.

        They are listed left to right, largest first: one per set bit of ``size``. Folding them
        from the right with :func:`node_hash` gives the root. Defaults to the current size.
        """
        size = self.size if size is None else size
        self._require_size(size, "size")
        return self._perfect_parts(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Return PATH(index, D[0:size]) per RFC 9162 §2.1.3.1 (deepest sibling first).

        ``size`` defaults to the current size; ``0 <= index < size`` is required.
        """
        size = self.size if size is None else size
        self._require_size(size, "size")
        _require_int(index, "index")
        if not 0 <= index < size:
            raise ValueError(f"leaf index {index} is not below tree size {size}")
        path: list[bytes] = []
        start, count = 0, size
        while count > 1:
            split = _split_point(count)
            if index < start + split:
                path.append(self._range_root(start + split, count - split))
                count = split
            else:
                path.append(self._range_root(start, split))
                start += split
                count -= split
        path.reverse()
        return path

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """Return PROOF(old_size, D[0:new_size]) per RFC 9162 §2.1.4.1.

        The proof is empty when ``old_size`` is 0 or equal to ``new_size`` (there is nothing to
        prove). ``new_size`` defaults to the current size; ``0 <= old_size <= new_size``.
        """
        new_size = self.size if new_size is None else new_size
        self._require_size(new_size, "new_size")
        _require_int(old_size, "old_size")
        if not 0 <= old_size <= new_size:
            raise ValueError(f"old_size {old_size} is not within 0..{new_size}")
        if old_size in (0, new_size):
            return []
        # Iterative SUBPROOF(m, D[n], b): collect the outer siblings first, then reverse.
        proof: list[bytes] = []
        start, m, n, old_root_is_a_node = 0, old_size, new_size, True
        while m != n:
            split = _split_point(n)
            if m <= split:
                proof.append(self._range_root(start + split, n - split))
                n = split
            else:
                proof.append(self._range_root(start, split))
                start += split
                m -= split
                n -= split
                old_root_is_a_node = False
        if not old_root_is_a_node:
            proof.append(self._range_root(start, m))
        proof.reverse()
        return proof

    # -- internals -------------------------------------------------------------------------

    def _require_size(self, size: int, what: str) -> None:
        _require_int(size, what)
        if not 0 <= size <= len(self._leaves):
            raise ValueError(f"{what} {size} is not within 0..{len(self._leaves)}")

    def _grow(self) -> None:
        """Compute the perfect-subtree roots that the latest appends completed."""
        sha, prefix = _sha256, _NODE_PREFIX
        below = len(self._leaves)
        depth = 0
        while below >= 2:
            if depth == len(self._levels):
                self._levels.append(bytearray())
            level = self._levels[depth]
            have, want = len(level) // HASH_SIZE, below // 2
            if have == want:
                break  # nothing new here means nothing new above either
            if depth == 0:
                leaves = self._leaves
                level += b"".join(
                    [
                        sha(prefix + leaves[2 * j] + leaves[2 * j + 1]).digest()
                        for j in range(have, want)
                    ]
                )
            else:
                children = self._levels[depth - 1]
                level += b"".join(
                    [
                        sha(prefix + children[64 * j : 64 * j + 64]).digest()
                        for j in range(have, want)
                    ]
                )
            below = want
            depth += 1

    def _node(self, level: int, index: int) -> bytes:
        """Return the cached root of perfect subtree ``index`` on ``level`` (leaves are level 0)."""
        if level == 0:
            return self._leaves[index]
        offset = index * HASH_SIZE
        return bytes(self._levels[level - 1][offset : offset + HASH_SIZE])

    def _perfect_parts(self, start: int, count: int) -> list[bytes]:
        """Return the cached perfect-subtree roots covering leaves [start, start + count).

        ``start`` must be a multiple of the largest part (true for every subtree that the RFC
        definitions visit), so every part is a cached node.
        """
        parts: list[bytes] = []
        position = start
        for level in range(count.bit_length() - 1, -1, -1):
            if count >> level & 1:
                parts.append(self._node(level, position >> level))
                position += 1 << level
        return parts

    def _range_root(self, start: int, count: int) -> bytes:
        """Return MTH(D[start:start + count]) from at most log2(count) cached nodes."""
        parts = self._perfect_parts(start, count)
        result = parts[-1]
        for part in reversed(parts[:-1]):
            result = _sha256(_NODE_PREFIX + part + result).digest()
        return result


# -- helpers -------------------------------------------------------------------------------


def _split_point(count: int) -> int:
    """Return the largest power of two strictly smaller than ``count`` (``count >= 2``)."""
    return 1 << ((count - 1).bit_length() - 1)


def _require_int(value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")


def _require_hash(value: object, what: str) -> None:
    if type(value) is not bytes or len(value) != HASH_SIZE:
        raise ValueError(f"{what} must be a {HASH_SIZE}-byte hash (bytes)")
