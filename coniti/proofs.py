"""RFC 9162 Merkle trees over the event log: hashes, the tree's right edge, proofs and their checks.

**The tree** (RFC 9162 §2.1). Leaves are the log's events in sequence order: the event with sequence
number ``s`` is leaf ``s - 1`` (indexes here are 0-based, as in the RFC), and its leaf input is its
32-byte chain hash (``log/FORMAT.md`` §3.1), which erasure leaves in place. ``leaf_hash(input) =
SHA-256(0x00 ‖ input)``, ``node_hash(left, right) = SHA-256(0x01 ‖ left ‖ right)``, and the tree of
size ``n`` is the RFC's MTH over the first ``n`` leaf hashes; the tree of size 0 has the root
``SHA-256("")`` (:data:`EMPTY_ROOT`). Every hash is :data:`HASH_SIZE` (32) bytes.

**Nodes.** Node ``(level h, index i)`` is the root of the perfect subtree over the leaves
``[i·2^h, (i+1)·2^h)``: level 0 holds the leaf hashes and ``node(h, i) = node_hash(node(h-1, 2i),
node(h-1, 2i+1))``. A node, once its last leaf is appended, never changes. Every hash a root or proof
of any size needs is a node, or the fold of the nodes that tile a range ending at that size; the
functions below read nodes through a :class:`TreeNodes` and nothing else.

**The storage scheme a store implements**, in its own tables written in the append's transaction
(:class:`MerkleTree` keeps the same in lists):

* *The node table*, keyed by ``(level, index)``: every node, written when it completes. Appending
  leaf ``n`` completes node ``(0, n)`` and, for each ``h ≥ 1`` with ``2^h`` dividing ``n + 1``, node
  ``(h, (n + 1) / 2^h - 1)``; :meth:`CompactRange.append` returns exactly these, level 0 first. A tree
  of ``n`` leaves has ``2n - popcount(n)`` nodes: about two 32-byte hashes a leaf. Level 0 may
  instead be answered from the log (``leaf_hash`` of event ``i + 1``'s chain hash) and not stored.
* *The right edge* (:class:`CompactRange`): for each set bit ``h`` of the size ``n``, largest first,
  node ``(h, (n >> h) - 1)`` (at most 64 hashes). Kept beside the head, it makes an append cost
  ``O(log n)`` hashing and no read, and gives the current root without a read; a store that does
  not keep it, or wants the edge of an old size, reads it from the node table
  (:meth:`CompactRange.from_nodes`).

Both are pure functions of the log's chain hashes: a rebuild recomputes them by appending every
event's ``leaf_hash`` to a fresh :class:`CompactRange` and writing the nodes each append returns.

**Costs**, in node reads: the root of any past size ``popcount(size)``; an inclusion proof at most
``2·⌈log2 size⌉``; a consistency proof at most ``2·⌈log2 new_size⌉ + 1``. Proof generation trusts the
node source: a size past what it holds is the caller's to refuse.

**Checks.** :func:`verify_inclusion` and :func:`verify_consistency` are RFC 9162 §2.1.3.2 and
§2.1.4.2; they need the proof, the hashes and the sizes, nothing stored. They return None when the
proof holds and raise :class:`~coniti.errors.ProofError` with a one-line message naming what failed
otherwise (a size or index out of range, a hash of the wrong length, a proof of the wrong length, a
root that does not follow). The generating functions raise it too, for an index past the size or
sizes out of order.

This module is pure: it imports nothing from coniti's stores or engine. :class:`CompactRange` and
:class:`MerkleTree` are mutable and not thread-safe; the functions share no state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeAlias

from coniti.errors import ProofError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "MerkleTree",
    "Node",
    "TreeNodes",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "merkle_root",
    "node_hash",
    "tree_root",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
"""Bytes in every hash of the tree (SHA-256)."""

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""The root of the tree of size 0: ``SHA-256("")`` (RFC 9162 §2.1.1)."""

