"""Passages: the extra vector rows of a note too long for one vector of its embedder.

An embedder that reads a bounded number of tokens per vector (MiniLM: 256) declares
:attr:`~coniti.embedding.Embedder.passage_chars`, the longest text sure to fit in one vector, and
gives the vectors of a longer text's further passages with
:meth:`~coniti.embedding.Embedder.passage_vectors` (overlapping windows of its tokens). The note's
record keeps the vector of its first passage, as before; each further passage ``p`` (1, 2, ...) is
a row of the namespace's structures with the id ``<note id>\\x1f<p>`` (:func:`passage_id`), the
note's timestamp and the note's birth and death, so every structure search, time range, as-of view
and snapshot holds it like any row. A semantic search maps a passage row back to its note and keeps
the note's best row (:func:`note_hits`): a note is scored by its best passage.

Rules:

* A note id holding ``\\x1f`` (:data:`PASSAGE_MARK`) is refused when the embedder has passages (it
  could name another note's passage).
* At most :data:`MAX_PASSAGES` passages per note (the first included); the rest of a longer text is
  not embedded.
* Passage rows are derived state: a rebuild from memory embeds them again, from the note's text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coniti.embedding import Embedder
from coniti.structure import Structure, StructureHit

__all__ = [
    "MAX_PASSAGES",
    "PASSAGE_MARK",
    "PassageRows",
    "note_hits",
    "note_id",
    "passage_id",
    "passage_rows",
    "remove_rows",
]

PASSAGE_MARK = "\x1f"
"""Separates a note id from a passage number in a passage row's id."""

MAX_PASSAGES = 64
"""Passages per note, the first (the record's vector) included."""

PassageRows = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]
"""Passage rows to add: ids, vectors ``(n, dim)``, timestamps, born."""


def passage_id(note: str, number: int) -> str:
    """The row id of passage ``number`` (1, 2, ...) of note ``note``."""
    return f"{note}{PASSAGE_MARK}{number}"


def note_id(row: str) -> str:
    """The note id a structure row belongs to: ``row`` itself, or the note of a passage row."""
    return row.rpartition(PASSAGE_MARK)[0] if PASSAGE_MARK in row else row


def passage_rows(
    embedder: Embedder,
    ids: Sequence[str],
    texts: Sequence[str],
    times: Sequence[float] | np.ndarray,
    born: Sequence[int] | np.ndarray | None,
) -> PassageRows | None:
    """The passage rows of the notes ``ids`` with ``texts`` (timestamps ``times``, births ``born``;
    None: 0), or None when none is longer than one vector reads."""
    limit = embedder.passage_chars
    if limit is None:
        return None
    long = [i for i, text in enumerate(texts) if len(text) > limit]
    if not long:
        return None
    found = embedder.passage_vectors([texts[i] for i in long])
    out_ids: list[str] = []
    rows: list[np.ndarray] = []
    out_times: list[float] = []
    out_born: list[int] = []
    for i, vectors in zip(long, found, strict=True):
        for number, vector in enumerate(vectors[: MAX_PASSAGES - 1], start=1):
            out_ids.append(passage_id(ids[i], number))
            rows.append(vector)
            out_times.append(float(times[i]))
            out_born.append(0 if born is None else int(born[i]))
    if not out_ids:
        return None
    return (
        out_ids, np.stack(rows), np.array(out_times, dtype=np.float64), np.array(out_born, dtype=np.int64),
    )  # fmt: skip


def with_passages(
    ids: list[str], matrix: np.ndarray, times: np.ndarray, born: np.ndarray | None, extra: PassageRows | None
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray | None]:
    """The note rows followed by their passage rows, for one all-or-nothing ``Structure.add``."""
    if extra is None:
        return ids, matrix, times, born
    p_ids, p_matrix, p_times, p_born = extra
    stacked = np.concatenate([np.asarray(matrix), p_matrix.astype(np.asarray(matrix).dtype)])
    joined = None if born is None else np.concatenate([np.asarray(born, dtype=np.int64), p_born])
    if born is None and p_born.any():
        joined = np.concatenate([np.zeros(len(ids), dtype=np.int64), p_born])
    return [*ids, *p_ids], stacked, np.concatenate([np.asarray(times, dtype=np.float64), p_times]), joined


def live_passages(structure: Structure, ids: Sequence[str]) -> list[str]:
    """The live passage rows of the notes ``ids`` in ``structure``."""
    out = []
    for id_ in ids:
        number = 1
        while number < MAX_PASSAGES and (row := passage_id(id_, number)) in structure:
            out.append(row)
            number += 1
    return out


def remove_rows(structure: Structure, ids: Sequence[str], seq: int | None = None) -> None:
    """``structure.remove`` of the notes ``ids`` and their live passage rows."""
    structure.remove([*ids, *live_passages(structure, ids)], seq=seq)


def purge_rows(structure: Structure, ids: Sequence[str]) -> int:
    """``structure.purge`` of the notes ``ids`` and every passage row they may have had."""
    rows = [*ids, *(passage_id(i, n) for i in ids for n in range(1, MAX_PASSAGES))]
    return structure.purge(rows)


def note_hits(hits: Sequence[StructureHit], exclude: str | None = None) -> list[StructureHit]:
    """Structure hits as note hits: passage rows mapped to their note, each note once, at its best
    (first) row, in the given order; ``exclude``: a note to leave out (a ``near`` anchor)."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        note = note_id(hit.id)
        if note in seen or note == exclude:
            continue
        seen.add(note)
        out.append(hit if note == hit.id else StructureHit(note, hit.score))
    return out
