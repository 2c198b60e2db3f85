"""What :class:`~coniti.impl.log.LogBackend` proves about its log: the Merkle tree's root at a size,
inclusion and consistency proofs (RFC 9162, :mod:`coniti.proofs`; the tree is kept in the store,
:mod:`coniti.log.tree`).

Event ``seq`` is leaf ``seq - 1`` of the tree; its leaf input is its chain hash
(:meth:`LogBackend.event_hash <coniti.impl.log.LogBackend.event_hash>`), so a verifier holding
the event's hash checks a proof with :func:`coniti.proofs.verify_inclusion` and
``leaf_hash=coniti.proofs.leaf_hash(bytes.fromhex(hash))``, ``index=seq - 1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coniti.log.tree import consistency_at, inclusion_at, root_at

if TYPE_CHECKING:
    from coniti.log import EventLog

__all__ = ["Proving"]


class Proving:
    """The proof methods of a log store (a mixin of :class:`~coniti.impl.log.LogBackend`). Each
    reads one snapshot; none writes. Bad input (a seq or size past the head, sizes out of order)
    raises :class:`~coniti.errors.ProofError` with a one-line message; a tree that disagrees with
    the log raises :class:`~coniti.errors.StoreCorrupted`; a store of a layout before 6 opened
    read-only (no tree yet) raises :class:`~coniti.errors.StoreError` saying how to build it."""

    _log: EventLog

    def root(self, size: int | None = None) -> tuple[int, bytes]:
        """``(size, root)``: the RFC 9162 root (32 bytes) of the tree over the first ``size`` events
        (default: every event up to the head; size 0 gives ``SHA-256("")``)."""
        return self._log.proving(lambda tree, _, head: root_at(tree, head, size))

    def prove_inclusion(self, seq: int, size: int | None = None) -> list[bytes]:
        """The RFC 9162 audit path of event ``seq`` (leaf ``seq - 1``) in the tree of ``size``
        events (default: the head), checked against the stored root before it is returned."""
        return self._log.proving(lambda tree, _, head: inclusion_at(tree, head, seq, size))

    def prove_consistency(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """The RFC 9162 consistency proof that the tree of ``new_size`` events (default: the head)
        extends the tree of ``old_size`` events."""
        return self._log.proving(lambda tree, _, head: consistency_at(tree, head, old_size, new_size))
