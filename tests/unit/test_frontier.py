"""The stored right edge of the log reproduces RFC 9162 roots and consistency proofs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectledger.audit.log.frontier import Frontier, consistency_proof, roots_at
from effectledger.audit.log.merkle import EMPTY_ROOT, MerkleTree, leaf_hash
from effectledger.audit.log.proofs import verify_consistency

LEAVES = [leaf_hash(str(index).encode()) for index in range(300)]
TREE = MerkleTree(LEAVES)


def test_every_size_up_to_300_has_the_trees_root_and_frontier() -> None:
    """Appending leaf by leaf gives MerkleTree's root and frontier at every size."""
    frontier = Frontier()
    assert frontier.root() == EMPTY_ROOT
    for size, leaf in enumerate(LEAVES, start=1):
        frontier.append(leaf)
        assert frontier.root() == TREE.root_at(size)
        assert list(frontier.parts) == TREE.frontier(size)


@given(st.lists(st.integers(min_value=-2, max_value=310), max_size=12))
def test_roots_at_many_sizes_equal_the_trees_roots(sizes: list[int]) -> None:
    """The level-by-level roots of any set of sizes equal MerkleTree's, sizes beyond skipped."""
    roots = roots_at(LEAVES, sizes)
    assert roots[0] == EMPTY_ROOT
    assert set(roots) == {0} | {size for size in sizes if 0 < size <= len(LEAVES)}
    for size, root in roots.items():
        assert root == TREE.root_at(size)


@given(st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=300))
def test_consistency_proofs_equal_the_full_trees(a: int, b: int) -> None:
    """A proof built from the old frontier and the new leaves equals the full tree's proof."""
    old_size, new_size = sorted((a, b))
    old = Frontier()
    old.extend(LEAVES[:old_size])
    proof = consistency_proof(old, LEAVES[old_size:new_size])
    assert proof == TREE.consistency_proof(old_size, new_size)
    verify_consistency(old_size, new_size, TREE.root_at(old_size), TREE.root_at(new_size), proof)


@given(st.integers(min_value=0, max_value=300))
def test_the_stored_form_round_trips(size: int) -> None:
    """``to_hex``/``from_hex`` keep the size, parts and root."""
    frontier = Frontier()
    frontier.extend(LEAVES[:size])
    again = Frontier.from_hex(size, frontier.to_hex())
    assert (again.size, again.parts, again.root()) == (size, frontier.parts, frontier.root())


def test_a_malformed_stored_frontier_is_refused() -> None:
    """The wrong number of parts, odd hex or a short hash is a ValueError."""
    with pytest.raises(ValueError, match="parts"):
        Frontier.from_hex(3, "00" * 32)
    with pytest.raises(ValueError, match="whole number"):
        Frontier.from_hex(1, "00" * 31)
    with pytest.raises(ValueError, match="hex"):
        Frontier.from_hex(1, "zz" * 32)
    with pytest.raises(ValueError, match="non-negative"):
        Frontier(-1)
