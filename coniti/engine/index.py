"""One namespace's derived state (:class:`NamespaceIndex`), what every index of one engine is made
of (:class:`Recipe`), and the fold of a namespace's events into its index (:class:`Folder`).

An index holds derived data only, each part rebuildable from memory: the structures (rows of
vectors over time), the keyword index of hybrid recall and the content index the strategy reads to
refuse duplicates. A long note's further passages (:mod:`coniti.passages`) are rows of the
structures beside its own when the recipe's embedder splits long texts: added with the note from
its text, stamped, ended and dropped with it. Over an event feed every row carries the sequence numbers between which it was
live (``born``, ``died``), so :meth:`NamespaceIndex.at` masks the same rows as of any point. An index
knows nothing of the engine, the memory backend or where it is kept: the owner of an index
(:mod:`coniti.engine.indexes`) loads it, feeds it and saves it. Not thread-safe: the engine's lock
serialises every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti import derived
from coniti.actor import Note
from coniti.embedding import Embedder
from coniti.engine.content import ContentIndex
from coniti.errors import EmbeddingMismatch, namespace_text
from coniti.events import Event
from coniti.keyword import KeywordIndex, thread_of
from coniti.memory import MemoryRecord
from coniti.passages import live_passages, note_id, passage_rows, purge_rows, with_passages
from coniti.strategy import Strategy, StrategyContext
from coniti.structure import Structure

__all__ = ["FOLD_BATCH", "Folder", "NamespaceIndex", "Recipe", "differences", "with_vectors"]

FOLD_BATCH = 65_536
"""Rows added to the structures in one call while a namespace is built (a fold or a scan)."""


@dataclass
class NamespaceIndex:
    """The derived state of one namespace: ``structures`` (in the engine's order), ``keyword``,
    ``content``. ``seq``: the event the state reflects (None without an event feed);
    ``meta_checked``: the namespace's embedding id was checked (or claimed); ``changed``: events
    folded or written since the snapshot on disk (or since the build); ``checks``: by
    ``part/field``, the snapshot blocks not checked yet (run on first touch); ``passages``: the
    embedder that gives a long note's passage rows (None: a note is one row)."""

    structures: list[Structure]
    keyword: KeywordIndex
    content: ContentIndex = field(default_factory=ContentIndex)
    seq: int | None = None
    meta_checked: bool = False
    changed: int = 0
    checks: dict[str, derived.BlockCheck] = field(default_factory=dict)
    passages: Embedder | None = None
    metadata: object = field(default=None, repr=False, compare=False)
    """A cache the candidate step keeps for filtered asks (:class:`coniti.engine.where.MetadataColumn`,
    valid for one ``seq``); None until one is made. Never saved."""

    def __contains__(self, id_: object) -> bool:
        """Whether ``id_`` has a live row."""
        return id_ in self.structures[0]

    # -- rows (the structures) --------------------------------------------------------------------

    def add_rows(
        self,
        ids: Sequence[str],
        matrix: np.ndarray,
        times: np.ndarray,
        born: np.ndarray | None = None,
        texts: Sequence[str] | None = None,
    ) -> None:
        """Add a row per id to every structure (``born``: their first events; None: 0), and the
        passage rows of the long ones among ``texts`` (their texts; None: no passages)."""
        if self.passages is not None and texts is not None:
            extra = passage_rows(self.passages, ids, texts, times, born)
            ids, matrix, times, born = with_passages(list(ids), matrix, np.asarray(times), born, extra)
        for structure in self.structures:
            structure.add(ids, matrix, times, born=born)

    def _rows(self, ids: Sequence[str]) -> Sequence[str]:
        """``ids`` and their live passage rows."""
        if self.passages is None:
            return ids
        return [*ids, *live_passages(self.structures[0], ids)]

    def take_rows(self, ids: Sequence[str]) -> None:
        """Take the live rows of ``ids`` (and their passages) out of every structure, at every
        point (an undo)."""
        rows = self._rows(ids)
        for structure in self.structures:
            structure.remove(rows)

    def set_born(self, ids: Sequence[str], born: Sequence[int]) -> None:
        """Stamp the live rows of ``ids`` (and their passages) with the events that wrote them."""
        if self.passages is not None:
            extra = live_passages(self.structures[0], ids)
            if extra:
                of = dict(zip(ids, born, strict=True))
                ids = [*ids, *extra]
                born = [*born, *(of[note_id(p)] for p in extra)]
        for structure in self.structures:
            structure.set_born(ids, born)

    # -- what happens to a note, in every part ----------------------------------------------------

    def add_text(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        times: Sequence[float] | np.ndarray,
        born: Sequence[int],
        keys: Sequence[str | None],
        *,
        expires: Sequence[float | None] | None = None,
        tokens: Sequence[Sequence[str]] | None = None,
        threads: Sequence[str | None] | None = None,
    ) -> None:
        """Add ``ids`` (which have rows) to the keyword index, born at ``born``, and to the content
        index under their content ``keys`` (``tokens``: their keyword tokens, None: made from the
        texts; ``expires``: each one's expiry; ``threads``: each one's conversation thread,
        :func:`coniti.keyword.thread_of`)."""
        self.keyword.add(ids, texts, times, born, expires=expires, tokens=tokens, threads=threads)
        self.content.add(ids, keys)

    def add_records(self, records: Sequence[MemoryRecord], keys: Sequence[str | None]) -> None:
        """Add records that have a vector to every part, born at their version (0 without one):
        what a scan of memory gives. ``keys``: their content keys."""
        if not records:
            return
        ids = [r.note.id for r in records]
        times = np.array([r.note.timestamp for r in records], dtype=np.float64)
        born = [r.version or 0 for r in records]
        matrix = np.stack([r.vector for r in records if r.vector is not None])
        texts = [r.note.text for r in records]
        self.add_rows(ids, matrix, times, np.array(born, dtype=np.int64), texts)
        self.add_text(
            ids, texts, times.tolist(), born, keys, expires=[r.expires_at for r in records],
            threads=[thread_of(r.note.metadata) for r in records],
        )  # fmt: skip

    def end(self, ids: Sequence[str], seqs: Sequence[int]) -> None:
        """End the live rows of ``ids`` at ``seqs`` (a delete or a replacement): kept for history."""
        if self.passages is None:
            for structure in self.structures:
                structure.end_each(ids, seqs)
            self.keyword.remove(ids, died=seqs)
        else:  # a note's passage rows end at its seq
            for id_, seq in zip(ids, seqs, strict=True):
                rows = self._rows([id_])
                for structure in self.structures:
                    structure.remove(rows, seq=seq)
                self.keyword.remove([id_], died=seq)
        self.content.remove(ids)

    def end_live(self, seq: int) -> None:
        """End every live row at ``seq`` (a clear)."""
        live = self.structures[0].live_ids()
        for structure in self.structures:
            structure.remove(live, seq=seq)
        self.keyword.remove(live, died=seq)
        self.content.remove(live)

    def forget(self, ids: Sequence[str], died: int) -> None:
        """Take ``ids`` out at every point (rows that keep no history), the keyword rows ended at
        ``died``."""
        rows = self._rows(ids)
        for structure in self.structures:
            structure.remove(rows)
        self.content.remove(ids)
        self.keyword.remove(ids, died=died)

    def purge(self, ids: Sequence[str]) -> None:
        """Drop every row of ``ids`` (and of their passages), live or kept for history (an
        erasure)."""
        for structure in self.structures:
            if self.passages is None:
                structure.purge(ids)
            else:
                purge_rows(structure, ids)
        self.keyword.purge(ids)
        self.content.remove(ids)

    # -- reads ------------------------------------------------------------------------------------

    def context(
        self,
        namespace: tuple[str, ...],
        keys: Sequence[str | None] | None = None,
        ids: Sequence[str] | None = None,
    ) -> StrategyContext:
        """What the strategy consults (``keys``: the content keys of the notes it is to admit, when
        computed; ``ids``: their ids, whose membership is then looked up at once)."""
        first = self.structures[0]
        is_stored: Callable[[str], bool] = first.__contains__
        stored_among: Callable[[Sequence[str]], set[str]] = first.stored_among
        if ids is not None:
            asked = set(ids)
            found = first.stored_among(asked)

            def is_stored(id_: str) -> bool:
                return id_ in found if id_ in asked else first.__contains__(id_)

            def stored_among(among: Sequence[str]) -> set[str]:
                wanted = set(among)
                return found & wanted if wanted <= asked else first.stored_among(wanted)

        return StrategyContext(
            namespace=namespace,
            structures=tuple(self.structures),
            stored_with_key=self.content.holders,
            is_stored=is_stored,
            keys=keys,
            stored_among=stored_among,
            held_among=self.content.held_among,
        )

    def at(self, seq: int, clock: float) -> NamespaceIndex:
        """A read-only view as of event ``seq``: the same rows masked by sequence number
        (``clock``: the time that event was recorded, for expiry)."""
        return NamespaceIndex(
            structures=[s.at(seq) for s in self.structures],
            keyword=self.keyword.at(seq, clock=clock), seq=seq, meta_checked=True,
        )  # fmt: skip

    # -- the snapshot's block checks --------------------------------------------------------------

    def check_blocks(self) -> None:
        """Run every snapshot block check not run yet; raises
        :class:`~coniti.derived.StaleSnapshot` when one fails."""
        for check in self.checks.values():
            check.all()
        self.checks = {}

    @property
    def damaged(self) -> bool:
        """A snapshot block of this index failed its check."""
        return any(c.failure is not None for c in self.checks.values())


@dataclass(frozen=True)
class Recipe:
    """What every index of one engine is made of, and what it is checked against: the structure
    ``prototypes`` (each spawned per namespace), the ``keyword`` prototype, the ``strategy`` (its
    content keys), and the embedding (``spec_id``, ``dim``, its name for messages)."""

    prototypes: tuple[Structure, ...]
    keyword: KeywordIndex
    strategy: Strategy
    spec_id: str
    dim: int
    embedder: str
    passages: Embedder | None = None
    """The embedder, when it splits a long note into passages (:mod:`coniti.passages`)."""

    @property
    def versioned(self) -> bool:
        """Every structure keeps its rows' versions (needed to fold events and mask by seq)."""
        return all(p.supports_as_of for p in self.prototypes)

    @property
    def persistent(self) -> bool:
        """Every structure can be saved as arrays."""
        return all(p.persistent for p in self.prototypes)

    def spawn(self, seq: int | None = None) -> NamespaceIndex:
        """A fresh, empty index tagged with ``seq``."""
        index = NamespaceIndex(
            structures=[p.spawn() for p in self.prototypes], keyword=self.keyword.spawn(), seq=seq,
            passages=self.passages,
        )
        index.keyword.seq = seq or 0
        return index

    def content_keys(self, notes: Sequence[Note]) -> list[str | None]:
        return self.strategy.content_keys(notes)

    def refuse_mismatch(self, stored: Any, ns: tuple[str, ...], what: str = "memory") -> None:
        """Raise :class:`EmbeddingMismatch` when ``stored`` is not this embedding's spec id."""
        if stored != self.spec_id:
            raise EmbeddingMismatch(
                f"{what} in namespace {namespace_text(ns)} was embedded with {stored!r}; this engine uses "
                f"{self.spec_id!r} ({self.embedder}). Open it with the embedding that wrote it."
            )

    def check_records(self, ns: tuple[str, ...], records: Iterable[MemoryRecord]) -> None:
        """Refuse a record embedded with another embedding."""
        for record in records:
            if record.embedding_id is not None and record.embedding_id != self.spec_id:
                self.refuse_mismatch(record.embedding_id, ns, what=f"record {record.id!r}")

    def check_dim(self, ns: tuple[str, ...], width: int) -> None:
        """Refuse vectors of ``width`` other than this embedding's."""
        if width != self.dim:
            raise EmbeddingMismatch(
                f"namespace {namespace_text(ns)} holds vectors of length {width}; "
                f"{self.spec_id!r} gives {self.dim}"
            )


def with_vectors(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """The records that have a vector: a record without one is in no structure (never a hit)."""
    return [r for r in records if r.vector is not None]


class Folder:
    """Folds the events of one namespace into its index, in sequence order: a put ends the id's
    live row (a replacement) and adds the new one (consecutive puts are added as one batch), a
    delete ends the live row, a clear ends every live row, an erase drops every row of the id, a
    metadata write of the embedding id (``key``) is checked. Puts whose content was erased, and
    records without a vector, add no row. Call :meth:`flush` after the last event."""

    def __init__(self, recipe: Recipe, ns: tuple[str, ...], index: NamespaceIndex, key: str) -> None:
        self.recipe = recipe
        self.ns = ns
        self.index = index
        self.key = key
        self._reset()

    def _reset(self) -> None:
        self.ids: list[str] = []
        self.vectors: list[np.ndarray] = []
        self.times: list[float] = []
        self.born: list[int] = []
        self.notes: list[Note] = []
        self.expires: list[float | None] = []
        self.pending: set[str] = set()

    def event(self, event: Event) -> None:
        index = self.index
        kind = event.kind
        if kind == "meta":
            if event.key == self.key and event.value is not None:
                self.recipe.refuse_mismatch(event.value, self.ns)
            return
        if kind in ("op", "feedback"):  # feedback changes no record (hybrid reads weights at ask)
            return
        if kind == "clear":
            self.flush()
            index.end_live(event.seq)
            return
        id_ = event.id
        if id_ is None:
            return
        if kind == "erase":
            if id_ in self.pending:
                self.flush()
            index.purge([id_])
            return
        self.change(event.seq, id_, event.record if kind == "put" else None)

    def change(self, seq: int, id_: str, record: MemoryRecord | None) -> None:
        """The change of ``id_`` by event ``seq``: a put of ``record``, or (None) a delete or a put
        whose content was erased. What :meth:`event` does with a ``put`` or ``delete`` event."""
        if id_ in self.pending:
            self.flush()
        index = self.index
        if id_ in index:  # a delete, or a put that replaces the live version
            index.end([id_], [seq])
        if record is None or record.vector is None:
            return
        if record.embedding_id is not None and record.embedding_id != self.recipe.spec_id:
            self.recipe.refuse_mismatch(record.embedding_id, self.ns, what=f"record {id_!r}")
        self.ids.append(id_)
        self.vectors.append(record.vector)
        self.times.append(record.note.timestamp)
        self.born.append(seq)
        self.notes.append(record.note)
        self.expires.append(record.expires_at)
        self.pending.add(id_)
        if len(self.ids) >= FOLD_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.ids:
            return
        matrix = np.stack(self.vectors)
        self.recipe.check_dim(self.ns, matrix.shape[1])
        texts = [n.text for n in self.notes]
        self.index.add_rows(self.ids, matrix, np.array(self.times, dtype=np.float64),
                            np.array(self.born, dtype=np.int64), texts)  # fmt: skip
        self.index.add_text(
            self.ids, texts, self.times, self.born, self.recipe.content_keys(self.notes),
            expires=self.expires, threads=[thread_of(n.metadata) for n in self.notes],
        )  # fmt: skip
        self._reset()


def _rows(structure: Structure) -> dict[tuple[str, int], tuple[float, int, bytes]]:
    """Every row of a structure as ``(id, born) -> (time, died, vector bits)``."""
    state = structure.derived_state()
    ids = derived.unpack_strings(state["id_bytes"], state["id_ends"])
    return {
        (id_, int(born)): (float(t), int(died), vector.tobytes())
        for id_, born, t, died, vector in zip(
            ids, state["born"].tolist(), state["times"].tolist(), state["died"].tolist(),
            state["vecs"], strict=True,
        )
    }


def differences(a: NamespaceIndex, b: NamespaceIndex) -> list[str]:
    """What differs between two indexes of one namespace (empty: equal)."""
    out: list[str] = []
    for i, (left, right) in enumerate(zip(a.structures, b.structures, strict=True)):
        rows_a, rows_b = _rows(left), _rows(right)
        if rows_a != rows_b:
            extra = sorted(set(rows_a) - set(rows_b))[:3]
            missing = sorted(set(rows_b) - set(rows_a))[:3]
            changed = sorted(k for k in set(rows_a) & set(rows_b) if rows_a[k] != rows_b[k])[:3]
            out.append(
                f"structure {i} ({left.name}): rows not in a fresh build {extra}, rows missing "
                f"{missing}, rows that differ {changed}"
            )
    if a.content.pairs() != b.content.pairs():
        out.append("the content index differs from a fresh build")
    words_a, words_b = a.keyword.rows_state(), b.keyword.rows_state()
    if words_a != words_b:
        out.append(
            f"keyword index: rows not in a fresh build {sorted(words_a - words_b)[:3]}, rows missing "
            f"{sorted(words_b - words_a)[:3]}"
        )
    return out
