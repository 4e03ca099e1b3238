"""Tests for the RFC 9162 Merkle tree and its proofs in effectledger.audit.log.merkle and .proofs.

Known-answer vectors come from the Certificate Transparency reference test data as published in
github.com/transparency-dev/merkle (testonly/constants.go, testonly/reference_test.go and
proof/verify_test.go), which carry over the constants of the original C++
certificate-transparency merkle_tree_test.cc. Property tests cross-check every generated proof
against a deliberately naive recursive implementation written below directly from the RFC 9162
§2.1 definitions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectledger.audit.log.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    MerkleTree,
    leaf_hash,
    node_hash,
    root_hash,
)
from effectledger.audit.log.proofs import verify_consistency, verify_inclusion
from effectledger.errors import ProofError

# --- Known-answer data (transparency-dev/merkle testonly + proof/verify_test.go) ------------------

LEAF_INPUTS = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
LEAF_HASHES = [leaf_hash(entry) for entry in LEAF_INPUTS]


def h(hex_digest: str) -> bytes:
    """Decode a 32-byte hex digest."""
    value = bytes.fromhex(hex_digest)
    assert len(value) == HASH_SIZE
    return value


# Roots indexed by tree size, 0..8.
ROOTS = [
    h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]

# NODE_HASHES[level][i]: root of the perfect subtree of 2**level leaves starting at i * 2**level.
NODE_HASHES = [
    [
        h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
        h("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        h("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
        h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        h("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    ],
    [
        h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    ],
    [
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    [h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")],
]
N = NODE_HASHES

# testonly.CompactTrees(): the right-edge perfect subtrees of each tree size 0..8.
FRONTIERS = [
    [],
    [N[0][0]],
    [N[1][0]],
    [N[1][0], N[0][2]],
    [N[2][0]],
    [N[2][0], N[0][4]],
    [N[2][0], N[1][2]],
    [N[2][0], N[1][2], N[0][6]],
    [N[3][0]],
]

# (index, size, proof); the Go tables use 1-based leaf numbers, converted to 0-based here.
INCLUSION_VECTORS = [
    (0, 1, []),
    (0, 2, [N[0][1]]),
    (1, 2, [N[0][0]]),
    (2, 3, [N[1][0]]),
    (1, 5, [N[0][0], N[1][1], N[0][4]]),
    (0, 8, [N[0][1], N[1][1], N[2][1]]),
    (5, 8, [N[0][4], N[1][3], N[2][0]]),
]

# (old_size, new_size, proof)
CONSISTENCY_VECTORS = [
    (1, 1, []),
    (1, 8, [N[0][1], N[1][1], N[2][1]]),
    (6, 8, [N[1][2], N[1][3], N[2][0]]),
    (2, 5, [N[1][1], N[0][4]]),
    (6, 7, [N[1][2], N[0][6], N[2][0]]),
]

SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")


# --- A naive reference written straight from RFC 9162 §2.1 (recursive, slow on purpose) ---------


def _k(n: int) -> int:
    """Largest power of two strictly smaller than n (n >= 2), by search rather than bit tricks."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(d: Sequence[bytes]) -> bytes:
    """MTH(D[n]) over leaf hashes d, recursively."""
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return d[0]
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_path(m: int, d: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]) over leaf hashes d, recursively."""
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: Sequence[bytes], b: bool) -> list[bytes]:
    """SUBPROOF(m, D[n], b) over leaf hashes d, recursively."""
    n = len(d)
    if m == n:
        return [] if b else [ref_mth(d)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, d[:k], b), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


def naive_midpoint_mth(d: Sequence[bytes]) -> bytes:
    """A WRONG tree hash that splits at the midpoint instead of a power of two (the pitfall)."""
    if len(d) == 1:
        return d[0]
    mid = (len(d) + 1) // 2
    return hashlib.sha256(
        b"\x01" + naive_midpoint_mth(d[:mid]) + naive_midpoint_mth(d[mid:])
    ).digest()


# A shared tree of synthetic leaves for the property tests.
MAX_SIZE = 300
BIG_LEAVES = [leaf_hash(b"entry-%d" % i) for i in range(MAX_SIZE)]
BIG_TREE = MerkleTree(BIG_LEAVES)


def flip(value: bytes, position: int, mask: int) -> bytes:
    """Return value with byte position XORed by a non-zero mask."""
    changed = bytearray(value)
    changed[position % len(value)] ^= mask
    return bytes(changed)


# --- Hashing primitives -------------------------------------------------------------------------


def test_empty_root_is_sha256_of_nothing() -> None:
    """The empty tree's root is SHA-256 of the empty string, as RFC 9162 §2.1.1 defines."""
    assert ROOTS[0] == EMPTY_ROOT
    assert root_hash([]) == EMPTY_ROOT
    assert MerkleTree().root() == EMPTY_ROOT


