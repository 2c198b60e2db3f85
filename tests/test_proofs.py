"""coniti.proofs: RFC 9162 hashing, the right edge, inclusion and consistency proofs and their checks.

Known answers come from transparency-dev/merkle ``proof/verify_test.go`` (Apache-2.0; the RFC 6962
test vectors of Certificate Transparency, 8 leaves). Everything else is compared with ``_Reference``,
a transcription of RFC 9162 §2.1's recursive definitions (MTH, PATH, PROOF/SUBPROOF) written with
hashlib directly, sharing no code with the module.
"""

from __future__ import annotations

import ast
import hashlib
import random
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coniti
from coniti.errors import ConitiError, ProofError
from coniti.proofs import (
    EMPTY_ROOT,
    CompactRange,
    MerkleTree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    node_hash,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

# -- the RFC 6962 / CT vectors (transparency-dev/merkle proof/verify_test.go) --------------------

VECTOR_LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
)]  # fmt: skip
VECTOR_ROOTS = [bytes.fromhex(h) for h in (
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
)]  # fmt: skip
# (1-based leaf, tree size, audit path), as the Go table writes them.
VECTOR_INCLUSION = [
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip
VECTOR_CONSISTENCY = [
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]  # fmt: skip


def vector_tree() -> MerkleTree:
    return MerkleTree(leaf_hash(data) for data in VECTOR_LEAVES)


# -- the reference: RFC 9162 §2.1 as written ------------------------------------------------------


class _Reference:
    """MTH, PATH and PROOF over the leaf inputs ``d``, transcribed from RFC 9162 §2.1.1, §2.1.3.1
    and §2.1.4.1 (``D[a:b]`` is the range of inputs ``a..b-1``; MTH is memoised per range)."""

    def __init__(self, d: list[bytes]) -> None:
        self.d = d
        self.mth = lru_cache(maxsize=None)(self._mth)

    def _mth(self, a: int, b: int) -> bytes:
        n = b - a
        if n == 0:
            return hashlib.sha256(b"").digest()
        if n == 1:
            return hashlib.sha256(b"\x00" + self.d[a]).digest()
        k = 1
        while k * 2 < n:
            k *= 2
        return hashlib.sha256(b"\x01" + self.mth(a, a + k) + self.mth(a + k, b)).digest()

    def path(self, m: int, a: int, b: int) -> list[bytes]:
        n = b - a
        if n == 1:
            return []
        k = 1
        while k * 2 < n:
            k *= 2
        if m < k:
            return self.path(m, a, a + k) + [self.mth(a + k, b)]
        return self.path(m - k, a + k, b) + [self.mth(a, a + k)]

    def proof(self, m: int, n: int) -> list[bytes]:
        return self.subproof(m, 0, n, True)

    def subproof(self, m: int, a: int, b: int, whole: bool) -> list[bytes]:
        n = b - a
        if m == n:
            return [] if whole else [self.mth(a, b)]
        k = 1
        while k * 2 < n:
            k *= 2
        if m <= k:
            return self.subproof(m, a, a + k, whole) + [self.mth(a + k, b)]
        return self.subproof(m - k, a + k, b, False) + [self.mth(a, a + k)]


def inputs(n: int, salt: bytes = b"") -> list[bytes]:
    """``n`` distinct 32-byte leaf inputs, standing in for chain hashes."""
    return [hashlib.sha256(salt + i.to_bytes(8, "big")).digest() for i in range(n)]


BIG = 300
BIG_INPUTS = inputs(BIG)
BIG_TREE = MerkleTree(leaf_hash(x) for x in BIG_INPUTS)
REFERENCE = _Reference(BIG_INPUTS)


class CountingNodes:
    """A TreeNodes over a MerkleTree that counts the nodes read."""

    def __init__(self, tree: MerkleTree) -> None:
        self.tree = tree
        self.reads = 0

    def node(self, level: int, index: int) -> bytes:
        self.reads += 1
        return self.tree.node(level, index)


def ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


# -- hashing and roots ----------------------------------------------------------------------------


def test_empty_root_is_sha256_of_nothing() -> None:
    """The tree of size 0 has the root SHA-256("") (RFC 9162 §2.1.1)."""
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert MerkleTree().root() == EMPTY_ROOT
    assert merkle_root([]) == EMPTY_ROOT
    assert tree_root(MerkleTree(), 0) == EMPTY_ROOT


def test_leaf_and_node_hashes_are_domain_separated() -> None:
    """leaf_hash prefixes 0x00 and node_hash 0x01 before SHA-256."""
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    assert (
        node_hash(b"L" * 32, b"R" * 32) == hashlib.sha256(b"\x01" + b"L" * 32 + b"R" * 32).digest()
    )


@pytest.mark.parametrize("size", range(1, 9))
def test_roots_match_the_ct_vectors(size: int) -> None:
    """The root of each prefix of the 8 CT test leaves is the published one."""
    tree = vector_tree()
    assert tree.root(size) == VECTOR_ROOTS[size - 1]
    assert merkle_root(leaf_hash(x) for x in VECTOR_LEAVES[:size]) == VECTOR_ROOTS[size - 1]


def test_roots_of_every_size_match_the_reference() -> None:
    """For every size up to 300, the root from stored nodes, the incremental edge and merkle_root
    all equal the RFC's MTH."""
    edge = CompactRange()
    for size in range(1, BIG + 1):
        edge.append(leaf_hash(BIG_INPUTS[size - 1]))
        want = REFERENCE.mth(0, size)
        assert BIG_TREE.root(size) == want
        assert edge.root() == want
    assert merkle_root(leaf_hash(x) for x in BIG_INPUTS) == REFERENCE.mth(0, BIG)


# -- the right edge and the node table ------------------------------------------------------------


def test_append_returns_the_nodes_the_storage_scheme_names() -> None:
    """Appending leaf n completes node (0, n) and node (h, (n+1)/2^h - 1) for each 2^h dividing
    n + 1, level 0 first, each hash the MTH of its leaves."""
    edge = CompactRange()
    for n in range(BIG):
        completed = edge.append(leaf_hash(BIG_INPUTS[n]))
        want = [(0, n)] + [
            (h, (n + 1) // 2**h - 1) for h in range(1, (n + 1).bit_length()) if (n + 1) % 2**h == 0
        ]
        assert [(level, index) for level, index, _ in completed] == want
        for level, index, value in completed:
            lo = index << level
            assert value == REFERENCE.mth(lo, lo + (1 << level))


def test_the_node_table_holds_two_nodes_a_leaf() -> None:
    """A tree of n leaves writes 2n - popcount(n) nodes in all."""
    written = 0
    edge = CompactRange()
    for n in range(1, BIG + 1):
        written += len(edge.append(leaf_hash(BIG_INPUTS[n - 1])))
        assert written == 2 * n - n.bit_count()


def test_edge_from_nodes_equals_the_incremental_edge() -> None:
    """For every size, the edge read back from the node table equals the one built by appends."""
    edge = CompactRange()
    for size in range(BIG + 1):
        assert CompactRange.from_nodes(BIG_TREE, size) == edge
        if size < BIG:
            edge.append(leaf_hash(BIG_INPUTS[size]))


def test_edge_hashes_are_the_nodes_of_the_set_bits() -> None:
    """The edge of size n holds node (h, (n >> h) - 1) for each set bit h of n, largest first."""
    edge = BIG_TREE.edge
    n = edge.size
    levels = [h for h in range(n.bit_length() - 1, -1, -1) if n >> h & 1]
    assert edge.hashes == tuple(BIG_TREE.node(h, (n >> h) - 1) for h in levels)


def test_edge_rebuilt_from_its_hashes_appends_the_same() -> None:
    """An edge constructed from a stored (size, hashes) continues exactly as the original."""
    original = CompactRange.from_nodes(BIG_TREE, 150)
    restored = CompactRange(original.size, original.hashes)
    for n in range(150, BIG):
        assert restored.append(leaf_hash(BIG_INPUTS[n])) == original.append(
            leaf_hash(BIG_INPUTS[n])
        )
    assert restored.root() == BIG_TREE.root()


def test_copy_is_independent() -> None:
    """Appending to a copy leaves the original edge as it was."""
    edge = CompactRange.from_nodes(BIG_TREE, 5)
    copy = edge.copy()
    copy.append(leaf_hash(b"x"))
    assert edge.size == 5 and copy.size == 6
    assert edge.root() == BIG_TREE.root(5)


@pytest.mark.parametrize(
    ("size", "hashes", "message"),
    [
        (3, [b"\x00" * 32], "tree of size 3 has 2 hashes, got 1"),
        (1, [b"\x00" * 31], "right-edge hash #0 is 31 bytes, not 32"),
        (-1, [], "tree size must be a whole number >= 0"),
    ],
)
def test_edge_refuses_a_malformed_state(size: int, hashes: list[bytes], message: str) -> None:
    """A stored edge with the wrong number of hashes, a short hash or a negative size is refused."""
    with pytest.raises(ProofError, match=message):
        CompactRange(size, hashes)


def test_append_refuses_a_hash_of_the_wrong_size() -> None:
    """append takes a 32-byte leaf hash, not the leaf input of another length, and changes nothing."""
    edge = CompactRange()
    with pytest.raises(ProofError, match="leaf hash is 3 bytes, not 32"):
        edge.append(b"abc")
    assert edge.size == 0


# -- proofs against the vectors -------------------------------------------------------------------


@pytest.mark.parametrize(("leaf", "size", "path"), VECTOR_INCLUSION)
def test_inclusion_proofs_match_the_ct_vectors(leaf: int, size: int, path: list[str]) -> None:
    """The audit paths of the CT vectors are generated, and verify against the published roots."""
    tree = vector_tree()
    proof = tree.prove_inclusion(leaf - 1, size)
    assert [p.hex() for p in proof] == path
    verify_inclusion(
        proof,
        leaf_hash=leaf_hash(VECTOR_LEAVES[leaf - 1]),
        index=leaf - 1,
        size=size,
        root=VECTOR_ROOTS[size - 1],
    )


@pytest.mark.parametrize(("old", "new", "path"), VECTOR_CONSISTENCY)
def test_consistency_proofs_match_the_ct_vectors(old: int, new: int, path: list[str]) -> None:
    """The consistency proofs of the CT vectors are generated, and verify against the published
    roots."""
    proof = vector_tree().prove_consistency(old, new)
    assert [p.hex() for p in proof] == path
    verify_consistency(
        proof,
        old_size=old,
        new_size=new,
        old_root=VECTOR_ROOTS[old - 1],
        new_root=VECTOR_ROOTS[new - 1],
    )


# -- proofs against the reference, exhaustively ---------------------------------------------------


def test_every_inclusion_proof_up_to_300_matches_the_reference_and_verifies() -> None:
    """For every size up to 300 and every leaf, PATH from stored nodes equals the RFC's and
    verifies."""
    for size in range(1, BIG + 1):
        root = REFERENCE.mth(0, size)
        for index in range(size):
            proof = inclusion_proof(BIG_TREE, index, size)
            assert proof == REFERENCE.path(index, 0, size), (index, size)
            verify_inclusion(
                proof, leaf_hash=BIG_TREE.node(0, index), index=index, size=size, root=root
            )


def _consistency_pairs() -> list[tuple[int, int]]:
    pairs = [(old, new) for new in range(1, 101) for old in range(0, new + 1)]
    rng = random.Random(9162)
    pairs += [tuple(sorted(rng.sample(range(0, BIG + 1), 2))) for _ in range(3000)]  # type: ignore[misc]
    pairs += [(old, BIG) for old in range(0, BIG + 1)]
    return pairs


def test_consistency_proofs_match_the_reference_and_verify() -> None:
    """For all pairs of sizes up to 100, 3000 sampled pairs up to 300 and every old size against
    300, PROOF from stored nodes equals the RFC's and verifies."""
    for old, new in _consistency_pairs():
        proof = consistency_proof(BIG_TREE, old, new)
        want = REFERENCE.proof(old, new) if 0 < old < new else []
        assert proof == want, (old, new)
        verify_consistency(
            proof,
            old_size=old,
            new_size=new,
            old_root=REFERENCE.mth(0, old),
            new_root=REFERENCE.mth(0, new),
        )


def test_proofs_read_a_logarithmic_number_of_nodes() -> None:
    """Roots read popcount(size) nodes, inclusion proofs at most 2·⌈log2 size⌉ (every leaf of
    every size up to 300), consistency proofs at most 2·⌈log2 new⌉ + 1 (every pair up to 130, and
    the sampled ones): what the module docstring promises a store."""
    nodes = CountingNodes(BIG_TREE)
    for size in range(1, BIG + 1):
        nodes.reads = 0
        tree_root(nodes, size)
        assert nodes.reads == size.bit_count()
        for index in range(size):
            nodes.reads = 0
            inclusion_proof(nodes, index, size)
            assert nodes.reads <= 2 * ceil_log2(size), (index, size)
    pairs = [(old, new) for new in range(2, 131) for old in range(1, new)]
    for old, new in pairs + [(o, n) for o, n in _consistency_pairs() if 0 < o < n]:
        nodes.reads = 0
        consistency_proof(nodes, old, new)
        assert nodes.reads <= 2 * ceil_log2(new) + 1, (old, new)


# -- tampering ------------------------------------------------------------------------------------


def _flip(value: bytes, bit: int = 3) -> bytes:
    return bytes([value[0] ^ (1 << bit)]) + value[1:]


def _inclusion_probes(index: int, size: int) -> list[tuple[str, dict[str, object]]]:
    proof = BIG_TREE.prove_inclusion(index, size)
    good: dict[str, object] = {
        "proof": proof,
        "leaf_hash": BIG_TREE.node(0, index),
        "index": index,
        "size": size,
        "root": BIG_TREE.root(size),
    }
    probes = [
        (f"proof[{i}] flipped", {**good, "proof": proof[:i] + [_flip(p)] + proof[i + 1 :]})
        for i, p in enumerate(proof)
    ]
    probes += [
        ("wrong leaf", {**good, "leaf_hash": _flip(BIG_TREE.node(0, index))}),
        ("wrong root", {**good, "root": _flip(BIG_TREE.root(size))}),
        ("empty root", {**good, "root": EMPTY_ROOT}),
        ("trailing hash", {**good, "proof": [*proof, BIG_TREE.root(size)]}),
        ("preceding hash", {**good, "proof": [BIG_TREE.root(size), *proof]}),
        ("index past size", {**good, "index": size}),
    ]
    if proof:
        probes.append(("removed hash", {**good, "proof": proof[:-1]}))
    if index > 0:
        probes.append(("index - 1", {**good, "index": index - 1}))
    if index + 1 < size:
        probes.append(("index + 1", {**good, "index": index + 1}))
    return probes


def test_every_tampered_inclusion_proof_fails() -> None:
    """For every leaf of every tree up to 64: a flipped bit in any hash of the proof, the leaf or
    the root, a hash added or removed, or a neighbouring index, fails with ProofError."""
    for size in range(1, 65):
        for index in range(size):
            for name, probe in _inclusion_probes(index, size):
                proof = probe.pop("proof")
                with pytest.raises(ProofError):
                    verify_inclusion(proof, **probe)  # type: ignore[arg-type]
                    pytest.fail(f"{name} verified for leaf {index} of {size}")


def _consistency_probes(old: int, new: int) -> list[tuple[str, dict[str, object]]]:
    proof = BIG_TREE.prove_consistency(old, new)
    old_root, new_root = BIG_TREE.root(old), BIG_TREE.root(new)
    good: dict[str, object] = {
        "proof": proof,
        "old_size": old,
        "new_size": new,
        "old_root": old_root,
        "new_root": new_root,
    }
    probes = [
        (f"proof[{i}] flipped", {**good, "proof": proof[:i] + [_flip(p, 4)] + proof[i + 1 :]})
        for i, p in enumerate(proof)
    ]
    probes += [
        ("wrong old root", {**good, "old_root": _flip(old_root)}),
        ("wrong new root", {**good, "new_root": _flip(new_root)}),
        ("swapped roots", {**good, "old_root": new_root, "new_root": old_root}),
        ("empty proof", {**good, "proof": []}),
        ("trailing hash", {**good, "proof": [*proof, new_root]}),
        ("preceding hash", {**good, "proof": [old_root, *proof]}),
        ("truncated", {**good, "proof": proof[:-1]}),
        ("sizes swapped", {**good, "old_size": new, "new_size": old}),
        ("old size + 1", {**good, "old_size": old + 1}),
        ("old size - 1", {**good, "old_size": old - 1}),
    ]
    return probes


def test_every_tampered_consistency_proof_fails() -> None:
    """For every pair 0 < old < new <= 48: a flipped bit in any proof hash or either root, swapped
    roots or sizes, a hash added or removed, an empty proof, or a neighbouring old size, fails."""
    for new in range(2, 49):
        for old in range(1, new):
            for name, probe in _consistency_probes(old, new):
                proof = probe.pop("proof")
                with pytest.raises(ProofError):
                    verify_consistency(proof, **probe)  # type: ignore[arg-type]
                    pytest.fail(f"{name} verified from {old} to {new}")


# -- messages -------------------------------------------------------------------------------------


def test_inclusion_of_a_leaf_past_the_size_names_both() -> None:
    """Asking for leaf 8 of a tree of 8 names the index and the size."""
    with pytest.raises(ProofError, match="^leaf index 8 is past the tree of size 8$"):
        inclusion_proof(vector_tree(), 8, 8)


def test_consistency_with_sizes_out_of_order_names_both() -> None:
    """A consistency proof from 5 to 3 is refused, naming both sizes."""
    with pytest.raises(ProofError, match="^old size 5 is past new size 3$"):
        consistency_proof(vector_tree(), 5, 3)


def test_a_proof_of_the_wrong_length_says_how_long_it_should_be() -> None:
    """A proof with a hash too many says how many it has and how many a proof of that leaf needs."""
    tree = vector_tree()
    proof = tree.prove_inclusion(5, 8)
    with pytest.raises(
        ProofError,
        match=r"^inclusion proof of leaf 5 in a tree of size 8 has 4 hashes, expected 3$",
    ):
        verify_inclusion(
            [*proof, proof[0]], leaf_hash=tree.node(0, 5), index=5, size=8, root=tree.root()
        )


def test_a_short_hash_in_a_proof_is_named_by_position() -> None:
    """A proof hash that is not 32 bytes is named by its position."""
    tree = vector_tree()
    proof = tree.prove_consistency(3, 8)
    proof[1] = proof[1][:31]
    with pytest.raises(ProofError, match=r"^consistency proof hash #1 is 31 bytes, not 32$"):
        verify_consistency(
            proof, old_size=3, new_size=8, old_root=tree.root(3), new_root=tree.root()
        )


def test_a_tampered_proof_says_which_root_it_missed() -> None:
    """A consistency proof whose last hash is altered leads to another new root, and says so."""
    tree = vector_tree()
    proof = tree.prove_consistency(3, 8)
    proof[-1] = _flip(proof[-1])
    with pytest.raises(ProofError, match="from size 3 to size 8 does not lead to the new root"):
        verify_consistency(
            proof, old_size=3, new_size=8, old_root=tree.root(3), new_root=tree.root()
        )


@pytest.mark.parametrize("size", [-1, True, 1.0, "3"])
def test_sizes_must_be_whole_numbers(size: object) -> None:
    """A negative, boolean, float or text size is refused by name."""
    with pytest.raises(ProofError, match="tree size must be a whole number >= 0"):
        tree_root(vector_tree(), size)  # type: ignore[arg-type]


def test_consistency_from_the_empty_tree_needs_its_root() -> None:
    """From size 0 the proof is empty and the old root must be the empty tree's."""
    tree = vector_tree()
    assert tree.prove_consistency(0, 8) == []
    verify_consistency([], old_size=0, new_size=8, old_root=EMPTY_ROOT, new_root=tree.root())
    with pytest.raises(ProofError, match="not the root of the empty tree"):
        verify_consistency([], old_size=0, new_size=8, old_root=tree.root(1), new_root=tree.root())


def test_consistency_between_equal_sizes_needs_equal_roots() -> None:
    """Between equal sizes the proof is empty and the roots must be the same."""
    tree = vector_tree()
    assert tree.prove_consistency(5, 5) == []
    verify_consistency([], old_size=5, new_size=5, old_root=tree.root(5), new_root=tree.root(5))
    with pytest.raises(ProofError, match="roots differ for the same size 5"):
        verify_consistency([], old_size=5, new_size=5, old_root=tree.root(5), new_root=tree.root(6))


def test_the_tree_refuses_a_size_it_does_not_have() -> None:
    """MerkleTree names a requested size past its leaves."""
    with pytest.raises(ProofError, match="^tree size 9 is past the tree's 8 leaves$"):
        vector_tree().prove_inclusion(0, 9)
    with pytest.raises(ProofError, match="^new size 9 is past the tree's 8 leaves$"):
        vector_tree().prove_consistency(0, 9)


def test_proof_errors_join_the_error_tree() -> None:
    """ProofError is a ConitiError and a ValueError, exported from coniti."""
    assert issubclass(ProofError, ConitiError) and issubclass(ProofError, ValueError)
    assert coniti.ProofError is ProofError


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=200), st.data())
def test_any_proof_of_any_tree_verifies(leaves: list[bytes], data: st.DataObject) -> None:
    """For any leaves, any leaf's inclusion proof and any prefix's consistency proof verify."""
    tree = MerkleTree(leaf_hash(x) for x in leaves)
    size = data.draw(st.integers(1, len(leaves)))
    index = data.draw(st.integers(0, size - 1))
    old = data.draw(st.integers(0, size))
    verify_inclusion(
        tree.prove_inclusion(index, size),
        leaf_hash=leaf_hash(leaves[index]),
        index=index,
        size=size,
        root=merkle_root(leaf_hash(x) for x in leaves[:size]),
    )
    verify_consistency(
        tree.prove_consistency(old, size),
        old_size=old,
        new_size=size,
        old_root=tree.root(old),
        new_root=tree.root(size),
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(2, BIG), st.data())
def test_any_flipped_bit_fails(size: int, data: st.DataObject) -> None:
    """Flipping any one bit of any hash of a valid consistency proof makes it fail."""
    old = data.draw(st.integers(1, size - 1))
    proof = BIG_TREE.prove_consistency(old, size)
    position = data.draw(st.integers(0, len(proof) - 1))
    bit = data.draw(st.integers(0, 255))
    hashed = bytearray(proof[position])
    hashed[bit // 8] ^= 1 << (bit % 8)
    proof[position] = bytes(hashed)
    with pytest.raises(ProofError):
        verify_consistency(
            proof,
            old_size=old,
            new_size=size,
            old_root=BIG_TREE.root(old),
            new_root=BIG_TREE.root(size),
        )


# -- the module stays pure ------------------------------------------------------------------------


def test_proofs_imports_nothing_of_the_store_or_engine() -> None:
    """coniti.proofs imports, from coniti, only coniti.errors."""
    source = Path(coniti.__file__).with_name("proofs.py").read_text(encoding="utf-8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert {m for m in imported if m.startswith("coniti")} == {"coniti.errors"}


def test_importing_proofs_loads_no_third_party_package() -> None:
    """``import coniti.proofs`` loads neither cryptography, lmdb, pydantic nor numpy."""
    probe = "import sys, coniti.proofs; print(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    assert not {"cryptography", "lmdb", "pydantic", "numpy"} & loaded
