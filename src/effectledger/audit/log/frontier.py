"""The right edge of an RFC 9162 tree: extend a log and prove consistency without its leaves.

A tree of ``n`` leaves is the concatenation of perfect subtrees, one per set bit of ``n``, largest
first; their roots are the tree's **frontier**. Folding the frontier from the right with
:func:`~effectledger.audit.log.merkle.node_hash` gives the root. Appending a leaf is binary
addition: the new leaf joins the frontier and merges with its left neighbour once per trailing zero
of the new size.

The sealer keeps only this frontier (at most 64 hashes) in the database, so sealing a batch costs
O(batch + log n) hashes whatever the log's size. Every node a consistency proof from the old size
needs on the old side is a frontier root, and every other node lies among the new leaves, so
:func:`consistency_proof` builds ``PROOF(m, n)`` from the old frontier and the batch alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from effectledger.audit.log.merkle import EMPTY_ROOT, HASH_SIZE, root_hash

__all__ = ["Frontier", "consistency_proof", "roots_at"]

_sha256 = hashlib.sha256
_NODE = b"\x01"


class Frontier:
    """The frontier of an append-only Merkle tree: its size and perfect-subtree roots."""

    __slots__ = ("_parts", "_size")

    def __init__(self, size: int = 0, parts: Sequence[bytes] = ()) -> None:
        """Create the frontier of a tree of ``size`` leaves from its ``parts`` (largest first).

        Raises :class:`ValueError` unless there is one 32-byte part per set bit of ``size``.
        """
        if not isinstance(size, int) or size < 0:
            raise ValueError("size must be a non-negative int")
        if len(parts) != size.bit_count():
            raise ValueError(f"a tree of {size} leaves has {size.bit_count()} frontier parts")
        for part in parts:
            if type(part) is not bytes or len(part) != HASH_SIZE:
                raise ValueError(f"a frontier part is a {HASH_SIZE}-byte hash")
        self._size = size
        self._parts = list(parts)

    @classmethod
    def from_hex(cls, size: int, text: str) -> Frontier:
        """Parse the stored form: the parts' hex concatenated, largest first."""
        width = 2 * HASH_SIZE
        if len(text) % width:
            raise ValueError("a stored frontier is a whole number of hex hashes")
        try:
            parts = [bytes.fromhex(text[i : i + width]) for i in range(0, len(text), width)]
        except ValueError as exc:
            raise ValueError("a stored frontier is hex") from exc
        return cls(size, parts)

    def to_hex(self) -> str:
        """The stored form of :meth:`from_hex`."""
        return b"".join(self._parts).hex()

    @property
    def size(self) -> int:
        """The number of leaves in the tree."""
        return self._size

    @property
    def parts(self) -> tuple[bytes, ...]:
        """The perfect-subtree roots, largest (leftmost) first."""
        return tuple(self._parts)

    def copy(self) -> Frontier:
        """An independent copy."""
        return Frontier(self._size, self._parts)

    def append(self, leaf: bytes) -> None:
        """Add one 32-byte leaf hash."""
        parts = self._parts
        parts.append(leaf)
        self._size += 1
        carry = self._size
        while not carry & 1:
            right = parts.pop()
            parts[-1] = _sha256(_NODE + parts[-1] + right).digest()
            carry >>= 1

    def extend(self, leaves: Iterable[bytes]) -> None:
        """Add several leaf hashes in order."""
        for leaf in leaves:
            self.append(leaf)

    def root(self) -> bytes:
        """MTH of the tree (EMPTY_ROOT when it is empty)."""
        if not self._parts:
            return EMPTY_ROOT
        result = self._parts[-1]
        for part in reversed(self._parts[:-1]):
            result = _sha256(_NODE + part + result).digest()
        return result


def roots_at(leaves: Sequence[bytes], sizes: Iterable[int]) -> dict[int, bytes]:
    """MTH of the first ``s`` leaves for each of ``sizes`` within ``len(leaves)`` (and 0).

    The tree is hashed level by level (one list comprehension per level, about one SHA-256 per
    leaf in all), keeping only the perfect-subtree roots the sizes' frontiers need; each root is
    then the fold of its frontier. Equal to a :class:`Frontier` extended to each size.
    """
    wanted = sorted({size for size in sizes if 0 < size <= len(leaves)})
    roots: dict[int, bytes] = {0: EMPTY_ROOT}
    if not wanted:
        return roots
    needed: dict[int, set[int]] = {}
    for size in wanted:
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                needed.setdefault(level, set()).add(start >> level)
                start += 1 << level
    nodes: dict[tuple[int, int], bytes] = {}
    row: Sequence[bytes] = leaves[: wanted[-1]]
    top = max(needed)
    sha256 = _sha256
    for level in range(top + 1):
        for index in needed.get(level, ()):
            nodes[(level, index)] = row[index]
        if level < top:
            pairs = zip(row[::2], row[1::2], strict=False)  # an odd last node waits a level
            row = [sha256(_NODE + left + right).digest() for left, right in pairs]
    for size in wanted:
        parts: list[bytes] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                parts.append(nodes[(level, start >> level)])
                start += 1 << level
        result = parts[-1]
        for part in reversed(parts[:-1]):
            result = sha256(_NODE + part + result).digest()
        roots[size] = result
    return roots


def _split(count: int) -> int:
    return 1 << ((count - 1).bit_length() - 1)


def consistency_proof(old: Frontier, new_leaves: Sequence[bytes]) -> list[bytes]:
    """``PROOF(m, n)`` of RFC 9162 §2.1.4.1 for the tree ``old`` extended by ``new_leaves``.

    ``m`` is ``old.size`` and ``n = m + len(new_leaves)``; the proof is empty when either is
    trivial. Equal to :meth:`MerkleTree.consistency_proof` over the full leaves.
    """
    m = old.size
    n = m + len(new_leaves)
    if m in (0, n):
        return []
    known: dict[tuple[int, int], bytes] = {}
    start = 0
    parts = iter(old.parts)
    for level in range(m.bit_length() - 1, -1, -1):
        if m >> level & 1:
            known[(start, 1 << level)] = next(parts)
            start += 1 << level

    def node(first: int, count: int) -> bytes:
        if first >= m:
            return root_hash(new_leaves[first - m : first - m + count])
        found = known.get((first, count))
        if found is not None:
            return found
        if first + count <= m:  # pragma: no cover - PROOF never needs such a node
            raise ValueError(f"the frontier of {m} does not hold node [{first}, {first + count})")
        half = _split(count)
        return _sha256(_NODE + node(first, half) + node(first + half, count - half)).digest()

    proof: list[bytes] = []
    first, rest_old, rest_new, old_is_node = 0, m, n, True
    while rest_old != rest_new:
        half = _split(rest_new)
        if rest_old <= half:
            proof.append(node(first + half, rest_new - half))
            rest_new = half
        else:
            proof.append(node(first, half))
            first += half
            rest_old -= half
            rest_new -= half
            old_is_node = False
    if not old_is_node:
        proof.append(node(first, rest_old))
    proof.reverse()
    return proof