def test_leaf_and_node_hashes_match_known_values() -> None:
    """Leaf hashes use the 0x00 prefix and node hashes the 0x01 prefix, matching the CT data."""
    assert NODE_HASHES[0] == LEAF_HASHES
    assert leaf_hash(b"") == hashlib.sha256(b"\x00").digest()
    assert node_hash(LEAF_HASHES[0], LEAF_HASHES[1]) == NODE_HASHES[1][0]
    assert node_hash(NODE_HASHES[1][0], NODE_HASHES[1][1]) == NODE_HASHES[2][0]


def test_node_hash_rejects_values_that_are_not_hashes() -> None:
    """node_hash refuses children that are not 32-byte hashes."""
    with pytest.raises(ValueError, match="32-byte"):
        node_hash(b"short", SOME_HASH)
    with pytest.raises(ValueError, match="32-byte"):
        node_hash(SOME_HASH, SOME_HASH + b"x")


@pytest.mark.parametrize("size", range(9))
def test_known_roots_for_every_size(size: int) -> None:
    """root_hash, root_at and an incrementally built tree all give the known root per size."""
    assert root_hash(LEAF_HASHES[:size]) == ROOTS[size]
    assert MerkleTree(LEAF_HASHES).root_at(size) == ROOTS[size]
    tree = MerkleTree()
    for value in LEAF_HASHES[:size]:
        tree.append(value)
    assert tree.root() == ROOTS[size]
    assert ref_mth(LEAF_HASHES[:size]) == ROOTS[size]


@pytest.mark.parametrize("size", range(9))
def test_frontier_matches_known_compact_ranges(size: int) -> None:
    """The frontier is the list of right-edge perfect subtree roots from the reference data."""
    tree = MerkleTree(LEAF_HASHES)
    assert tree.frontier(size) == FRONTIERS[size]
    assert MerkleTree(LEAF_HASHES[:size]).frontier() == FRONTIERS[size]


def test_split_is_largest_power_of_two_strictly_below_n() -> None:
    """The root uses the RFC split (k=4 for n=5..8); a naive midpoint split gives other roots."""
    for size in (5, 6):  # midpoint would put 3 leaves on the left instead of 4
        assert root_hash(LEAF_HASHES[:size]) == ROOTS[size]
        assert naive_midpoint_mth(LEAF_HASHES[:size]) != ROOTS[size]
    # For n = 8 "strictly smaller" gives k = 4 (two halves), never k = 8.
    assert root_hash(LEAF_HASHES) == node_hash(ROOTS[4], root_hash(LEAF_HASHES[4:8]))
    assert naive_midpoint_mth(LEAF_HASHES) == ROOTS[8]  # powers of two agree, hiding the bug


def test_root_hash_rejects_malformed_leaves() -> None:
    """root_hash refuses leaf values that are not 32-byte bytes objects."""
    with pytest.raises(ValueError, match=r"leaf_hashes\[1\]"):
        root_hash([SOME_HASH, b"too short"])
    with pytest.raises(ValueError, match=r"leaf_hashes\[0\]"):
        root_hash([bytearray(SOME_HASH)])  # type: ignore[list-item]


# --- Known proofs -------------------------------------------------------------------------------


