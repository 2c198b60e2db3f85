"""Columnar batches: notes and records as columns, validated once per batch instead of per object.

:class:`NoteBatch` holds the columns of notes (ids, texts, timestamps, metadata);
:class:`RecordBatch` adds what memory stores with them: one vector matrix (one row per note), one
embedding id and one namespace for the whole batch. ``ContinuityEngine.ingest_many`` takes a
:class:`NoteBatch`; every memory backend takes a :class:`RecordBatch` through
:meth:`~coniti.memory.MemoryBackend.put_batch`.

**The same rules as the objects.** A batch accepts exactly the rows that :class:`~coniti.actor.Note`
(and :class:`~coniti.memory.MemoryRecord`) accept one by one: ids are non-empty strings, texts are
strings, timestamps finite numbers (not booleans) or aware datetimes, metadata JSON objects (deep
copied), vectors finite float rows. The checks run column by column; the first bad row raises
:class:`~coniti.errors.ContractError` naming the row's index and id, with the message building that
row's object gives (``notes[3] (id 'n3'): Note.timestamp: timestamp must be finite, got nan``).
Nothing is kept of a refused batch. Column rules of their own: all columns have one length;
``timestamps`` may also be a numpy array of real numbers (read as float64); ``vectors`` is one 2-D
numpy array of float16, float32 or float64 (its dtype is kept), copied in, or None for a batch of
records without vectors (then ``embedding_id`` must be None too). Records of a batch have no expiry
and no blob: write those as :class:`~coniti.memory.MemoryRecord`.

**Values.** A batch is immutable after construction: the columns are tuples and read-only arrays of
the batch's own copies; metadata dicts are copies too, and must not be modified (backends copy them
again when they keep them). :meth:`NoteBatch.notes` and :meth:`RecordBatch.records` give the
equivalent objects, built without validating again. A :class:`NoteBatch` is also a sequence of its
notes (``batch[i]``, iteration), built on first use and kept: code that takes a ``Sequence[Note]``
(a :class:`~coniti.strategy.Strategy`) reads a batch as it reads a list, and code that knows the
columns reads them without a note being built.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, overload

import numpy as np
import orjson

from coniti.actor import Note, to_stored_time
from coniti.contracts import check_json_value
from coniti.errors import ContractError, DuplicateRecord, namespace_text
from coniti.jsonl import MAX_NOTE_BYTES, note_size_problem
from coniti.records import VECTOR_DTYPES, MemoryRecord, as_namespace
from coniti.text import valid_text
from coniti.times import MAX_TIME, MIN_TIME

__all__ = ["NoteBatch", "RecordBatch", "check_batch_ids"]

_EMPTY: dict[str, Any] = {}


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class NoteBatch(Sequence[Note]):
    """The columns of ``len(ids)`` notes, validated (see the module docstring); as a sequence, its
    notes (``batch[i]`` a :class:`Note`, ``batch[a:b]`` a :class:`NoteBatch`).

    ``metadata``: one dict per note, or None for ``{}`` everywhere. Raises :class:`ContractError`
    naming the first bad row (``notes[i] (id ...)``) or the column whose length differs.
    """

    __slots__ = ("_ids", "_metadata", "_notes", "_texts", "_timestamps")

    _ids: tuple[str, ...]
    _texts: tuple[str, ...]
    _timestamps: np.ndarray
    _metadata: tuple[dict[str, Any], ...]
    _notes: list[Note] | None

    def __init__(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        timestamps: Sequence[float | datetime] | np.ndarray,
        metadata: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        ids_t = _column("ids", ids)
        texts_t = _column("texts", texts)
        n = len(ids_t)
        if len(texts_t) != n:
            raise ContractError(f"texts has {len(texts_t)} items, ids {n}: one per note")
        if isinstance(timestamps, np.ndarray):
            if timestamps.ndim != 1 or timestamps.dtype.kind not in "fiu":
                raise ContractError(
                    f"timestamps must be a 1-D array of real numbers, got {timestamps.dtype} "
                    f"with shape {timestamps.shape}"
                )
            stamps: list[Any] | np.ndarray = timestamps
        else:
            stamps = list(_column("timestamps", timestamps))
        if len(stamps) != n:
            raise ContractError(f"timestamps has {len(stamps)} items, ids {n}: one per note")
        md: tuple[Any, ...] = (_EMPTY,) * n if metadata is None else _column("metadata", metadata)
        if len(md) != n:
            raise ContractError(f"metadata has {len(md)} items, ids {n}: one per note")

        # Each check finds its first bad row; the first of those is refused (as Note refuses it).
        bad = n
        if not _plain_strings(ids_t, texts_t):  # else every row passes the checks below
            for i, (id_, text) in enumerate(zip(ids_t, texts_t, strict=True)):
                if not (isinstance(id_, str) and id_ and isinstance(text, str)):
                    bad = i
                    break
                if not (id_.isascii() and text.isascii()) and not (valid_text(id_) and valid_text(text)):
                    bad = i
                    break
        if isinstance(stamps, np.ndarray):
            times = np.array(stamps, dtype=np.float64)
        else:
            converted: list[float] = []
            for i, t in enumerate(stamps):
                if type(t) is float:  # the usual case; the horizon is checked on the column below
                    converted.append(t)
                    continue
                try:
                    converted.append(to_stored_time(t))
                except ValueError:
                    bad = min(bad, i)
                    break
            times = np.array(converted, dtype=np.float64)
        outside = np.flatnonzero(~((times >= MIN_TIME) & (times < MAX_TIME)))  # NaN and inf too
        if outside.size:
            bad = min(bad, int(outside[0]))
        plain = _plain_copies(md) if bad == n else None
        copies: list[dict[str, Any]] = [] if plain is None else plain
        for i, value in enumerate(md[:bad] if plain is None else ()):
            if value is _EMPTY:
                copies.append({})
            else:
                try:
                    if not isinstance(value, dict):
                        raise ValueError
                    copies.append(check_json_value(value, "metadata"))
                except ValueError:
                    bad = i
                    break
        bad = _first_too_large(ids_t, texts_t, copies, bad)
        if bad < n:
            _refuse_note(bad, ids_t, texts_t, stamps, md)
        self._ids = ids_t
        self._texts = texts_t
        self._timestamps = _readonly(times)
        self._metadata = tuple(copies)
        self._notes = None

    @classmethod
    def trusted(
        cls,
        ids: tuple[str, ...],
        texts: tuple[str, ...],
        timestamps: np.ndarray,
        metadata: tuple[dict[str, Any], ...],
    ) -> NoteBatch:
        """A batch of columns already valid (coniti's own, e.g. a selection of rows); no checks, no
        copies: ``timestamps`` must be a read-only float64 array."""
        batch = object.__new__(cls)
        batch._ids, batch._texts, batch._timestamps, batch._metadata = ids, texts, timestamps, metadata
        batch._notes = None
        return batch

    @classmethod
    def from_notes(cls, notes: Iterable[Note]) -> NoteBatch:
        """The columns of ``notes`` (already valid: nothing is checked again; metadata is shared
        with the notes, which are frozen)."""
        listed = list(notes)
        for i, note in enumerate(listed):
            if not isinstance(note, Note):
                raise ContractError(f"notes[{i}] must be a Note, got {type(note).__name__}")
        return cls.trusted(
            tuple(n.id for n in listed),
            tuple(n.text for n in listed),
            _readonly(np.fromiter((n.timestamp for n in listed), np.float64, len(listed))),
            tuple(n.metadata for n in listed),
        )

    @property
    def ids(self) -> tuple[str, ...]:
        return self._ids

    @property
    def texts(self) -> tuple[str, ...]:
        return self._texts

    @property
    def timestamps(self) -> np.ndarray:
        """Float64, read-only."""
        return self._timestamps

    @property
    def metadata(self) -> tuple[dict[str, Any], ...]:
        """One dict per note (the batch's copies: do not modify them)."""
        return self._metadata

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Note: ...

    @overload
    def __getitem__(self, index: slice) -> NoteBatch: ...

    def __getitem__(self, index: int | slice) -> Note | NoteBatch:
        """The note of row ``index`` (built with every other on first use), or the batch of a slice."""
        if isinstance(index, slice):
            return self.take(index)
        return self._built()[index]

    def __iter__(self) -> Iterator[Note]:
        return iter(self._built())

    def _built(self) -> list[Note]:
        if self._notes is None:
            self._notes = self.notes()
        return self._notes

    def take(self, rows: Sequence[int] | slice) -> NoteBatch:
        """The batch of the given rows (indices in order, or a slice), sharing this one's values."""
        if isinstance(rows, slice):
            return NoteBatch.trusted(
                self._ids[rows], self._texts[rows], self._timestamps[rows], self._metadata[rows]
            )
        picked = list(rows)
        return NoteBatch.trusted(
            tuple(self._ids[i] for i in picked),
            tuple(self._texts[i] for i in picked),
            _readonly(self._timestamps[np.asarray(picked, dtype=np.intp)]),
            tuple(self._metadata[i] for i in picked),
        )

    def notes(self) -> list[Note]:
        """The notes, built without validating again (they share the batch's metadata dicts), in a
        new list."""
        if self._notes is not None:
            return list(self._notes)
        trusted = Note.trusted
        return [
            trusted(i, t, s, m)
            for i, t, s, m in zip(
                self._ids, self._texts, self._timestamps.tolist(), self._metadata, strict=True
            )
        ]

    def __repr__(self) -> str:
        return f"NoteBatch({len(self)} notes)"


class RecordBatch:
    """The records of one namespace as columns: ``notes`` with one vector row per note (``vectors``:
    an ``(len(notes), dim)`` float array, copied, dtype kept; or None), the ``embedding_id`` of every
    row and the ``namespace``. Raises :class:`ContractError` naming the first bad row
    (``records[i] (id ...)``) or the argument."""

    __slots__ = ("_embedding_id", "_namespace", "_notes", "_vectors")

    _notes: NoteBatch
    _vectors: np.ndarray | None
    _embedding_id: str | None
    _namespace: tuple[str, ...]

    def __init__(
        self,
        notes: NoteBatch,
        vectors: np.ndarray | None,
        embedding_id: str | None = None,
        namespace: Sequence[str] = (),
    ) -> None:
        if not isinstance(notes, NoteBatch):
            raise ContractError(f"notes must be a NoteBatch, got {type(notes).__name__}")
        if embedding_id is not None and type(embedding_id) is not str:
            raise ContractError(f"embedding_id must be a string or None, got {type(embedding_id).__name__}")
        ns = as_namespace(namespace)
        n = len(notes)
        if vectors is None:
            if embedding_id is not None:
                raise ContractError("embedding_id must be None when vectors is None (no vectors)")
            self._vectors = None
        else:
            if not isinstance(vectors, np.ndarray):
                raise ContractError(
                    f"vectors must be a 2-D numpy array or None, got {type(vectors).__name__}"
                )
            if vectors.dtype.name not in VECTOR_DTYPES:
                raise ContractError(
                    f"vectors dtype must be one of {', '.join(VECTOR_DTYPES)}, got {vectors.dtype}"
                )
            if vectors.ndim != 2 or vectors.shape[0] != n or (n and vectors.shape[1] == 0):
                raise ContractError(
                    f"vectors must have shape ({n}, dim) with dim >= 1, one row per note, got "
                    f"{vectors.shape}"
                )
            with np.errstate(over="ignore"):
                matrix = np.array(vectors, order="C", copy=True)
            finite = np.isfinite(matrix).all(axis=1)
            if not finite.all():
                i = int(np.flatnonzero(~finite)[0])
                raise ContractError(
                    f"records[{i}] (id {notes.ids[i]!r}): MemoryRecord.vector: vector must be "
                    "finite (no NaN or infinity)"
                )
            self._vectors = _readonly(matrix)
        self._notes = notes
        self._embedding_id = embedding_id
        self._namespace = ns

    @classmethod
    def trusted(
        cls,
        notes: NoteBatch,
        vectors: np.ndarray | None,
        embedding_id: str | None,
        namespace: tuple[str, ...],
    ) -> RecordBatch:
        """A batch of values already valid (the engine's own: embedded rows, its spec id); no
        checks, no copies: ``vectors`` must be C-contiguous and not modified afterwards."""
        batch = object.__new__(cls)
        batch._notes, batch._vectors = notes, vectors
        batch._embedding_id, batch._namespace = embedding_id, namespace
        return batch

    @property
    def notes(self) -> NoteBatch:
        return self._notes

    @property
    def vectors(self) -> np.ndarray | None:
        """``(len(self), dim)``, C-contiguous, read-only; None for records without vectors."""
        return self._vectors

    @property
    def embedding_id(self) -> str | None:
        return self._embedding_id

    @property
    def namespace(self) -> tuple[str, ...]:
        return self._namespace

    @property
    def ids(self) -> tuple[str, ...]:
        return self._notes.ids

    def __len__(self) -> int:
        return len(self._notes)

    def records(self) -> list[MemoryRecord]:
        """The equivalent records, built without validating again; each vector is a copy of its
        row, each note shares the batch's metadata dict."""
        vectors = self._vectors
        eid, ns = self._embedding_id, self._namespace
        trusted = MemoryRecord.trusted
        return [
            trusted(note, None if vectors is None else vectors[i].copy(), eid, ns)
            for i, note in enumerate(self._notes.notes())
        ]

    def __repr__(self) -> str:
        dim = None if self._vectors is None else self._vectors.shape[1]
        return f"RecordBatch({len(self)} records, dim={dim}, namespace={self._namespace!r})"


def check_batch_ids(batch: RecordBatch) -> None:
    """Raise :class:`DuplicateRecord` if an id repeats in ``batch`` (the message of
    :func:`~coniti.memory.check_put_ids`, naming the first repeat)."""
    ids = batch.ids
    if len(set(ids)) == len(ids):
        return
    seen: set[str] = set()
    for record_id in ids:
        if record_id in seen:
            raise DuplicateRecord(
                f"record id {record_id!r} appears twice in one put (namespace "
                f"{namespace_text(batch.namespace)})"
            )
        seen.add(record_id)


def _plain_strings(ids: tuple[Any, ...], texts: tuple[Any, ...]) -> bool:
    """Whether every id is a non-empty ``str`` and every text a ``str``, all ASCII (what the
    row-by-row checks accept without a scan): C-level passes over the columns, no call per row."""
    return (
        set(map(type, ids)) <= {str} and set(map(type, texts)) <= {str} and all(ids)
        and "".join(ids).isascii() and "".join(texts).isascii()
    )  # fmt: skip


def _plain_copies(metadata: tuple[Any, ...]) -> list[dict[str, Any]] | None:
    """Copies of ``metadata`` when every item is a ``dict`` of ASCII ``str`` keys to ASCII ``str``
    values (what :func:`~coniti.contracts.check_json_value` accepts and copies as they are), found
    by C-level passes over the column; None otherwise (then each row is checked on its own)."""
    if set(map(type, metadata)) - {dict}:
        return None
    keys = list(itertools.chain.from_iterable(metadata))
    if set(map(type, keys)) - {str} or not "".join(keys).isascii():
        return None
    values = list(itertools.chain.from_iterable(map(dict.values, metadata)))
    if set(map(type, values)) - {str} or not "".join(values).isascii():
        return None
    return list(map(dict, metadata))


def _column(name: str, value: Any) -> tuple[Any, ...]:
    if isinstance(value, str | bytes | dict) or not isinstance(value, Sequence | np.ndarray):
        raise ContractError(f"{name} must be a sequence, got {type(value).__name__}")
    return tuple(value)


def _first_too_large(
    ids: tuple[str, ...], texts: tuple[str, ...], metadata: list[dict[str, Any]], bad: int
) -> int:
    """The first of the rows before ``bad`` whose note is over :data:`~coniti.jsonl.MAX_NOTE_BYTES`,
    else ``bad``. The metadata column is encoded once: a row whose id and text, at six bytes a
    character, and the whole column's metadata fit is not measured on its own (the usual case)."""
    spare = MAX_NOTE_BYTES - len(orjson.dumps(metadata)) - 4
    if bad and 6 * (max(map(len, ids[:bad])) + max(map(len, texts[:bad]))) <= spare:
        return bad  # no row's id and text can be over (the usual batch: no per-row pass)
    for i, (id_, text) in enumerate(zip(ids[:bad], texts[:bad], strict=False)):
        if 6 * (len(id_) + len(text)) > spare and note_size_problem(id_, text, metadata[i]) is not None:
            return i
    return bad


def _refuse_note(
    i: int, ids: tuple[Any, ...], texts: tuple[Any, ...], stamps: Any, md: tuple[Any, ...]
) -> None:
    """Raise the error of row ``i``: the one building its :class:`Note` raises, with the row named."""
    stamp = stamps[i]
    if isinstance(stamp, np.generic):
        stamp = float(stamp)
    metadata = {} if md[i] is _EMPTY else md[i]
    try:
        Note(id=ids[i], text=texts[i], timestamp=stamp, metadata=metadata)
    except ContractError as exc:
        message = str(exc)
    else:  # a column rule Note has not: a non-finite value in a numpy timestamps column
        message = f"Note.timestamp: timestamp must be finite, got {stamp!r}"
    raise ContractError(f"notes[{i}] (id {ids[i]!r}): {message}")
