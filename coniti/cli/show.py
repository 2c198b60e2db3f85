"""How records and events look on the command line, for people and as JSON.

Record JSON leaves out the vector and the blob (``dump`` writes them); it carries ``dim`` and
``dtype`` (None without a vector) and ``blob_bytes`` (None without a blob) instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from coniti.cli.parse import format_namespace, format_time, iso_time

if TYPE_CHECKING:
    from coniti.cli.output import Output
    from coniti.events import Event
    from coniti.memory import MemoryRecord

__all__ = ["event_json", "event_line", "record_json", "show_history", "show_record", "show_records"]


def record_json(record: MemoryRecord) -> dict[str, Any]:
    """A record without its vector: id, namespace, timestamp (and ISO time), text, metadata, ..."""
    note = record.note
    return {
        "id": note.id,
        "namespace": list(record.namespace),
        "timestamp": note.timestamp,
        "time": iso_time(note.timestamp),
        "text": note.text,
        "metadata": note.metadata,
        "embedding_id": record.embedding_id,
        "dim": None if record.vector is None else int(record.vector.shape[0]),
        "dtype": None if record.vector is None else record.vector.dtype.name,
        "blob_bytes": None if record.blob is None else len(record.blob),
        "version": record.version,
        "expires_at": record.expires_at,
    }


def show_record(out: Output, record: MemoryRecord) -> None:
    """One record as a key/value table (its expiry and blob only when it has them; ``vector: none``
    without a vector)."""
    note = record.note
    vector = record.vector
    expiry = [] if record.expires_at is None else [("expires", format_time(record.expires_at) + " UTC")]
    blob = [] if record.blob is None else [("blob", f"{len(record.blob):,} bytes")]
    out.fields(
        [
            ("id", note.id),
            ("namespace", format_namespace(record.namespace)),
            ("time", format_time(note.timestamp) + " UTC"),
            ("text", note.text),
            ("metadata", note.metadata or None),
            ("embedding", record.embedding_id),
            ("vector", "none" if vector is None else f"{vector.shape[0]} x {vector.dtype.name}"),
            *blob,
            ("version", record.version),
            *expiry,
        ]
    )


def show_records(
    out: Output, records: Iterable[MemoryRecord], *, versions: bool = False, namespaces: bool = False
) -> None:
    """Records as a table: time, (with ``namespaces``) namespace, id, (with ``versions``) version,
    text."""
    columns = ["time (UTC)", *(["namespace"] if namespaces else []), "id",
               *(["version"] if versions else []), "text"]  # fmt: skip

    def row(r: MemoryRecord) -> list[Any]:
        return [format_time(r.note.timestamp), *([format_namespace(r.namespace)] if namespaces else []),
                r.note.id, *([r.version] if versions else []), r.note.text]  # fmt: skip

    out.table(columns, (row(r) for r in records), wrap=["text"])


def event_json(event: Event) -> dict[str, Any]:
    """An event for ``--json``: every field of :class:`~coniti.events.Event`, the recorded time also
    as ISO 8601 (``recorded``), and the record without its vector (see :func:`record_json`)."""
    out = event.to_dict()
    out["recorded"] = iso_time(event.at)
    if event.record is not None:
        out["record"] = record_json(event.record)
    return out


def _what(event: Event) -> str:
    if event.erased:
        return "(content erased)"
    if event.kind == "meta":
        return f"{event.key} = {json.dumps(event.value, ensure_ascii=False)}"
    if event.record is not None:
        text = event.record.note.text
        return text if event.replaces is None else f"(replaces {event.replaces}) {text}"
    if event.kind == "op":
        return f"op id {event.op_id}"
    if event.kind == "feedback":
        return f"weight {event.value:+g} on {event.id}"
    if event.kind == "erase" and event.key is not None:
        return f"metadata key {event.key} erased"
    return ""


def event_line(event: Event) -> str:
    """One event on one line: seq, recorded time, actor, kind, namespace, id, why, what."""
    parts = [
        f"{event.seq:>6}",
        format_time(event.at).ljust(23),
        (event.actor or "-").ljust(10),
        event.kind.ljust(6),
        format_namespace(tuple(event.namespace)),
    ]
    if event.id is not None:
        parts.append(event.id)
    if event.reason:
        parts.append(f"({event.reason})")
    what = _what(event)
    if what:
        parts.append(what if len(what) <= 70 else what[:69] + "…")
    return "  ".join(parts)


def show_history(out: Output, events: Iterable[Event]) -> None:
    """The events of one record's history as a table: seq, recorded time, actor, kind, reason, what
    (namespace and id are the record's, so they are left out)."""
    out.table(
        ["seq", "recorded (UTC)", "actor", "kind", "reason", "what"],
        ([e.seq, format_time(e.at), e.actor, e.kind, e.reason, _what(e)] for e in events),
        wrap=["reason", "what"],
    )
