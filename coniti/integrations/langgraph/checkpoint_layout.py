"""Where :class:`~coniti.integrations.langgraph.ConitiSaver` keeps LangGraph thread state in a coniti
memory: the one module that knows the layout (namespaces, record ids, timestamps, metadata keys).

Namespaces, under a prefix ``P`` (default ``("langgraph",)``)::

    P + ("threads",)                          one record per thread (id: the thread id), metadata
                                              {"kind": "thread", "ns": [checkpoint_ns, ...]}
    P + ("runs",)                             one record per run (id: the run id), metadata
                                              {"kind": "run", "at": [[thread_id, checkpoint_ns], ...]}
    P + ("thread", thread_id)                 the root checkpoint namespace ("") of a thread
    P + ("thread", thread_id, checkpoint_ns)  a subgraph's checkpoint namespace

A thread's checkpoints, their channel values and pending writes share one coniti namespace per
checkpoint namespace, so a checkpoint and the values it writes are one atomic
:class:`~coniti.memory.WriteRequest`, and reading a thread never touches another thread. Records in
a checkpoint namespace (``q`` is percent-encoding of every reserved character, so ids are
injective)::

    "latest"                             {"kind": "latest", "checkpoint": id}: the greatest
                                         checkpoint id of the namespace
    "c:" + id                            a checkpoint. blob: the serialised checkpoint without its
                                         channel values; metadata {"kind": "checkpoint",
                                         "checkpoint": id, "parent": id | null, "type": serde type,
                                         "versions": {channel: str(version)}, "metadata": LangGraph's
                                         checkpoint metadata (JSON)}
    "b:" + q(channel) + ":" + q(version) a channel value. blob: its serialised bytes; metadata
                                         {"kind": "blob", "channel", "version", "type"} (type
                                         "empty": the channel had no value, no blob)
    "w:" + q(id) + ":" + q(task) + ":" + idx
                                         a pending write of checkpoint ``id``. blob: the value;
                                         metadata {"kind": "write", "checkpoint", "task", "idx",
                                         "path", "channel", "type"}

Every record has no vector. The thread and run indexes let ``list``, ``delete_thread``,
``copy_thread``, ``prune`` and ``delete_for_runs`` visit only the namespaces they concern.

Timestamps: a checkpoint, the values it writes and its pending writes all carry
:func:`checkpoint_time` of the checkpoint id, the time written in the id: LangGraph's checkpoint
ids are UUIDv6, whose string order is time order, so for them time order is id order, and the
pending writes of a checkpoint are one time-range scan whichever of ``put`` and ``put_writes``
comes first. An id that is not a canonical UUIDv6 has time 0.0 (its writes are then found among
every such checkpoint of the namespace).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from coniti.actor import Note, TimeRange
from coniti.errors import ContractError
from coniti.memory import MemoryRecord, as_namespace

__all__ = [
    "BLOB",
    "CHECKPOINT",
    "EMPTY",
    "LATEST",
    "RUN",
    "THREAD",
    "WRITE",
    "ZERO_SLOT",
    "Layout",
    "before_range",
    "blob_id",
    "blob_record",
    "checkpoint_record",
    "checkpoint_record_id",
    "checkpoint_time",
    "latest_record",
    "moved",
    "run_record",
    "thread_record",
    "time_slot",
    "typed_of",
    "write_id",
    "write_record",
]

CHECKPOINT = "checkpoint"
BLOB = "blob"
WRITE = "write"
LATEST = "latest"
THREAD = "thread"
RUN = "run"
EMPTY = "empty"
"""The serde type of a channel that had no value (LangGraph's ``("empty", b"")``)."""

_UUID_EPOCH = 0x01B21DD213814000
"""100-nanosecond intervals from the UUID epoch (1582-10-15) to the Unix epoch."""


def _uuid6_time(checkpoint_id: str) -> float | None:
    if len(checkpoint_id) != 36 or checkpoint_id[14] != "6":
        return None
    try:
        u = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if str(u) != checkpoint_id:  # upper case or another spelling: its string order is not time's
        return None
    ticks = ((u.int >> 80) << 12) | ((u.int >> 64) & 0x0FFF)
    return max(0.0, (ticks - _UUID_EPOCH) / 1e7)


def checkpoint_time(checkpoint_id: str) -> float:
    """The time (epoch seconds, never negative) written in a canonical UUIDv6 ``checkpoint_id``;
    0.0 for any other id. Monotone: for two UUIDv6 ids, ``a < b`` implies ``time(a) <= time(b)``."""
    t = _uuid6_time(checkpoint_id)
    return 0.0 if t is None else t


def before_range(checkpoint_id: str) -> TimeRange | None:
    """A time range holding every checkpoint (and its records) whose id is below ``checkpoint_id``,
    or None (everything) when the id is not a UUIDv6: the other ids are all at time 0.0, at or
    before every UUIDv6 time."""
    t = _uuid6_time(checkpoint_id)
    return None if t is None else TimeRange(end=math.nextafter(t, math.inf))


def time_slot(checkpoint_id: str) -> TimeRange:
    """The time range holding exactly the records timestamped :func:`checkpoint_time` of the id."""
    t = checkpoint_time(checkpoint_id)
    return TimeRange(start=t, end=math.nextafter(t, math.inf))


ZERO_SLOT = time_slot("")
"""The time slot of every checkpoint whose id is not a UUIDv6 (time 0.0)."""


def _q(part: str) -> str:
    return quote(part, safe="")


def blob_id(channel: str, version: Any) -> str:
    """The record id of ``channel``'s value at ``version`` (versions compare as text)."""
    return f"b:{_q(channel)}:{_q(str(version))}"


def write_id(checkpoint_id: str, task_id: str, idx: int) -> str:
    """The record id of pending write ``idx`` of ``task_id`` on checkpoint ``checkpoint_id``."""
    return f"w:{_q(checkpoint_id)}:{_q(task_id)}:{idx}"


def checkpoint_record_id(checkpoint_id: str) -> str:
    return f"c:{checkpoint_id}"


@dataclass(frozen=True)
class Layout:
    """The namespaces of one saver's prefix."""

    prefix: tuple[str, ...]

    @classmethod
    def of(cls, prefix: Sequence[str]) -> Layout:
        try:
            return cls(as_namespace(prefix))
        except ContractError as exc:
            raise ContractError(f"prefix: {exc}") from None

    @property
    def threads(self) -> tuple[str, ...]:
        return (*self.prefix, "threads")

    @property
    def runs(self) -> tuple[str, ...]:
        return (*self.prefix, "runs")

    def namespace(self, thread_id: str, checkpoint_ns: str) -> tuple[str, ...]:
        """The coniti namespace of one checkpoint namespace of a thread."""
        base = (*self.prefix, THREAD, thread_id)
        return (*base, checkpoint_ns) if checkpoint_ns else base


def _record(
    namespace: tuple[str, ...], record_id: str, text: str, timestamp: float,
    metadata: dict[str, Any], blob: bytes | None = None,
) -> MemoryRecord:
    return MemoryRecord(
        note=Note(id=record_id, text=text, timestamp=timestamp, metadata=metadata),
        vector=None,
        namespace=namespace,
        blob=blob,
    )


def checkpoint_record(
    namespace: tuple[str, ...], checkpoint_id: str, parent_id: str | None,
    typed: tuple[str, bytes], versions: dict[str, str], metadata: dict[str, Any],
) -> MemoryRecord:
    step, source = metadata.get("step"), metadata.get("source")
    return _record(
        namespace, checkpoint_record_id(checkpoint_id),
        f"checkpoint {checkpoint_id} (step {step}, {source})", checkpoint_time(checkpoint_id),
        {
            "kind": CHECKPOINT, "checkpoint": checkpoint_id, "parent": parent_id,
            "type": typed[0], "versions": versions, "metadata": metadata,
        },
        typed[1],
    )


def blob_record(
    namespace: tuple[str, ...], checkpoint_id: str, channel: str, version: Any,
    typed: tuple[str, bytes],
) -> MemoryRecord:
    kind, data = typed
    try:
        return _record(
            namespace, blob_id(channel, version), f"channel {channel} at version {version}",
            checkpoint_time(checkpoint_id),
            {"kind": BLOB, "channel": channel, "version": str(version), "type": kind},
            None if kind == EMPTY else data,
        )
    except ContractError as exc:
        raise ContractError(f"checkpoint {checkpoint_id}, channel {channel!r}: {exc}") from None


def write_record(
    namespace: tuple[str, ...], checkpoint_id: str, task_id: str, task_path: str, idx: int,
    channel: str, typed: tuple[str, bytes],
) -> MemoryRecord:
    try:
        return _record(
            namespace, write_id(checkpoint_id, task_id, idx),
            f"write to {channel} by task {task_id}", checkpoint_time(checkpoint_id),
            {
                "kind": WRITE, "checkpoint": checkpoint_id, "task": task_id, "idx": idx,
                "path": task_path, "channel": channel, "type": typed[0],
            },
            typed[1],
        )
    except ContractError as exc:
        raise ContractError(
            f"write {idx} of task {task_id!r} to channel {channel!r} (checkpoint {checkpoint_id}): {exc}"
        ) from None


def latest_record(namespace: tuple[str, ...], checkpoint_id: str) -> MemoryRecord:
    return _record(
        namespace, LATEST, f"latest checkpoint {checkpoint_id}", checkpoint_time(checkpoint_id),
        {"kind": LATEST, "checkpoint": checkpoint_id},
    )


def thread_record(
    namespace: tuple[str, ...], thread_id: str, checkpoint_ns: Sequence[str], timestamp: float
) -> MemoryRecord:
    return _record(
        namespace, thread_id, f"thread {thread_id}", timestamp,
        {"kind": THREAD, "ns": sorted(set(checkpoint_ns))},
    )


def run_record(
    namespace: tuple[str, ...], run_id: str, at: Sequence[tuple[str, str]], timestamp: float
) -> MemoryRecord:
    return _record(
        namespace, run_id, f"run {run_id}", timestamp,
        {"kind": RUN, "at": [list(pair) for pair in sorted(set(at))]},
    )


def moved(record: MemoryRecord, namespace: tuple[str, ...]) -> MemoryRecord:
    """``record`` (note, blob) in another namespace."""
    return MemoryRecord(note=record.note, vector=None, namespace=namespace, blob=record.blob)


def typed_of(record: MemoryRecord) -> tuple[str, bytes]:
    """The ``(serde type, bytes)`` a checkpoint, blob or write record holds."""
    return record.note.metadata["type"], record.blob or b""
