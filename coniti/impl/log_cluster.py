"""Cluster mode of :class:`~coniti.impl.log.LogBackend`: joining the stream, catching up, fresh reads.

:class:`ClusterNode` is a mixin of ``LogBackend``: ``LogBackend(path, cluster=Cluster(...))`` makes
the store at ``path`` this node's complete copy of the cluster's stream (``docs/cluster.md``,
:mod:`coniti.log.replica`). The cluster's stream is the log of record: the copy is folded from it in
order (an empty directory folds the whole stream at open). A write is decided against the node's
copy, published to the stream expecting its last sequence, decided again after a catch-up when
another node's write came first, and answered only once the stream has stored it on a quorum of
replicas and this node has committed it. Reads are local; :meth:`ClusterNode.refresh` (or
``fresh=True`` on ``get``, ``scan``, ``count``) folds other nodes' writes first; ``follow``
folds while it waits. Opening raises :class:`~coniti.errors.ClusterError` when the store is not the
stream's copy, :class:`~coniti.errors.ClusterUnavailable` when the stream cannot be reached.
``erase``, ``erase_meta`` and ``erase_namespace`` erase across the cluster: the content leaves
the stream's content bucket and every node's copy as it folds the receipt (``log/FORMAT.md`` §17.4).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from coniti.errors import CheckpointError, StoreError
from coniti.impl.proving import extends
from coniti.memory import (
    CountRequest,
    CountResult,
    GetRequest,
    GetResult,
    ScanRequest,
    ScanResult,
)
from coniti.proofs import CompactRange, leaf_hash

if TYPE_CHECKING:
    from coniti.cluster import Cluster
    from coniti.log import EventLog

__all__ = ["ClusterNode"]


class ClusterNode:
    """The cluster-mode part of ``LogBackend`` (see the module docstring)."""

    _log: EventLog
    cluster: Cluster | None
    _transport: Any
    _replica: Any
    folded = 0
    """How many events this handle folded from the stream (at open and in :meth:`refresh`)."""

    def _join(self, cluster: Cluster) -> None:
        """Connect, bind or check the store against the stream, then fold the stream."""
        from coniti.log.replica import Replica

        self.folded = 0
        self._transport = cluster.connect()
        log = self._log
        self._replica = Replica(self._transport, lambda: log.dbs)
        self._replica.attach(log.store)
        if cluster.checkpoint is not None and cluster.verifier is not None:
            self._check_extends(cluster.checkpoint, cluster.verifier)
        self.refresh()

    def _check_extends(self, note: str, verifier: str) -> None:
        """Refuse (:class:`CheckpointError`, nothing folded) a stream whose first ``size`` events
        (the signed checkpoint's), this node's copy then the stream's messages after it, do not
        have the checkpoint's root; the signature by ``verifier`` is checked first."""
        from coniti.checkpoint import verify_checkpoint  # cryptography: on use

        try:
            checkpoint = verify_checkpoint(note, verifier)
        except CheckpointError as e:
            raise CheckpointError(f"cluster checkpoint: {e}") from None
        name = self._transport.stream
        with self._log.store.read() as txn:
            pos = self._replica.position(txn)
        size = checkpoint.size
        if pos.event_seq >= size:
            try:
                extends(self._log, checkpoint)
            except CheckpointError as e:
                raise CheckpointError(f"node {self._log.store.path} of stream {name!r}: {e}") from None
            return
        edge = self._log.proving(lambda tree, _, head: CompactRange.from_nodes(tree, head))
        for event_hash in self._replica.event_hashes(pos, size):
            edge.append(leaf_hash(event_hash))
        if edge.size < size:
            raise CheckpointError(
                f"stream {name!r} holds {edge.size} events, fewer than the checkpoint's size {size}: "
                "it does not extend the checkpoint"
            )
        if edge.root() != checkpoint.root:
            raise CheckpointError(
                f"stream {name!r} does not extend the checkpoint of size {size}: the root of its "
                f"first {size} events differs (this node holds {pos.event_seq}; nothing folded)"
            )

    def _leave(self) -> None:
        """Detach this handle's replica hook and close its connection (nothing in single mode)."""
        transport, self._transport = self._transport, None
        if transport is not None:
            with contextlib.suppress(StoreError):  # a store already closed or forked
                self._log.store.replicate(None, replacing=self._replica)
            transport.close()

    def refresh(self) -> int:
        """Cluster mode: fold every message the stream holds beyond this node's copy (the stream's
        last sequence as of the call); how many events were folded. A single store: 0."""
        if self.cluster is None:
            return 0
        before = self._log.head().seq
        self._log.store.catch_up()
        self._log.forget_namespaces()
        folded = self._log.head().seq - before
        self.folded += folded
        return folded

    def get(self, request: GetRequest, *, fresh: bool = False) -> GetResult:
        """See :meth:`MemoryBackend.get`; ``fresh``: :meth:`refresh` first (cluster mode)."""
        if fresh:
            self.refresh()
        return super().get(request)  # type: ignore[misc, no-any-return]

    def scan(self, request: ScanRequest, *, fresh: bool = False) -> ScanResult:
        """See :meth:`MemoryBackend.scan`; ``fresh``: :meth:`refresh` first (cluster mode)."""
        if fresh:
            self.refresh()
        return super().scan(request)  # type: ignore[misc, no-any-return]

    def count(self, request: CountRequest, *, fresh: bool = False) -> CountResult:
        """See :meth:`MemoryBackend.count`; ``fresh``: :meth:`refresh` first (cluster mode)."""
        if fresh:
            self.refresh()
        return super().count(request)  # type: ignore[misc, no-any-return]
