"""How :class:`~coniti.integrations.langgraph.ConitiStore` keeps a LangGraph item as a coniti record.

One item is one :class:`~coniti.memory.MemoryRecord` in the coniti namespace equal to the item's
namespace, with the item's key as its id:

* ``note.timestamp``: the item's ``updated_at`` (epoch seconds), so coniti's time order is the
  order of updates;
* ``note.metadata``: ``{"value": <the item's value>, "created_at": <epoch seconds>}``, plus
  ``"ttl"`` (minutes) when the item has a time to live;
* ``note.text``: the texts that were embedded, one per line (``""`` for an item not indexed);
* ``vector``: the embedding of the first text, ``None`` for an item not indexed; ``blob``: the
  embeddings of the other texts, float32 rows of the same width, C order, ``None`` when there is at
  most one text;
* ``expires_at``: coniti's expiry (see the store's TTL contract).

Filters of the store address ``value``: :func:`coniti_filter` prefixes every path with it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from langgraph.store.base import Item, SearchItem

from coniti.actor import Note
from coniti.memory import MemoryRecord

VALUE = "value"
CREATED = "created_at"
TTL = "ttl"


def make_record(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    *,
    created_at: float,
    updated_at: float,
    ttl: float | None,
    texts: list[str],
    vectors: np.ndarray | None,
    expires_at: float | None,
    embedding_id: str | None,
) -> MemoryRecord:
    """The record of one item (``value`` already checked as JSON; ``vectors`` one float32 row per
    text, or None when ``texts`` is empty)."""
    metadata: dict[str, Any] = {VALUE: value, CREATED: created_at}
    if ttl is not None:
        metadata[TTL] = ttl
    note = Note.trusted(key, "\n".join(texts), updated_at, metadata)
    if vectors is None or vectors.shape[0] == 0:
        return MemoryRecord.trusted(note, None, None, namespace, None, expires_at)
    rest = vectors[1:]
    blob = np.ascontiguousarray(rest, dtype=np.float32).tobytes() if rest.shape[0] else None
    first = np.array(vectors[0], dtype=np.float32)
    return MemoryRecord.trusted(note, first, embedding_id, namespace, None, expires_at, blob)




def vectors_of(record: MemoryRecord) -> np.ndarray | None:
    """The item's embeddings, one float32 row per indexed text, or None when it was not indexed."""
    first = record.vector
    if first is None:
        return None
    row = np.asarray(first, dtype=np.float32)[None, :]
    blob = record.blob
    if not blob:
        return row
    rest = np.frombuffer(blob, dtype=np.float32).reshape(-1, row.shape[1])
    return np.concatenate([row, rest])


def ttl_of(record: MemoryRecord) -> float | None:
    """The item's time to live in minutes, or None."""
    ttl = record.note.metadata.get(TTL)
    return None if ttl is None else float(ttl)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def item_of(record: MemoryRecord) -> Item:
    """The LangGraph item a record holds (its value is the record's copy, not shared)."""
    meta = record.note.metadata
    return Item(
        value=meta[VALUE],
        key=record.note.id,
        namespace=record.namespace,
        created_at=_utc(float(meta[CREATED])),
        updated_at=_utc(record.note.timestamp),
    )


def search_item_of(record: MemoryRecord, score: float | None) -> SearchItem:
    """The search result of a record, with ``score`` (None for a listing or an item not indexed)."""
    meta = record.note.metadata
    return SearchItem(
        namespace=record.namespace,
        key=record.note.id,
        value=meta[VALUE],
        created_at=_utc(float(meta[CREATED])),
        updated_at=_utc(record.note.timestamp),
        score=score,
    )
