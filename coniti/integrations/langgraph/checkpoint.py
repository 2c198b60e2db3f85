"""ConitiSaver: LangGraph's :class:`~langgraph.checkpoint.base.BaseCheckpointSaver` on a coniti
memory, so a graph's thread state is durable, replayable to any past point and audited.

Contracts:

* **Atomicity.** A ``put`` is one :class:`~coniti.memory.WriteRequest`: the checkpoint, the channel
  values it writes and the namespace's ``latest`` pointer, all or nothing, one audit stamp (wrap
  calls in ``LogBackend.audit(actor=..., reason=...)`` to stamp them). ``put_writes`` is one write
  too. ``delete_for_runs`` and ``prune`` are one write per checkpoint namespace; ``delete_thread``
  one ``clear`` per checkpoint namespace; ``copy_thread`` one write per checkpoint namespace.
* **Bytes.** Checkpoints, channel values and pending writes are serialised by the saver's ``serde``
  (LangGraph's ``JsonPlusSerializer`` by default) and stored as the records' binary payload
  (``MemoryRecord.blob``), without vectors. Checkpoint metadata is stored as JSON (it must be
  JSON-serialisable, as LangGraph's other savers require), readable in coniti's history.
* **Cost.** ``get_tuple`` is at most three index lookups and one time-range scan of the
  checkpoint's own records; ``list`` reads only the checkpoint namespaces it is asked for, back in
  time from ``before`` as far as the tuples taken need (see :meth:`ConitiSaver.list`). See
  :mod:`coniti.integrations.langgraph.checkpoint_layout` for the layout.
* **Concurrency.** The ``latest`` pointer and the thread and run indexes are updated by
  compare-and-set and retried, so concurrent writers (threads, tasks, processes) never lose an
  update. Pending writes with a non-negative index are written once (a repeat is ignored, as
  LangGraph's savers do); special writes (errors, interrupts) are replaced.
* **Deleting versus erasing.** ``delete_thread``, ``prune`` and ``delete_for_runs`` are ordinary
  deletes: the thread is gone from every read, and coniti's history and ``at(seq)`` views still
  hold it. :meth:`ConitiSaver.erase_thread` erases its content from the log itself (a
  ``LogBackend`` only), with one receipt per record.
* **Async.** Every ``a*`` method runs its sync twin on a worker thread (context variables, hence
  audit stamps, are carried along).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from coniti.actor import TimeRange
from coniti.errors import ContractError, NotSupported, VersionConflict
from coniti.events import EraseResult
from coniti.impl.log import LogBackend
from coniti.integrations.langgraph.checkpoint_layout import (
    BLOB,
    CHECKPOINT,
    EMPTY,
    LATEST,
    WRITE,
    ZERO_SLOT,
    Layout,
    before_range,
    blob_id,
    blob_record,
    checkpoint_record,
    checkpoint_record_id,
    latest_record,
    moved,
    run_record,
    thread_record,
    time_slot,
    typed_of,
    write_record,
)
from coniti.memory import (
    ClearRequest,
    DeleteOp,
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    UpsertOp,
    WriteRequest,
    unique_ids,
)

__all__ = ["ConitiSaver"]

_Chooser = Callable[[dict[str, MemoryRecord], dict[str, MemoryRecord]], set[str]]
"""Given a namespace's checkpoints (by checkpoint id) and channel values (by record id), the
checkpoint ids to remove."""

PRUNE_STRATEGIES = ("keep_latest", "delete")


def _id(value: Any, name: str) -> str:
    """``value`` as a thread or checkpoint id: a non-empty string (an int is written as text)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ContractError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _configured(configurable: dict[str, Any], key: str = "thread_id") -> str:
    return _id(configurable.get(key), f"config['configurable']['{key}']")


def _checkpoint_ns(configurable: dict[str, Any]) -> str:
    value = configurable.get("checkpoint_ns", "")
    if not isinstance(value, str):
        raise ContractError(
            f"config['configurable']['checkpoint_ns'] must be a string, got {type(value).__name__}"
        )
    return value


