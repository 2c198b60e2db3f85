"""What :class:`~coniti.impl.log.LogBackend` proves about its log: the Merkle tree's root at a size,
inclusion and consistency proofs (RFC 9162, :mod:`coniti.proofs`; the tree is kept in the store,
:mod:`coniti.log.tree`), and signed checkpoints of it (C2SP, :mod:`coniti.checkpoint`).

**Checkpoints in the store.** :meth:`Proving.checkpoint` signs the tree at the head and keeps the
signed note in the log as an audited event: a metadata write of key :data:`CHECKPOINT_KEY` in
namespace :data:`CHECKPOINTS` (so it is exported, imported and chained like every event; the
namespace shows among the store's namespaces). The checkpoint of size ``n`` is the event after
event ``n`` or later. A store's *origin* (the checkpoint's first line) is the origin of its latest
checkpoint, so it survives export and import; a store without one has ``coniti/<store id>``.

Event ``seq`` is leaf ``seq - 1`` of the tree; its leaf input is its chain hash
(:meth:`LogBackend.event_hash <coniti.impl.log.LogBackend.event_hash>`), so a verifier holding
the event's hash checks a proof with :func:`coniti.proofs.verify_inclusion` and
``leaf_hash=coniti.proofs.leaf_hash(bytes.fromhex(hash))``, ``index=seq - 1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coniti.errors import CheckpointError
from coniti.log.tree import TreeReads, consistency_at, inclusion_at, root_at

if TYPE_CHECKING:
    from coniti.checkpoint import Checkpoint
    from coniti.log import EventLog

__all__ = ["CHECKPOINTS", "CHECKPOINT_KEY", "Proving", "extends"]

CHECKPOINTS = ("coniti", "checkpoints")
"""The namespace of the checkpoint events."""
CHECKPOINT_KEY = "checkpoint"
"""The metadata key whose values are the signed checkpoints (each a signed note's text)."""


def extends(log: EventLog, checkpoint: Checkpoint) -> None:
    """Check that the history of ``log`` extends ``checkpoint``: its tree at the checkpoint's size
    has the checkpoint's root. Raises :class:`CheckpointError` naming both sizes otherwise."""

    def check(tree: TreeReads, _: object, head: int) -> None:
        size = checkpoint.size
        if size > head:
            raise CheckpointError(
                f"the history has {head} events, fewer than the checkpoint's size {size}: it does not "
                "extend the checkpoint"
            )
        if tree.root(size) != checkpoint.root:
            raise CheckpointError(
                f"the history of {head} events does not extend the checkpoint of size {size}: its root "
                f"at size {size} differs"
            )

    log.proving(check)


class Proving:
    """The proof methods of a log store (a mixin of :class:`~coniti.impl.log.LogBackend`). Each
    reads one snapshot; none writes. Bad input (a seq or size past the head, sizes out of order)
    raises :class:`~coniti.errors.ProofError` with a one-line message; a tree that disagrees with
    the log raises :class:`~coniti.errors.StoreCorrupted`; a store of a layout before 6 opened
    read-only (no tree yet) raises :class:`~coniti.errors.StoreError` saying how to build it."""

    _log: EventLog

    if TYPE_CHECKING:

        def _stamp(self) -> tuple[str | None, str | None]: ...

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

    def set_meta_seq(self, namespace: tuple[str, ...], key: str, value: object) -> int:
        """Set metadata ``key`` of ``namespace`` to the JSON value ``value`` as ``set_meta`` does
        (stamped by the :meth:`audit` block) and return the seq of the event it appended."""
        actor, reason = self._stamp()
        return self._log.set_meta(namespace, key, value, actor=actor, reason=reason)

    @property
    def origin(self) -> str:
        """The origin line of this store's checkpoints: that of its latest checkpoint, else
        ``coniti/<store id>``."""
        note = self._log.get_meta(CHECKPOINTS, CHECKPOINT_KEY)
        if isinstance(note, str):
            return note.split("\n", 1)[0]
        return f"coniti/{self._log.store.store_id.hex()}"

    def checkpoint(self, signer: str, *, origin: str | None = None) -> str:
        """Sign the tree at the head with ``signer`` (a signer key, :func:`coniti.checkpoint.generate_key`)
        as a C2SP checkpoint of ``origin`` (default: :attr:`origin`) and keep it in the log as an
        audited event (actor and reason as for any write, :meth:`audit`); returns the signed note.
        Raises :class:`CheckpointError` for a malformed key or origin, and then writes nothing."""
        from coniti.checkpoint import Checkpoint, sign_checkpoint  # cryptography: on first use

        size, root = self.root()
        note = sign_checkpoint(Checkpoint(self.origin if origin is None else origin, size, root), signer)
        self.set_meta_seq(CHECKPOINTS, CHECKPOINT_KEY, note)
        return note

    def checkpoints(self) -> list[tuple[int, str]]:
        """Every checkpoint kept in this store, oldest first: ``(seq of its event, signed note)``."""
        return [
            (event.seq, event.value)
            for event in self._log.events()
            if event.kind == "meta" and event.namespace == CHECKPOINTS and event.key == CHECKPOINT_KEY
            and isinstance(event.value, str)
        ]

    def verify_checkpoint(self, note: str | bytes, verifier: str, *, origin: str | None = None) -> Checkpoint:
        """The checkpoint in ``note`` once its signature by ``verifier`` (a verifier key) holds, its
        origin is ``origin`` (default: :attr:`origin`) and this store's history extends it (its
        root at the checkpoint's size is the checkpoint's). Raises :class:`CheckpointError` with a
        one-line message otherwise; reads only."""
        from coniti.checkpoint import verify_checkpoint as open_checkpoint  # cryptography: on use

        checkpoint = open_checkpoint(note, verifier, origin=self.origin if origin is None else origin)
        extends(self._log, checkpoint)
        return checkpoint