_LEAF = b"\x00"
_NODE = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 ‖ data)``: the hash of a leaf whose input is ``data`` (an event's chain hash)."""
    return hashlib.sha256(_LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 ‖ left ‖ right)``: the hash of an interior node."""
    return hashlib.sha256(_NODE + left + right).digest()


Node: TypeAlias = tuple[int, int, bytes]
"""A completed node as ``(level, index, hash)``: the root over leaves
``[index·2^level, (index+1)·2^level)``. A plain tuple: appends make two a leaf."""


class TreeNodes(Protocol):
    """Where proofs read the tree: the hash of any completed node.

    ``node(h, i)`` returns the 32-byte root of the perfect subtree over leaves ``[i·2^h, (i+1)·2^h)``
    (``h = 0``: the leaf hash of leaf ``i``). It is only asked for nodes whose leaves are all below
    the size the caller passed; how it answers a node it does not hold is its own business (the
    caller checks sizes first)."""

    def node(self, level: int, index: int) -> bytes: ...


def _check_count(what: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProofError(f"{what} must be a whole number >= 0, got {value!r}")


def _check_hash(what: str, value: bytes) -> None:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ProofError(f"{what} must be {HASH_SIZE} bytes, got {type(value).__name__}")
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes, not {HASH_SIZE}")


def _fold(peaks: Sequence[bytes]) -> bytes:
    """The root over consecutive perfect subtrees given largest first: ``peaks[0]`` joined to the
    root of the rest (RFC 9162 MTH, whose left part is always the largest power of two)."""
    root = peaks[-1]
    for peak in reversed(peaks[:-1]):
        root = node_hash(peak, root)
    return root


def _range_root(nodes: TreeNodes, start: int, end: int) -> bytes:
    """MTH over leaves ``[start, end)``, ``end > start``, ``start`` a multiple of a power of two
    ``>= end - start`` (every range RFC 9162's recursion meets): the fold of the nodes that tile it,
    one read per set bit of ``end - start``."""
    width = end - start
    peaks: list[bytes] = []
    for level in range(width.bit_length() - 1, -1, -1):
        if width >> level & 1:
            peaks.append(nodes.node(level, start >> level))
            start += 1 << level
    return _fold(peaks)


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``): where RFC 9162 splits a tree."""
    return 1 << ((n - 1).bit_length() - 1)


def tree_root(nodes: TreeNodes, size: int) -> bytes:
    """The root of the tree over the first ``size`` leaves held by ``nodes``: ``popcount(size)``
    node reads. Raises ProofError for a size that is not a whole number >= 0."""
    _check_count("tree size", size)
    return EMPTY_ROOT if size == 0 else _range_root(nodes, 0, size)


def merkle_root(leaf_hashes: Iterable[bytes]) -> bytes:
    """The root of the tree over ``leaf_hashes`` (already hashed with :func:`leaf_hash`), in order:
    RFC 9162's MTH, computed by appending to a :class:`CompactRange` (``O(n)`` time,
    ``O(log n)`` memory)."""
    edge = CompactRange()
    for leaf in leaf_hashes:
        edge.append(leaf)
    return edge.root()


def inclusion_proof(nodes: TreeNodes, index: int, size: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 ``PATH(index, D[size])``: the audit path of leaf ``index`` in the tree of
    ``size`` leaves, from the leaf's sibling up to the root's child. Raises ProofError unless
    ``0 <= index < size``."""
    _check_count("leaf index", index)
    _check_count("tree size", size)
    if index >= size:
        raise ProofError(f"leaf index {index} is past the tree of size {size}")
    path: list[bytes] = []
    _path(nodes, index, 0, size, path)
    return path


def _path(nodes: TreeNodes, m: int, start: int, n: int, out: list[bytes]) -> None:
    """Append ``PATH(m, D[start:start+n])`` to ``out``."""
    if n == 1:
        return
    k = _split(n)
    if m < k:
        _path(nodes, m, start, k, out)
        out.append(_range_root(nodes, start + k, start + n))
    else:
        _path(nodes, m - k, start + k, n - k, out)
        out.append(nodes.node(k.bit_length() - 1, start // k))


def consistency_proof(nodes: TreeNodes, old_size: int, new_size: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 ``PROOF(old_size, D[new_size])``: the hashes that prove the tree of
    ``new_size`` leaves extends the tree of ``old_size`` leaves. Empty when ``old_size`` is 0 or
    equals ``new_size``. Raises ProofError unless ``0 <= old_size <= new_size``."""
    _check_count("old size", old_size)
    _check_count("new size", new_size)
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is past new size {new_size}")
    proof: list[bytes] = []
    if 0 < old_size < new_size:
        _subproof(nodes, old_size, 0, new_size, True, proof)
    return proof


def _subproof(nodes: TreeNodes, m: int, start: int, n: int, whole: bool, out: list[bytes]) -> None:
    """Append ``SUBPROOF(m, D[start:start+n], whole)`` to ``out``."""
    if m == n:
        if not whole:
            out.append(_range_root(nodes, start, start + n))
        return
    k = _split(n)
    if m <= k:
        _subproof(nodes, m, start, k, whole, out)
        out.append(_range_root(nodes, start + k, start + n))
    else:
        _subproof(nodes, m - k, start + k, n - k, False, out)
        out.append(nodes.node(k.bit_length() - 1, start // k))


def _inclusion_length(index: int, size: int) -> int:
    """The number of hashes in the audit path of leaf ``index`` (``< size``) in a tree of ``size``."""
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def _consistency_length(old_size: int, new_size: int) -> int:
    """The number of hashes in the consistency proof from ``old_size`` to ``new_size``
    (``0 < old_size < new_size``)."""
    inner = ((old_size - 1) ^ (new_size - 1)).bit_length()
    border = ((old_size - 1) >> inner).bit_count()
    shift = (old_size & -old_size).bit_length() - 1
    return inner - shift + border + (0 if old_size == 1 << shift else 1)


def _check_proof(what: str, proof: Sequence[bytes], expected: int, subject: str) -> None:
    if len(proof) != expected:
        raise ProofError(f"{what} {subject} has {len(proof)} hashes, expected {expected}")
    for position, value in enumerate(proof):
        _check_hash(f"{what} hash #{position}", value)


def verify_inclusion(
    proof: Sequence[bytes], *, leaf_hash: bytes, index: int, size: int, root: bytes
) -> None:
    """RFC 9162 §2.1.3.2: check that ``proof`` puts the leaf whose hash is ``leaf_hash`` (not its
    input: see :func:`leaf_hash`) at ``index`` in the tree of ``size`` leaves whose root is ``root``.

    Returns None when it does; raises ProofError naming what failed: ``index`` not below ``size``,
    a hash that is not 32 bytes, a proof of the wrong length, or a proof that does not lead to
    ``root``."""
    _check_count("leaf index", index)
    _check_count("tree size", size)
    if index >= size:
        raise ProofError(f"leaf index {index} is past the tree of size {size}")
    _check_hash("leaf hash", leaf_hash)
    _check_hash("root", root)
    subject = f"of leaf {index} in a tree of size {size}"
    _check_proof("inclusion proof", proof, _inclusion_length(index, size), subject)
    fn, sn, r = index, size - 1, bytes(leaf_hash)
    for p in proof:
        if sn == 0:
            raise ProofError(f"inclusion proof {subject} is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"inclusion proof {subject} is too short")
    if r != root:
        raise ProofError(f"inclusion proof {subject} does not lead to the root given")


def verify_consistency(
    proof: Sequence[bytes], *, old_size: int, new_size: int, old_root: bytes, new_root: bytes
) -> None:
    """RFC 9162 §2.1.4.2: check that ``proof`` shows the tree of ``new_size`` leaves with root
    ``new_root`` extends the tree of ``old_size`` leaves with root ``old_root``.

    From size 0 the proof is empty and ``old_root`` must be :data:`EMPTY_ROOT` (every tree extends
    the empty one: ``new_root`` is not checked); between equal sizes it is empty and the roots must
    be equal. Returns None when the proof holds; raises ProofError naming what failed: sizes out of
    order, a hash that is not 32 bytes, a proof of the wrong length, or a root that does not follow."""
    _check_count("old size", old_size)
    _check_count("new size", new_size)
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is past new size {new_size}")
    _check_hash("old root", old_root)
    _check_hash("new root", new_root)
    subject = f"from size {old_size} to size {new_size}"
    if old_size == 0 or old_size == new_size:
        _check_proof("consistency proof", proof, 0, subject)
        if old_size == 0 and old_root != EMPTY_ROOT:
            raise ProofError("old root is not the root of the empty tree (size 0)")
        if old_size == new_size and old_root != new_root:
            raise ProofError(f"old and new roots differ for the same size {old_size}")
        return
    _check_proof("consistency proof", proof, _consistency_length(old_size, new_size), subject)
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, bytes(old_root))
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError(f"consistency proof {subject} is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"consistency proof {subject} is too short")
    if fr != old_root:
        raise ProofError(f"consistency proof {subject} does not lead to the old root given")
    if sr != new_root:
        raise ProofError(f"consistency proof {subject} does not lead to the new root given")


class CompactRange:
    """The right edge of the tree over the first ``size`` leaves: the roots of the perfect subtrees
    that tile ``[0, size)``, largest first (node ``(h, (size >> h) - 1)`` for each set bit ``h`` of
    ``size``). Enough to append and to give the root, with no other node.

    Mutable: :meth:`append` changes it in place (take a :meth:`copy` to keep the old edge). Not
    thread-safe."""

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        """The edge of a tree of ``size`` leaves from its ``popcount(size)`` subtree roots, largest
        first. Raises ProofError for a negative size, the wrong number of hashes, or a hash that is
        not 32 bytes."""
        _check_count("tree size", size)
        if len(hashes) != size.bit_count():
            raise ProofError(
                f"the right edge of a tree of size {size} has {size.bit_count()} hashes, "
                f"got {len(hashes)}"
            )
        for position, value in enumerate(hashes):
            _check_hash(f"right-edge hash #{position}", value)
        self._size = size
        self._hashes = [bytes(value) for value in hashes]

    @classmethod
    def from_nodes(cls, nodes: TreeNodes, size: int) -> CompactRange:
        """The edge of the tree of ``size`` leaves, read from ``nodes`` (``popcount(size)`` reads)."""
        _check_count("tree size", size)
        levels = [h for h in range(size.bit_length() - 1, -1, -1) if size >> h & 1]
        return cls(size, [nodes.node(h, (size >> h) - 1) for h in levels])

    @property
    def size(self) -> int:
        """The number of leaves the edge covers."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The subtree roots, largest subtree first."""
        return tuple(self._hashes)

    def copy(self) -> CompactRange:
        """An independent copy."""
        return CompactRange(self._size, self._hashes)

    def append(self, leaf_hash: bytes) -> list[Node]:
        """Add the next leaf (index ``size``), given its hash; return the nodes it completes as
        ``(level, index, hash)``, level 0 (the leaf itself) first: what a store writes to its node
        table. Raises ProofError for a hash that is not 32 bytes, and then changes nothing."""
        _check_hash("leaf hash", leaf_hash)
        index = self._size
        node = bytes(leaf_hash)
        completed: list[Node] = [(0, index, node)]
        level = 0
        while index & 1:
            node = node_hash(self._hashes.pop(), node)
            level += 1
            index >>= 1
            completed.append((level, index, node))
        self._hashes.append(node)
        self._size += 1
        return completed

    def root(self) -> bytes:
        """The root of the tree over the ``size`` leaves (:data:`EMPTY_ROOT` for none)."""
        return _fold(self._hashes) if self._hashes else EMPTY_ROOT

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompactRange):
            return NotImplemented
        return self._size == other._size and self._hashes == other._hashes

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"CompactRange(size={self._size}, root={self.root().hex()})"


class MerkleTree:
    """Every node of a tree, in memory (``O(n)`` hashes): the storage scheme of this module's
    docstring on plain lists, a :class:`TreeNodes` for the functions above, and proofs for any size
    up to the current one.

    Mutable (:meth:`append`); not thread-safe."""

    __slots__ = ("_edge", "_levels")

    def __init__(self, leaf_hashes: Iterable[bytes] = ()) -> None:
        """A tree over ``leaf_hashes`` (already hashed with :func:`leaf_hash`), in order."""
        self._levels: list[list[bytes]] = [[]]
        self._edge = CompactRange()
        for leaf in leaf_hashes:
            self.append(leaf)

    @property
    def size(self) -> int:
        """The number of leaves."""
        return self._edge.size

    @property
    def edge(self) -> CompactRange:
        """A copy of the current right edge."""
        return self._edge.copy()

    def append(self, leaf_hash: bytes) -> list[Node]:
        """Add the next leaf given its hash; return the nodes it completed (see
        :meth:`CompactRange.append`)."""
        completed = self._edge.append(leaf_hash)
        for level, _, value in completed:
            if level == len(self._levels):
                self._levels.append([])
            self._levels[level].append(value)
        return completed

    def node(self, level: int, index: int) -> bytes:
        """The hash of node ``(level, index)``. Raises ProofError for a node not completed yet."""
        if 0 <= level < len(self._levels) and 0 <= index < len(self._levels[level]):
            return self._levels[level][index]
        raise ProofError(
            f"node (level {level}, index {index}) is not in a tree of size {self.size}"
        )

    def _size_or_current(self, what: str, size: int | None) -> int:
        if size is None:
            return self.size
        _check_count(what, size)
        if size > self.size:
            raise ProofError(f"{what} {size} is past the tree's {self.size} leaves")
        return size

    def root(self, size: int | None = None) -> bytes:
        """The root of the tree over the first ``size`` leaves (default: all)."""
        if size is None:
            return self._edge.root()
        return tree_root(self, self._size_or_current("tree size", size))

    def prove_inclusion(self, index: int, size: int | None = None) -> list[bytes]:
        """The audit path of leaf ``index`` in the tree of ``size`` leaves (default: all)."""
        return inclusion_proof(self, index, self._size_or_current("tree size", size))

    def prove_consistency(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """The consistency proof from ``old_size`` to ``new_size`` leaves (default: all)."""
        return consistency_proof(self, old_size, self._size_or_current("new size", new_size))