def _json_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    try:
        out: dict[str, Any] = orjson.loads(orjson.dumps(metadata))
    except TypeError as exc:
        raise ContractError(f"checkpoint metadata must be JSON-serialisable: {exc}") from None
    return out


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id,
        }
    }


def _kind(record: MemoryRecord) -> Any:
    return record.note.metadata.get("kind")


class ConitiSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on ``memory``: a :class:`~coniti.memory.MemoryBackend` that declares
    ``supports_write`` (``LogBackend``, ``InMemoryBackend``), or a path, opened as a
    :class:`~coniti.impl.log.LogBackend` that the saver owns and closes. A read-only memory (a
    ``LogBackend.at(seq)`` view, a store opened read-only) serves reads: LangGraph state exactly as
    it was at that point; writes raise :class:`~coniti.errors.ReadOnlyError`.

    ``prefix`` (default ``("langgraph",)``) is the namespace prefix everything is kept under;
    ``serde`` LangGraph's serializer protocol (default ``JsonPlusSerializer``). Channel versions
    are strings ``"<counter>.<random>"``, as ``InMemorySaver`` makes them, so that two forks of one
    checkpoint never write the same version of a channel.

    Beyond LangGraph's interface: :meth:`erase_thread`, :meth:`close` and use as a context manager.
    """

    def __init__(
        self,
        memory: MemoryBackend | str | os.PathLike[str],
        *,
        prefix: Sequence[str] = ("langgraph",),
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self._layout = Layout.of(prefix)
        self._owned = isinstance(memory, str | os.PathLike)
        if isinstance(memory, str | os.PathLike):
            memory = LogBackend(memory)
        elif not isinstance(memory, MemoryBackend):
            raise ContractError(
                f"memory must be a MemoryBackend or a store path, got {type(memory).__name__}"
            )
        if not memory.read_only and not memory.supports_write:
            raise NotSupported(
                f"ConitiSaver needs a memory backend with write (upsert, compare-and-set); the "
                f"{memory.kind!r} backend has none"
            )
        self.memory: MemoryBackend = memory

    def __repr__(self) -> str:
        return f"ConitiSaver({self.memory!r}, prefix={self._layout.prefix!r})"

    def close(self) -> None:
        """Close the memory if the saver opened it (from a path); otherwise do nothing."""
        if self._owned:
            self.memory.close()

    def __enter__(self) -> ConitiSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads ---------------------------------------------------------------------------------

    def _get(self, namespace: tuple[str, ...], ids: list[str]) -> list[MemoryRecord]:
        if not ids:
            return []
        return self.memory.get(GetRequest(ids=ids, namespace=namespace)).records

    def _one(self, namespace: tuple[str, ...], record_id: str) -> MemoryRecord | None:
        found = self._get(namespace, [record_id])
        return found[0] if found else None

    def _namespaces_of(self, thread_id: str) -> list[str]:
        """The checkpoint namespaces the thread index lists for ``thread_id`` (sorted)."""
        found = self._one(self._layout.threads, thread_id)
        return [] if found is None else list(found.note.metadata["ns"])

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``), or the namespace's latest when it
        names none; None when there is no such checkpoint. Pending writes in
        ``writes_sort_key`` order."""
        conf = config["configurable"]
        thread_id, checkpoint_ns = _configured(conf), _checkpoint_ns(conf)
        namespace = self._layout.namespace(thread_id, checkpoint_ns)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            latest = self._one(namespace, LATEST)
            if latest is None:
                return None
            checkpoint_id = latest.note.metadata["checkpoint"]
        record = self._one(namespace, checkpoint_record_id(checkpoint_id))
        return None if record is None else self._tuple(thread_id, checkpoint_ns, namespace, record)

    def _tuple(
        self, thread_id: str, checkpoint_ns: str, namespace: tuple[str, ...], record: MemoryRecord
    ) -> CheckpointTuple:
        meta = record.note.metadata
        checkpoint_id: str = meta["checkpoint"]
        body: dict[str, Any] = self.serde.loads_typed(typed_of(record))
        versions: dict[str, Any] = body["channel_versions"]
        # The checkpoint's time slot holds the values it wrote and its pending writes.
        slot = self.memory.scan(
            self.memory.scan_request(time_slot(checkpoint_id), namespace)
        ).records
        by_id = {r.id: r for r in slot}
        wanted = [blob_id(ch, v) for ch, v in versions.items()]
        by_id.update((r.id, r) for r in self._get(namespace, [i for i in wanted if i not in by_id]))
        values: dict[str, Any] = {}
        for (channel, _), rid in zip(versions.items(), wanted, strict=True):
            blob = by_id.get(rid)
            if blob is not None and _kind(blob) == BLOB and blob.note.metadata["type"] != EMPTY:
                values[channel] = self.serde.loads_typed(typed_of(blob))
        writes = sorted(
            (r for r in slot if _kind(r) == WRITE and r.note.metadata["checkpoint"] == checkpoint_id),
            key=lambda r: writes_sort_key(
                r.note.metadata["path"], r.note.metadata["task"], r.note.metadata["idx"]
            ),
        )
        pending: list[PendingWrite] = [
            (r.note.metadata["task"], r.note.metadata["channel"], self.serde.loads_typed(typed_of(r)))
            for r in writes
        ]
        parent = meta["parent"]
        return CheckpointTuple(
            config=_config(thread_id, checkpoint_ns, checkpoint_id),
            checkpoint=cast(Checkpoint, {**body, "channel_values": values}),
            metadata=cast(CheckpointMetadata, meta["metadata"]),
            parent_config=None if parent is None else _config(thread_id, checkpoint_ns, parent),
            pending_writes=pending,
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id) within each checkpoint namespace: of the
        thread ``config`` names (of its ``checkpoint_ns`` when given, else of each of the thread's
        namespaces in order; only its ``checkpoint_id`` when given), or of every thread when
        ``config`` is None. ``filter``: metadata keys that must equal the values given;
        ``before``: only checkpoint ids below its ``checkpoint_id``; ``limit``: at most that
        many in all. Lazy: a namespace of UUIDv6 checkpoint ids (LangGraph's) is read back from
        ``before`` (or its latest checkpoint) in growing time windows, as far as the tuples taken
        need."""
        if limit is not None and limit <= 0:
            return
        targets: list[tuple[str, str]] = []
        only: str | None = None
        if config is None:
            for thread in self.memory.iter_all(namespace=self._layout.threads):
                targets.extend((thread.id, ns) for ns in thread.note.metadata["ns"])
        else:
            conf = config["configurable"]
            thread_id = _configured(conf)
            if conf.get("checkpoint_ns") is None:
                targets.extend((thread_id, ns) for ns in self._namespaces_of(thread_id))
            else:
                targets.append((thread_id, _checkpoint_ns(conf)))
            only = get_checkpoint_id(config)
        before_id = None if before is None else get_checkpoint_id(before)
        left = limit
        for thread_id, checkpoint_ns in targets:
            namespace = self._layout.namespace(thread_id, checkpoint_ns)
            if only:
                found: Iterable[MemoryRecord] = self._get(namespace, [checkpoint_record_id(only)])
            else:
                found = self._newest_first(namespace, before_id)
            for record in found:
                meta = record.note.metadata
                if before_id is not None and meta["checkpoint"] >= before_id:
                    continue
                if filter and not all(meta["metadata"].get(k) == v for k, v in filter.items()):
                    continue
                yield self._tuple(thread_id, checkpoint_ns, namespace, record)
                if left is not None:
                    left -= 1
                    if left == 0:
                        return

    def _newest_first(self, namespace: tuple[str, ...], before_id: str | None) -> Iterator[MemoryRecord]:
        """The checkpoint records of ``namespace``, greatest id first, from below ``before_id``'s
        time on (the caller drops ids not below it). When every checkpoint there has a UUIDv6 id
        (none at time 0.0), time order is id order and the namespace is read back in time windows
        that grow fourfold, so the first tuples cost a read of their neighbourhood only;
        otherwise it is read whole and sorted."""
        scan = self.memory.iter_all
        kind = {"kind": CHECKPOINT}
        upper = None if before_id is None else before_range(before_id)
        if self.memory.count(self.memory.count_request(ZERO_SLOT, namespace, filter=kind)).count:
            found = list(scan(upper, namespace, filter=kind))
            yield from sorted(found, key=lambda r: str(r.note.metadata["checkpoint"]), reverse=True)
            return
        if upper is not None and upper.end is not None:
            hi = upper.end
        else:
            latest = self._one(namespace, LATEST)
            if latest is None:
                return
            hi = time_slot(latest.note.metadata["checkpoint"]).end or 0.0
        width = 1.0
        while hi > 0.0:
            lo = max(0.0, hi - width)
            window = list(scan(TimeRange(start=lo, end=hi), namespace, filter=kind))
            yield from sorted(window, key=lambda r: str(r.note.metadata["checkpoint"]), reverse=True)
            hi, width = lo, width * 4

    # -- writes --------------------------------------------------------------------------------

    def _index(
        self,
        namespace: tuple[str, ...],
        record_id: str,
        build: Callable[[MemoryRecord | None], MemoryRecord | None],
    ) -> None:
        """Compare-and-set the index record ``record_id``: ``build(current)`` is the record to
        write, or None when ``current`` already says enough. Retried until it holds."""
        while True:
            current = self._one(namespace, record_id)
            new = build(current)
            if new is None:
                return
            expect = {record_id: None if current is None else current.version}
            try:
                self.memory.write(WriteRequest(ops=[UpsertOp(record=new)], namespace=namespace, expect=expect))
                return
            except VersionConflict as exc:
                if exc.id != record_id:
                    raise

    def _register(self, thread_id: str, checkpoint_ns: str, run_id: Any = None) -> None:
        """List ``checkpoint_ns`` in the thread index (and the pair in the run index for
        ``run_id``) before anything is written there, so deleting the thread finds it."""
        threads = self._layout.threads

        def thread(current: MemoryRecord | None) -> MemoryRecord | None:
            if current is None:
                return thread_record(threads, thread_id, [checkpoint_ns], time.time())
            listed = current.note.metadata["ns"]
            if checkpoint_ns in listed:
                return None
            return thread_record(threads, thread_id, [*listed, checkpoint_ns], current.note.timestamp)

        self._index(threads, thread_id, thread)
        if isinstance(run_id, str) and run_id:
            runs = self._layout.runs
            pair = (thread_id, checkpoint_ns)

            def run(current: MemoryRecord | None) -> MemoryRecord | None:
                if current is None:
                    return run_record(runs, run_id, [pair], time.time())
                at = [(t, n) for t, n in current.note.metadata["at"]]
                if pair in at:
                    return None
                return run_record(runs, run_id, [*at, pair], current.note.timestamp)

            self._index(runs, run_id, run)

    def _write_with_latest(
        self, namespace: tuple[str, ...], ops: Sequence[UpsertOp | DeleteOp], candidate: str | None
    ) -> None:
        """Write ``ops`` and, in the same request, raise the ``latest`` pointer to ``candidate``
        when it is greater (compare-and-set on the pointer, retried)."""
        while True:
            current = self._one(namespace, LATEST)
            all_ops = list(ops)
            expect: dict[str, int | None] = {}
            if candidate is not None and (
                current is None or current.note.metadata["checkpoint"] < candidate
            ):
                all_ops.append(UpsertOp(record=latest_record(namespace, candidate)))
                expect[LATEST] = None if current is None else current.version
            if not all_ops:
                return
            try:
                self.memory.write(WriteRequest(ops=all_ops, namespace=namespace, expect=expect))
                return
            except VersionConflict as exc:
                if exc.id != LATEST:
                    raise

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` (its parent: the ``checkpoint_id`` of ``config``) with the values of
        the channels in ``new_versions``, as one atomic write; returns the checkpoint's config."""
        conf = config["configurable"]
        thread_id, checkpoint_ns = _configured(conf), _checkpoint_ns(conf)
        namespace = self._layout.namespace(thread_id, checkpoint_ns)
        checkpoint_id = checkpoint["id"]
        parent = conf.get("checkpoint_id") or None
        meta = _json_metadata(cast(dict[str, Any], get_serializable_checkpoint_metadata(config, metadata)))
        body = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values")  # type: ignore[assignment]
        records = [
            blob_record(
                namespace, checkpoint_id, channel, version,
                self.serde.dumps_typed(values[channel]) if channel in values else (EMPTY, b""),
            )
            for channel, version in new_versions.items()
        ]
        records.append(
            checkpoint_record(
                namespace, checkpoint_id, parent, self.serde.dumps_typed(body),
                {ch: str(v) for ch, v in checkpoint["channel_versions"].items()}, meta,
            )
        )
        self._register(thread_id, checkpoint_ns, meta.get("run_id"))
        self._write_with_latest(namespace, [UpsertOp(record=r) for r in records], checkpoint_id)
        return _config(thread_id, checkpoint_ns, checkpoint_id)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store ``writes`` of task ``task_id`` for the checkpoint ``config`` names, as one write.
        A write whose (task, index) is stored already is kept as it is; special channels (errors,
        interrupts: negative indexes) are replaced."""
        conf = config["configurable"]
        thread_id, checkpoint_ns = _configured(conf), _checkpoint_ns(conf)
        checkpoint_id = _configured(conf, "checkpoint_id")
        namespace = self._layout.namespace(thread_id, checkpoint_ns)
        chosen: dict[str, MemoryRecord] = {}
        regular: list[str] = []
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            record = write_record(
                namespace, checkpoint_id, task_id, task_path, index, channel,
                self.serde.dumps_typed(value),
            )
            chosen[record.id] = record
            if index >= 0:
                regular.append(record.id)
        if not chosen:
            return
        self._register(thread_id, checkpoint_ns)
        while True:
            stored = {r.id for r in self._get(namespace, regular)}
            ops = [UpsertOp(record=r) for rid, r in chosen.items() if rid not in stored]
            if not ops:
                return
            expect: dict[str, int | None] = {rid: None for rid in regular if rid not in stored}
            try:
                self.memory.write(WriteRequest(ops=ops, namespace=namespace, expect=expect))
                return
            except VersionConflict as exc:
                if exc.id not in expect:
                    raise

    # -- deleting, copying, pruning ------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of ``thread_id`` (one ``clear`` per checkpoint
        namespace, then its index record). An unknown thread is a no-op."""
        thread_id = _id(thread_id, "thread_id")
        for checkpoint_ns in self._namespaces_of(thread_id):
            self.memory.clear(ClearRequest(namespace=self._layout.namespace(thread_id, checkpoint_ns)))
        self.memory.delete(DeleteRequest(ids=[thread_id], namespace=self._layout.threads))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of one thread to another (same ids, so the
        order, parents and metadata are kept), merged into what the target holds; one write per
        checkpoint namespace. An unknown source copies nothing."""
        source = _id(source_thread_id, "source_thread_id")
        target = _id(target_thread_id, "target_thread_id")
        for checkpoint_ns in self._namespaces_of(source):
            records = list(self.memory.iter_all(namespace=self._layout.namespace(source, checkpoint_ns)))
            if not records:
                continue
            into = self._layout.namespace(target, checkpoint_ns)
            checkpoints = [r for r in records if _kind(r) == CHECKPOINT]
            self._register(target, checkpoint_ns)
            for run_id in sorted({
                r.note.metadata["metadata"].get("run_id") for r in checkpoints
            } - {None}):
                self._register(target, checkpoint_ns, run_id)
            ops = [UpsertOp(record=moved(r, into)) for r in records if _kind(r) != LATEST]
            newest = max((r.note.metadata["checkpoint"] for r in checkpoints), default=None)
            self._write_with_latest(into, ops, newest)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint whose metadata ``run_id`` is one of ``run_ids``, with its pending
        writes and the channel values no remaining checkpoint refers to, in every thread the run
        index lists for them (one write per checkpoint namespace). Unknown runs are a no-op."""
        runs = self._layout.runs
        wanted = unique_ids(r for r in run_ids if isinstance(r, str) and r)
        found = self._get(runs, wanted)
        places: dict[tuple[str, str], set[str]] = {}
        for run in found:
            for thread_id, checkpoint_ns in run.note.metadata["at"]:
                places.setdefault((thread_id, checkpoint_ns), set()).add(run.id)
        for (thread_id, checkpoint_ns), doomed_runs in places.items():

            def of_runs(
                checkpoints: dict[str, MemoryRecord], _: dict[str, MemoryRecord],
                doomed_runs: set[str] = doomed_runs,
            ) -> set[str]:
                return {
                    cid for cid, r in checkpoints.items()
                    if r.note.metadata["metadata"].get("run_id") in doomed_runs
                }

            self._remove(self._layout.namespace(thread_id, checkpoint_ns), of_runs)
        if found:
            self.memory.delete(DeleteRequest(ids=[r.id for r in found], namespace=runs))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep, in each checkpoint namespace of each thread, the latest checkpoint
        and its pending writes, plus, for every ``DeltaChannel`` it names in its metadata
        (``counters_since_delta_snapshot``), each ancestor back to the nearest one that stores the
        channel's value, so delta state still reconstructs; delete the rest and every channel
        value no kept checkpoint refers to. ``"delete"``: :meth:`delete_thread`. Unknown threads are
        a no-op; another strategy raises :class:`~coniti.errors.ContractError`."""
        if strategy not in PRUNE_STRATEGIES:
            raise ContractError(f"strategy must be 'keep_latest' or 'delete', got {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            thread_id = _id(thread_id, "thread_id")
            for checkpoint_ns in self._namespaces_of(thread_id):
                self._remove(self._layout.namespace(thread_id, checkpoint_ns), _all_but_latest)

    def _remove(self, namespace: tuple[str, ...], choose: _Chooser) -> None:
        """Delete the checkpoints ``choose`` picks, their pending writes and every channel value no
        remaining checkpoint refers to, and move ``latest`` to the greatest remaining id, in one
        write (compare-and-set on ``latest``, retried)."""
        while True:
            checkpoints: dict[str, MemoryRecord] = {}
            blobs: dict[str, MemoryRecord] = {}
            writes: list[MemoryRecord] = []
            latest: MemoryRecord | None = None
            for record in self.memory.iter_all(namespace=namespace):
                kind = _kind(record)
                if kind == CHECKPOINT:
                    checkpoints[record.note.metadata["checkpoint"]] = record
                elif kind == BLOB:
                    blobs[record.id] = record
                elif kind == WRITE:
                    writes.append(record)
                elif kind == LATEST:
                    latest = record
            doomed = choose(checkpoints, blobs) & checkpoints.keys()
            if not doomed:
                return
            kept = [r for cid, r in checkpoints.items() if cid not in doomed]
            referenced = {
                blob_id(ch, v) for r in kept for ch, v in r.note.metadata["versions"].items()
            }
            ops: list[UpsertOp | DeleteOp] = [DeleteOp(id=checkpoint_record_id(c)) for c in sorted(doomed)]
            ops += [DeleteOp(id=w.id) for w in writes if w.note.metadata["checkpoint"] in doomed]
            ops += [DeleteOp(id=b) for b in blobs if b not in referenced]
            expect: dict[str, int | None] = {}
            if latest is not None:
                expect[LATEST] = latest.version
                newest = max((r.note.metadata["checkpoint"] for r in kept), default=None)
                if newest is None:
                    ops.append(DeleteOp(id=LATEST))
                elif newest != latest.note.metadata["checkpoint"]:
                    ops.append(UpsertOp(record=latest_record(namespace, newest)))
            try:
                self.memory.write(WriteRequest(ops=ops, namespace=namespace, expect=expect))
                return
            except VersionConflict as exc:
                if exc.id != LATEST:
                    raise

    # -- erasure (LogBackend) ------------------------------------------------------------------

    def erase_thread(self, thread_id: str, *, reason: str) -> dict[tuple[str, ...], EraseResult]:
        """Erase the content of every record the thread ever had (checkpoints, values, writes,
        every version, also deleted ones) from the log and from every read, with ``reason``
        (required), and remove what is live; likewise the thread's index record, and the run
        index records of its runs (each rewritten afterwards with its other threads, if any).
        Returns the receipt of each coniti namespace erased (:class:`~coniti.events.EraseResult`:
        one ``erase`` event per record id). The thread's namespaces are found in the thread
        index's history, so a thread deleted before is erased too. Record ids and namespaces (so
        the thread id) stay in the log's envelopes, as every erasure keeps them. Needs a
        :class:`~coniti.impl.log.LogBackend` (:class:`~coniti.errors.NotSupported` otherwise);
        the freed bytes leave the data file at ``LogBackend.compact()``. Reads the whole log once
        per checkpoint namespace."""
        memory = self.memory
        if not isinstance(memory, LogBackend):
            raise NotSupported(f"erase_thread needs a LogBackend; the memory is {memory.kind!r}")
        thread_id = _id(thread_id, "thread_id")
        threads = self._layout.threads
        listed: set[str] = set()
        for event in memory.history(thread_id, threads):
            if event.kind == "put" and event.record is not None:
                listed.update(event.record.note.metadata["ns"])
        receipts: dict[tuple[str, ...], EraseResult] = {}
        run_ids: set[str] = set()
        for checkpoint_ns in sorted(listed):
            namespace = self._layout.namespace(thread_id, checkpoint_ns)
            puts = [e for e in memory.events(namespace=namespace) if e.kind == "put" and e.id]
            for e in puts:
                if e.record is not None and _kind(e.record) == CHECKPOINT:
                    run_id = e.record.note.metadata["metadata"].get("run_id")
                    if isinstance(run_id, str) and run_id:
                        run_ids.add(run_id)
            ids = unique_ids(e.id for e in puts if e.id)
            if ids:
                receipts[namespace] = memory.erase(ids, namespace=namespace, reason=reason)
        if listed:
            receipts[threads] = memory.erase([thread_id], namespace=threads, reason=reason)
        if run_ids:
            self._erase_runs_of(thread_id, sorted(run_ids), reason, receipts)
        return receipts

    def _erase_runs_of(
        self, thread_id: str, run_ids: Sequence[str], reason: str,
        receipts: dict[tuple[str, ...], EraseResult],
    ) -> None:
        """Erase the run index records ``run_ids``, then put back, for each, the places in other
        threads it listed."""
        memory = self.memory
        assert isinstance(memory, LogBackend)
        runs = self._layout.runs
        others = {
            r.id: [(t, n) for t, n in r.note.metadata["at"] if t != thread_id]
            for r in self._get(runs, list(run_ids))
        }
        receipts[runs] = memory.erase(list(run_ids), namespace=runs, reason=reason)
        now = time.time()
        for run_id, places in others.items():
            if not places:
                continue

            def rewrite(
                current: MemoryRecord | None, run_id: str = run_id, places: list[tuple[str, str]] = places
            ) -> MemoryRecord:
                held = [] if current is None else [(t, n) for t, n in current.note.metadata["at"]]
                return run_record(runs, run_id, [*places, *held], now)

            self._index(runs, run_id, rewrite)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """``"<counter>.<random>"`` after ``current`` (a string of that form, an int or None), as
        ``InMemorySaver`` makes them: increasing, and distinct across forks."""
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(current.split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"

    # -- async twins: the sync call on a worker thread ---------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, computed on a worker thread, then yielded."""
        found = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)]
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def aerase_thread(self, thread_id: str, *, reason: str) -> dict[tuple[str, ...], EraseResult]:
        return await asyncio.to_thread(lambda: self.erase_thread(thread_id, reason=reason))


def _all_but_latest(checkpoints: dict[str, MemoryRecord], blobs: dict[str, MemoryRecord]) -> set[str]:
    """Every checkpoint but the latest and the ancestors its delta channels need (see
    :meth:`ConitiSaver.prune`)."""
    if not checkpoints:
        return set()
    current = max(checkpoints)
    keep = {current}
    meta = checkpoints[current].note.metadata
    delta = set(meta["metadata"].get("counters_since_delta_snapshot") or {})
    while delta:
        record = checkpoints[current]
        versions = record.note.metadata["versions"]
        for channel in [c for c in delta if c in versions]:
            blob = blobs.get(blob_id(channel, versions[channel]))
            if blob is not None and blob.note.metadata["type"] != EMPTY:
                delta.discard(channel)
        parent = record.note.metadata["parent"]
        if not delta or parent not in checkpoints:
            break
        current = parent
        keep.add(current)
    return set(checkpoints) - keep