@pytest.mark.parametrize(("index", "size", "expected"), INCLUSION_VECTORS)
def test_known_inclusion_proofs(index: int, size: int, expected: list[bytes]) -> None:
    """Generated inclusion proofs equal the reference vectors and verify against known roots."""
    tree = MerkleTree(LEAF_HASHES)
    proof = tree.inclusion_proof(index, size)
    assert proof == expected
    assert ref_path(index, LEAF_HASHES[:size]) == expected
    verify_inclusion(LEAF_HASHES[index], index, size, proof, ROOTS[size])


@pytest.mark.parametrize(("old_size", "new_size", "expected"), CONSISTENCY_VECTORS)
def test_known_consistency_proofs(old_size: int, new_size: int, expected: list[bytes]) -> None:
    """Generated consistency proofs equal the reference vectors and verify against known roots."""
    tree = MerkleTree(LEAF_HASHES)
    proof = tree.consistency_proof(old_size, new_size)
    assert proof == expected
    assert ref_subproof(old_size, LEAF_HASHES[:new_size], True) == expected
    verify_consistency(old_size, new_size, ROOTS[old_size], ROOTS[new_size], proof)


@pytest.mark.parametrize(("index", "size", "proof"), [v for v in INCLUSION_VECTORS if v[2]])
def test_known_inclusion_proofs_reject_corruptions(
    index: int, size: int, proof: list[bytes]
) -> None:
    """Every corruption probe of the reference suite (index, size, leaf, root, path) fails."""
    leaf, root = LEAF_HASHES[index], ROOTS[size]
    probes: list[tuple[int, int, bytes, list[bytes], bytes]] = [
        (index + 1, size, leaf, proof, root),
        (index ^ 2, size, leaf, proof, root),
        (index, size * 2, leaf, proof, root),
        (index, size // 2, leaf, proof, root),
        (index, size, SOME_HASH, proof, root),
        (index, size, leaf, proof, EMPTY_ROOT),
        (index, size, leaf, proof, SOME_HASH),
        (index, size, leaf, [*proof, root], root),
        (index, size, leaf, [root, *proof], root),
        (index, size, leaf, proof[:-1], root),
        (index, size, leaf, [proof[0], SOME_HASH, *proof[1:]], root),
    ]
    if index > 0:
        probes.append((index - 1, size, leaf, proof, root))
    probes.extend(
        (index, size, leaf, [*proof[:i], flip(proof[i], 0, 8), *proof[i + 1 :]], root)
        for i in range(len(proof))
    )
    for probe_index, probe_size, probe_leaf, probe_proof, probe_root in probes:
        with pytest.raises(ProofError):
            verify_inclusion(probe_leaf, probe_index, probe_size, probe_proof, probe_root)


@pytest.mark.parametrize(
    ("old_size", "new_size", "proof"), [v for v in CONSISTENCY_VECTORS if v[2]]
)
def test_known_consistency_proofs_reject_corruptions(
    old_size: int, new_size: int, proof: list[bytes]
) -> None:
    """Every corruption probe of the reference suite (sizes, roots, path) fails."""
    old_root, new_root = ROOTS[old_size], ROOTS[new_size]
    probes: list[tuple[int, int, bytes, bytes, list[bytes]]] = [
        (old_size - 1, new_size, old_root, new_root, proof),
        (old_size + 1, new_size, old_root, new_root, proof),
        (old_size ^ 2, new_size, old_root, new_root, proof),
        (old_size, new_size * 2, old_root, new_root, proof),
        (old_size, new_size // 2, old_root, new_root, proof),
        (old_size, new_size, SOME_HASH, new_root, proof),
        (old_size, new_size, old_root, SOME_HASH, proof),
        (old_size, new_size, new_root, old_root, proof),
        (old_size, new_size, old_root, new_root, []),
        (old_size, new_size, old_root, new_root, [*proof, old_root]),
        (old_size, new_size, old_root, new_root, [*proof, new_root]),
        (old_size, new_size, old_root, new_root, [old_root, *proof]),
        (old_size, new_size, old_root, new_root, [new_root, *proof]),
        (old_size, new_size, old_root, new_root, [proof[0], *proof]),
        (old_size, new_size, old_root, new_root, proof[:-1]),
    ]
    probes.extend(
        (
            old_size,
            new_size,
            old_root,
            new_root,
            [*proof[:i], flip(proof[i], 0, 16), *proof[i + 1 :]],
        )
        for i in range(len(proof))
    )
    for probe in probes:
        with pytest.raises(ProofError):
            verify_consistency(*probe)


# --- Edge cases of the verifiers ----------------------------------------------------------------


def test_verify_inclusion_rejects_index_at_or_beyond_size() -> None:
    """An index that is not below the tree size never verifies, even with an empty proof."""
    for index, size in ((0, 0), (1, 0), (1, 1), (2, 1), (8, 8)):
        with pytest.raises(ProofError, match="not below"):
            verify_inclusion(LEAF_HASHES[0], index, size, [], ROOTS[1])


def test_single_leaf_tree_inclusion() -> None:
    """In a one-leaf tree the root is the leaf hash and the proof must be empty."""
    verify_inclusion(ROOTS[1], 0, 1, [], ROOTS[1])
    with pytest.raises(ProofError):
        verify_inclusion(ROOTS[1], 0, 1, [SOME_HASH], ROOTS[1])
    with pytest.raises(ProofError):
        verify_inclusion(SOME_HASH, 0, 1, [], ROOTS[1])


@pytest.mark.parametrize(
    ("old_size", "new_size", "old_root", "new_root", "proof", "ok"),
    [
        (0, 0, EMPTY_ROOT, EMPTY_ROOT, [], True),
        (0, 0, SOME_HASH, SOME_HASH, [], False),  # size 0 must have the empty root
        (0, 0, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),
        (0, 5, EMPTY_ROOT, ROOTS[5], [], True),
        (0, 5, SOME_HASH, ROOTS[5], [], False),
        (0, 5, EMPTY_ROOT, ROOTS[5], [EMPTY_ROOT], False),
        (1, 1, ROOTS[1], ROOTS[1], [], True),
        (1, 1, ROOTS[1], ROOTS[2], [], False),
        (1, 1, ROOTS[1], ROOTS[1], [EMPTY_ROOT], False),
        (1, 0, ROOTS[1], EMPTY_ROOT, [], False),
        (2, 1, ROOTS[2], ROOTS[1], [], False),
        (1, 2, ROOTS[1], ROOTS[2], [], False),
        (1, 2, ROOTS[1], ROOTS[2], [N[0][1]], True),
    ],
)
def test_trivial_consistency_cases(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: list[bytes], ok: bool
) -> None:
    """Empty-tree, equal-size and backwards cases are accepted only with an empty proof and
    matching roots."""
    if ok:
        verify_consistency(old_size, new_size, old_root, new_root, proof)
    else:
        with pytest.raises(ProofError):
            verify_consistency(old_size, new_size, old_root, new_root, proof)


def test_trailing_extra_proof_elements_are_rejected() -> None:
    """Appending any extra hash to a valid proof makes it fail: the path must be used up."""
    tree = BIG_TREE
    for size in (1, 2, 3, 5, 8, 13, 64, 100, 255, 256, 257):
        root = tree.root_at(size)
        for index in {0, size // 2, size - 1}:
            proof = tree.inclusion_proof(index, size)
            for extra in (SOME_HASH, root, BIG_LEAVES[index]):
                with pytest.raises(ProofError, match="surplus"):
                    verify_inclusion(BIG_LEAVES[index], index, size, [*proof, extra], root)
        for old_size in {1, size // 2, size - 1} - {0, size}:
            proof = tree.consistency_proof(old_size, size)
            old_root = tree.root_at(old_size)
            for extra in (SOME_HASH, root, old_root):
                with pytest.raises(ProofError, match="surplus"):
                    verify_consistency(old_size, size, old_root, root, [*proof, extra])


def test_verifiers_reject_malformed_arguments() -> None:
    """Wrong hash lengths, negative or boolean sizes and a bare bytes 'proof' raise ProofError."""
    proof = MerkleTree(LEAF_HASHES).inclusion_proof(1, 5)
    leaf, root = LEAF_HASHES[1], ROOTS[5]
    bad_inclusions: list[tuple[object, object, object, object, object]] = [
        (leaf[:31], 1, 5, proof, root),
        (leaf, 1, 5, proof, root + b"\x00"),
        (leaf, 1, 5, [*proof[:2], proof[2][:16]], root),
        (leaf, 1, 5, [*proof, b""], root),
        (leaf, -1, 5, proof, root),
        (leaf, True, 5, proof, root),
        (leaf, 1, 5, b"".join(proof), root),
        (leaf, 1, 5, [bytearray(p) for p in proof], root),
    ]
    for args in bad_inclusions:
        with pytest.raises(ProofError) as caught:
            verify_inclusion(*args)  # type: ignore[arg-type]
        assert caught.value.code == "proof_invalid"
    bad_consistencies: list[tuple[object, object, object, object, object]] = [
        (-1, 5, ROOTS[1], root, []),
        (2, 5.0, ROOTS[2], root, [N[1][1], N[0][4]]),
        (2, 5, ROOTS[2][:8], root, [N[1][1], N[0][4]]),
        (2, 5, ROOTS[2], root, [N[1][1], N[0][4][:31]]),
    ]
    for args in bad_consistencies:
        with pytest.raises(ProofError) as caught:
            verify_consistency(*args)  # type: ignore[arg-type]
        assert caught.value.code == "proof_invalid"


def test_proof_error_is_a_value_error_with_stable_code() -> None:
    """ProofError subclasses ValueError and carries the machine-readable code proof_invalid."""
    assert issubclass(ProofError, ValueError)
    assert ProofError("x").code == "proof_invalid"


def test_inclusion_proof_alone_does_not_bind_the_tree_size() -> None:
    """The tree size is bound by the signed tree head's root, not by the inclusion path itself."""
    # The path for leaf 0 of a 3-leaf tree has the same shape as for a 4-leaf tree, so it verifies
    # for a claimed size of 4 against the 3-leaf root, but fails against the genuine 4-leaf root.
    # Callers must therefore take size and root together from one verified checkpoint.
    proof = MerkleTree(LEAF_HASHES).inclusion_proof(0, 3)
    verify_inclusion(LEAF_HASHES[0], 0, 4, proof, ROOTS[3])
    with pytest.raises(ProofError):
        verify_inclusion(LEAF_HASHES[0], 0, 4, proof, ROOTS[4])


# --- MerkleTree API -----------------------------------------------------------------------------


def test_tree_append_extend_and_leaf_access() -> None:
    """append returns the new index, extend is all-or-nothing, and leaves read back unchanged."""
    tree = MerkleTree()
    assert tree.append(LEAF_HASHES[0]) == 0
    tree.extend(LEAF_HASHES[1:4])
    assert len(tree) == tree.size == 4
    assert [tree.leaf(i) for i in range(4)] == LEAF_HASHES[:4]
    with pytest.raises(ValueError, match=r"leaf_hashes\[1\]"):
        tree.extend([LEAF_HASHES[4], b"bad"])
    assert tree.size == 4
    assert tree.root() == ROOTS[4]
    with pytest.raises(ValueError, match="32-byte"):
        tree.append(bytearray(SOME_HASH))  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        tree.leaf(4)
    assert "size=4" in repr(tree)


def test_tree_rejects_out_of_range_arguments() -> None:
    """Sizes beyond the tree, indexes not below the size and reversed sizes raise errors."""
    tree = MerkleTree(LEAF_HASHES[:5])
    with pytest.raises(ValueError, match="size"):
        tree.root_at(6)
    with pytest.raises(ValueError, match="size"):
        tree.root_at(-1)
    with pytest.raises(ValueError, match="not below"):
        tree.inclusion_proof(5)
    with pytest.raises(ValueError, match="not below"):
        tree.inclusion_proof(0, 0)
    with pytest.raises(ValueError, match="old_size"):
        tree.consistency_proof(4, 3)
    with pytest.raises(ValueError, match="new_size"):
        tree.consistency_proof(1, 6)
    with pytest.raises(TypeError, match="int"):
        tree.inclusion_proof(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        tree.root_at(True)
    assert tree.consistency_proof(0) == []
    assert tree.consistency_proof(5) == []


def test_large_tree_matches_level_by_level_root() -> None:
    """A tree of 2**16 + 3 leaves built by extend has the root_hash root at several sizes."""
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(2**16 + 3)]
    tree = MerkleTree(leaves)
    for size in (1, 3, 2**10 + 1, 2**15, 2**16 - 1, 2**16, 2**16 + 3):
        assert tree.root_at(size) == root_hash(leaves[:size])
    index = 2**16 + 2
    verify_inclusion(leaves[index], index, tree.size, tree.inclusion_proof(index), tree.root())
    proof = tree.consistency_proof(2**15 + 7)
    verify_consistency(2**15 + 7, tree.size, tree.root_at(2**15 + 7), tree.root(), proof)


@given(cuts=st.lists(st.integers(min_value=0, max_value=MAX_SIZE), max_size=6))
def test_incremental_growth_equals_bulk_construction(cuts: list[int]) -> None:
    """Growing a tree in arbitrary batches yields the same roots and frontier as one batch."""
    tree = MerkleTree()
    previous = 0
    for cut in sorted(cuts):
        tree.extend(BIG_LEAVES[previous:cut])
        previous = cut
        assert tree.root() == BIG_TREE.root_at(cut)
        assert tree.frontier() == BIG_TREE.frontier(cut)


def test_every_small_proof_verifies_exhaustively() -> None:
    """For all sizes up to 40, every inclusion and consistency proof verifies and is the RFC one."""
    for size in range(1, 41):
        leaves = BIG_LEAVES[:size]
        root = BIG_TREE.root_at(size)
        assert root == ref_mth(leaves)
        for index in range(size):
            proof = BIG_TREE.inclusion_proof(index, size)
            assert proof == ref_path(index, leaves)
            verify_inclusion(leaves[index], index, size, proof, root)
        for old_size in range(size + 1):
            proof = BIG_TREE.consistency_proof(old_size, size)
            if 0 < old_size < size:
                assert proof == ref_subproof(old_size, leaves, True)
            verify_consistency(old_size, size, BIG_TREE.root_at(old_size), root, proof)


# --- Property tests -----------------------------------------------------------------------------


@st.composite
def index_and_size(draw: st.DrawFn) -> tuple[int, int]:
    """A tree size in 1..MAX_SIZE and a leaf index below it."""
    size = draw(st.integers(min_value=1, max_value=MAX_SIZE))
    return draw(st.integers(min_value=0, max_value=size - 1)), size


@st.composite
def old_and_new_size(draw: st.DrawFn) -> tuple[int, int]:
    """Two tree sizes with 0 < old < new <= MAX_SIZE."""
    new = draw(st.integers(min_value=2, max_value=MAX_SIZE))
    return draw(st.integers(min_value=1, max_value=new - 1)), new


@settings(max_examples=300)
@given(case=index_and_size())
def test_generated_inclusion_proofs_verify(case: tuple[int, int]) -> None:
    """Any generated inclusion proof equals the RFC PATH and verifies against root_at(size)."""
    index, size = case
    proof = BIG_TREE.inclusion_proof(index, size)
    assert proof == ref_path(index, BIG_LEAVES[:size])
    assert len(proof) <= (size - 1).bit_length()
    verify_inclusion(BIG_LEAVES[index], index, size, proof, BIG_TREE.root_at(size))


@settings(max_examples=300)
@given(case=old_and_new_size())
def test_generated_consistency_proofs_verify(case: tuple[int, int]) -> None:
    """Any generated consistency proof equals the RFC PROOF and verifies between the two roots."""
    old_size, new_size = case
    proof = BIG_TREE.consistency_proof(old_size, new_size)
    assert proof == ref_subproof(old_size, BIG_LEAVES[:new_size], True)
    old_root, new_root = BIG_TREE.root_at(old_size), BIG_TREE.root_at(new_size)
    verify_consistency(old_size, new_size, old_root, new_root, proof)


@settings(max_examples=300)
@given(
    case=index_and_size(),
    target=st.integers(min_value=0),
    position=st.integers(min_value=0, max_value=HASH_SIZE - 1),
    mask=st.integers(min_value=1, max_value=255),
)
def test_any_flipped_byte_breaks_inclusion(
    case: tuple[int, int], target: int, position: int, mask: int
) -> None:
    """Changing any byte of the leaf, the root or any proof element makes verification fail."""
    index, size = case
    proof = BIG_TREE.inclusion_proof(index, size)
    root, leaf = BIG_TREE.root_at(size), BIG_LEAVES[index]
    choice = target % (len(proof) + 2)
    if choice == len(proof):
        root = flip(root, position, mask)
    elif choice == len(proof) + 1:
        leaf = flip(leaf, position, mask)
    else:
        proof[choice] = flip(proof[choice], position, mask)
    with pytest.raises(ProofError):
        verify_inclusion(leaf, index, size, proof, root)


@settings(max_examples=300)
@given(
    case=old_and_new_size(),
    target=st.integers(min_value=0),
    position=st.integers(min_value=0, max_value=HASH_SIZE - 1),
    mask=st.integers(min_value=1, max_value=255),
)
def test_any_flipped_byte_breaks_consistency(
    case: tuple[int, int], target: int, position: int, mask: int
) -> None:
    """Changing any byte of either root or any proof element makes verification fail."""
    old_size, new_size = case
    proof = BIG_TREE.consistency_proof(old_size, new_size)
    old_root, new_root = BIG_TREE.root_at(old_size), BIG_TREE.root_at(new_size)
    choice = target % (len(proof) + 2)
    if choice == len(proof):
        old_root = flip(old_root, position, mask)
    elif choice == len(proof) + 1:
        new_root = flip(new_root, position, mask)
    else:
        proof[choice] = flip(proof[choice], position, mask)
    with pytest.raises(ProofError):
        verify_consistency(old_size, new_size, old_root, new_root, proof)


@settings(max_examples=300)
@given(case=index_and_size(), other=index_and_size())
def test_changed_index_or_size_breaks_inclusion(
    case: tuple[int, int], other: tuple[int, int]
) -> None:
    """A proof fails for another index of the same tree and for another size's genuine root."""
    index, size = case
    other_index, other_size = other
    proof = BIG_TREE.inclusion_proof(index, size)
    leaf = BIG_LEAVES[index]
    if other_index % size != index:
        with pytest.raises(ProofError):
            verify_inclusion(leaf, other_index % size, size, proof, BIG_TREE.root_at(size))
    if other_size != size and not (
        index < other_size and BIG_TREE.inclusion_proof(index, other_size) == proof
    ):
        with pytest.raises(ProofError):
            verify_inclusion(leaf, index, other_size, proof, BIG_TREE.root_at(other_size))


@settings(max_examples=300)
@given(case=old_and_new_size(), other=old_and_new_size())
def test_changed_sizes_break_consistency(case: tuple[int, int], other: tuple[int, int]) -> None:
    """A proof fails for other sizes' genuine roots unless it is exactly that pair's proof too."""
    old_size, new_size = case
    other_old, other_new = other
    proof = BIG_TREE.consistency_proof(old_size, new_size)
    if (other_old, other_new) == (old_size, new_size):
        return
    if BIG_TREE.consistency_proof(other_old, other_new) == proof:
        return  # two size pairs can legitimately share one proof; nothing is being forged
    with pytest.raises(ProofError):
        verify_consistency(
            other_old, other_new, BIG_TREE.root_at(other_old), BIG_TREE.root_at(other_new), proof
        )
