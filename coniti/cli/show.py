"""How records, events and results look on the command line, for people and as JSON.

Record JSON leaves out the vector (``dump`` writes it); it carries ``dim`` and ``dtype`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from coniti.cli.output import Output
from coniti.cli.parse import format_namespace, format_time, iso_time
from coniti.memory import MemoryRecord

__all__ = ["record_json", "show_record", "show_records"]


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
        "dim": int(record.vector.shape[0]),
        "dtype": record.vector.dtype.name,
    }


def show_record(out: Output, record: MemoryRecord) -> None:
    """One record as a key/value table."""
    note = record.note
    out.fields(
        [
            ("id", note.id),
            ("namespace", format_namespace(record.namespace)),
            ("time", format_time(note.timestamp) + " UTC"),
            ("text", note.text),
            ("metadata", note.metadata or None),
            ("embedding", record.embedding_id),
            ("vector", f"{record.vector.shape[0]} x {record.vector.dtype.name}"),
        ]
    )


def show_records(
    out: Output, records: Iterable[MemoryRecord], *, title: str | None = None
) -> int:
    """Records as a table (time, id, text); returns how many."""
    return out.table(
        ["time (UTC)", "id", "text"],
        ([format_time(r.note.timestamp), r.note.id, r.note.text] for r in records),
        title=title,
        wrap=["text"],
    )


def namespace_label(namespace: Sequence[str]) -> str:
    """The namespace as typed on the command line."""
    return format_namespace(tuple(namespace))
