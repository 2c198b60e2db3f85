"""The Merkle tree over the log, kept in the store (layout 6): its node table read and appended to.

The tree is RFC 9162's over the events' chain hashes (:mod:`coniti.proofs`: event ``S`` is leaf
``S - 1``, its leaf input the event's 32-byte hash). Every completed node of level 1 and up is in
the ``tree`` sub-database (keys and values: :func:`coniti.log.layout.tree_key`), written by the
append that completes it, in the append's own transaction; level 0, the leaf hashes, is answered
from the log (``leaf_hash`` of the event's hash, which the frame gives), as :mod:`coniti.proofs`
allows. :class:`TreeAppends` loads the tree's right edge at the first append of a transaction
(``popcount(size)`` reads: its level-0 node, when the size is odd, is the leaf of the event before,
whose hash the caller has) and writes the nodes each even-numbered event completes (LMDB append
mode: their keys follow every key before them). A tree is a pure function of the log's chain
hashes, so ``rebuild`` and ``verify`` refold it like every projection.

:class:`TreeReads` is a :class:`~coniti.proofs.TreeNodes` over one transaction: roots and proofs of
any size up to the head, each node read checked for its length. The table covers the log when its
greatest key's sequence number is the head's rounded down to even (:meth:`TreeReads.check_size`);
otherwise the store is damaged (or was written by a coniti that did not keep the tree: layout 6
makes those refuse it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from coniti.errors import ProofError, StoreCorrupted, StoreError
from coniti.log.codec import event_hash
from coniti.log.keys import seq_key
from coniti.log.layout import TREE_VALUE_LEN, Dbs, pack_completed_key, tree_covers, tree_key
from coniti.proofs import (
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

__all__ = ["TreeAppends", "TreeReads", "consistency_at", "inclusion_at", "root_at"]


_EDGES: dict[tuple[int, bytes], tuple[bytes, ...]] = {}
"""The right edges last appended to, by ``(size, hash of the last event)``: the hash chain makes
that pair name one history, hence one edge, in any store, so an entry never goes stale (a memo of
a pure function; at most :data:`_EDGES_KEPT`, the oldest dropped first)."""
_EDGES_KEPT = 32


def _last_key(txn: Any, db: Any) -> bytes | None:
    cur = txn.cursor(db=db)
    return bytes(cur.key()) if cur.last() else None


def _stale(covers: int, size: int) -> StoreCorrupted:
    return StoreCorrupted(
        f"the Merkle tree covers {covers} events but the log's head is event {size}: the tree "
        "table is damaged (coniti rebuild rebuilds it from the log)"
    )


class TreeReads:
    """The tree's nodes as one transaction sees them (a :class:`~coniti.proofs.TreeNodes`): level 0
    from the log's frames, the others from the table.

    Raises :class:`StoreError` when the store has no tree table (a store of layout 5 or older
    opened read-only: a writable open, such as ``coniti rebuild``, builds it) and
    :class:`StoreCorrupted` for a node that is missing or not 32 bytes, or an event that does not
    decode."""

    __slots__ = ("db", "log", "txn")

    def __init__(self, txn: Any, dbs: Dbs) -> None:
        if dbs.tree is None:
            raise StoreError(
                "this store has no Merkle tree (it is of a layout before 6, opened read-only): open it "
                "writable once (for example `coniti rebuild`) to build it"
            )
        self.txn = txn
        self.db = dbs.tree
        self.log = dbs.log

    def check_size(self, head: int) -> int:
        """``head``, once the table is seen to cover the log up to it; else :class:`StoreCorrupted`."""
        covers = tree_covers(_last_key(self.txn, self.db), head)
        if covers != head:
            raise _stale(covers, head)
        return head

    def chain_hash(self, seq: int) -> bytes:
        """The hash of event ``seq``, from its frame (:class:`StoreCorrupted` if it is missing or
        does not decode)."""
        frame = self.txn.get(seq_key(seq), db=self.log)
        if frame is None:
            raise StoreCorrupted(f"event {seq} is missing from the log")
        try:
            return event_hash(frame)
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreCorrupted(f"event {seq} is malformed: {exc}") from exc

    def node(self, level: int, index: int) -> bytes:
        """The hash of node ``(level, index)``; :class:`StoreCorrupted` if it is missing or damaged."""
        if level == 0:
            return leaf_hash(self.chain_hash(index + 1))
        raw = self.txn.get(tree_key(level, index), db=self.db)
        if raw is None or len(raw) != TREE_VALUE_LEN:
            what = "missing" if raw is None else f"{len(raw)} bytes, not {TREE_VALUE_LEN}"
            raise StoreCorrupted(f"the Merkle tree's node (level {level}, index {index}) is {what}")
        return bytes(raw)

    def root(self, size: int) -> bytes:
        """The root of the tree of the first ``size`` leaves (the caller checks ``size``)."""
        return tree_root(self, size)

    def inclusion(self, seq: int, size: int) -> list[bytes]:
        """The audit path of event ``seq`` in the tree of ``size`` leaves, checked against that
        tree's root before it is returned: a node or event changed since the tree was written makes
        it :class:`StoreCorrupted`."""
        path = inclusion_proof(self, seq - 1, size)
        try:
            verify_inclusion(
                path, leaf_hash=leaf_hash(self.chain_hash(seq)), index=seq - 1, size=size, root=self.root(size)
            )
        except ProofError as exc:
            raise StoreCorrupted(
                f"event {seq} is not in the stored Merkle tree of size {size} ({exc}): the event or "
                "the tree is damaged (coniti verify)"
            ) from None
        return path

    def consistency(self, old_size: int, new_size: int) -> list[bytes]:
        """The consistency proof from ``old_size`` to ``new_size`` leaves (the caller checks sizes),
        checked against the two stored roots before it is returned (:class:`StoreCorrupted` if a
        node it reads was changed since the tree was written)."""
        proof = consistency_proof(self, old_size, new_size)
        try:
            verify_consistency(
                proof, old_size=old_size, new_size=new_size, old_root=self.root(old_size), new_root=self.root(new_size)
            )
        except ProofError as exc:
            raise StoreCorrupted(
                f"the stored Merkle tree's consistency proof from size {old_size} to size {new_size} does "
                f"not hold ({exc}): the tree is damaged (coniti verify)"
            ) from None
        return proof


class TreeAppends:
    """Appends leaves to the tree of one write transaction: the events' chain hashes, in sequence
    order with no gap. The right edge (the subtree roots of :class:`~coniti.proofs.CompactRange`,
    largest first) is loaded at the first append and kept for the transaction; an append whose
    event does not follow the tree's last leaf raises :class:`StoreCorrupted` (the tree and the log
    disagree) and writes nothing. :meth:`extend` is :meth:`CompactRange.append
    <coniti.proofs.CompactRange.append>` written out (the tests hold it to the reference)."""

    __slots__ = ("_db", "_edge", "_size", "_txn")

    def __init__(self, txn: Any, dbs: Dbs) -> None:
        if dbs.tree is None:
            raise StoreError("this store has no Merkle tree table (a store of a layout before 6)")
        self._txn = txn
        self._db = dbs.tree
        self._edge: list[bytes] | None = None
        self._size = 0

    def _load(self, seq: int, prev: bytes) -> list[bytes]:
        """The edge of the tree of ``seq - 1`` leaves, whose last leaf is the event of hash ``prev``."""
        size = seq - 1
        covers = tree_covers(_last_key(self._txn, self._db), size)
        if covers != size:
            raise StoreCorrupted(
                f"event {seq} cannot join the Merkle tree, which covers {covers} events (the tree "
                "table is damaged: coniti rebuild rebuilds it from the log)"
            )
        known = _EDGES.get((size, prev))
        if known is not None:
            self._size = size
            return list(known)
        edge: list[bytes] = []
        for level in range(size.bit_length() - 1, 0, -1):
            if size >> level & 1:
                raw = self._txn.get(tree_key(level, (size >> level) - 1), db=self._db)
                if raw is None or len(raw) != TREE_VALUE_LEN:
                    raise StoreCorrupted(f"the Merkle tree's node (level {level}) of its right edge is damaged")
                edge.append(bytes(raw))
        if size & 1:
            edge.append(leaf_hash(prev))
        self._size = size
        return edge

    def append(self, seq: int, chain_hash: bytes, prev: bytes) -> None:
        """Add event ``seq`` (chain hash ``chain_hash``; ``prev`` the hash of event ``seq - 1``)
        and write the nodes it completes."""
        self.extend(seq, (chain_hash,), prev)

    def extend(self, first: int, chain_hashes: Sequence[bytes], prev: bytes) -> None:
        """Add events ``first, first + 1, ...`` (their chain hashes; ``prev`` the hash of event
        ``first - 1``) and write the nodes of level 1 and up they complete (one ``putmulti`` for a
        run)."""
        edge = self._edge
        if edge is None or self._size != first - 1:
            if edge is not None:
                raise StoreCorrupted(f"event {first} does not follow event {self._size} in the Merkle tree")
            edge = self._edge = self._load(first, prev)
        if not chain_hashes:
            return
        # One pass, locals bound: an odd-numbered event only pushes its leaf; an even one completes
        # the level-1 node and then one more level per trailing 1 bit of (n - 1) >> 1.
        sha, key = hashlib.sha256, pack_completed_key
        entries: list[tuple[bytes, bytes]] = []
        add, pop, push = entries.append, edge.pop, edge.append
        n = self._size
        for chain_hash in chain_hashes:
            node = sha(b"\x00" + chain_hash).digest()  # leaf_hash
            n += 1
            if n & 1:
                push(node)
                continue
            node = sha(b"\x01" + pop() + node).digest()  # node_hash, as CompactRange.append
            add((key(n, 1), node))
            level, i = 1, (n - 1) >> 1
            while i & 1:
                level += 1
                node = sha(b"\x01" + pop() + node).digest()
                add((key(n, level), node))
                i >>= 1
            push(node)
        self._size = n
        if len(_EDGES) >= _EDGES_KEPT:
            del _EDGES[next(iter(_EDGES))]
        _EDGES[n, chain_hashes[-1]] = tuple(edge)
        if len(entries) == 1:
            if not self._txn.put(entries[0][0], entries[0][1], db=self._db, append=True):
                raise StoreCorrupted(f"the Merkle tree already holds a node of event {n}")
        elif entries and self._txn.cursor(db=self._db).putmulti(entries, append=True)[1] != len(entries):
            raise StoreCorrupted(f"the Merkle tree already holds a node of events {first} to {n}")


def _count(what: str, value: object, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ProofError(f"{what} must be a whole number >= {least}, got {value!r}")
    return value


def _size(what: str, size: int | None, head: int) -> int:
    """``size`` (None: the head), checked to be a whole number not past the log's ``head``."""
    if size is None:
        return head
    _count(what, size, 0)
    if size > head:
        raise ProofError(f"{what} {size} is past the log's head (event {head})")
    return size


def root_at(tree: TreeReads, head: int, size: int | None = None) -> tuple[int, bytes]:
    """``(size, root)`` of the tree of the first ``size`` events (None: all ``head`` of them)."""
    size = _size("tree size", size, head)
    return size, tree.root(size)


def inclusion_at(tree: TreeReads, head: int, seq: int, size: int | None = None) -> list[bytes]:
    """The audit path of event ``seq`` in the tree of ``size`` events (None: the head), checked
    against the stored root (:meth:`TreeReads.inclusion`). :class:`ProofError` for a seq or size
    out of range."""
    size = _size("tree size", size, head)
    _count("seq", seq, 1)
    if seq > size:
        raise ProofError(f"event {seq} is past the tree of size {size}")
    return tree.inclusion(seq, size)


def consistency_at(tree: TreeReads, head: int, old_size: int, new_size: int | None = None) -> list[bytes]:
    """The consistency proof from the tree of ``old_size`` events to the one of ``new_size`` (None:
    the head). :class:`ProofError` for sizes out of order or past the head."""
    new_size = _size("new size", new_size, head)
    _count("old size", old_size, 0)
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is past new size {new_size}")
    return tree.consistency(old_size, new_size)
